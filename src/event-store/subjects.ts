import type { AggregateRef } from '../events/envelope.ts';

/**
 * The subject hierarchy — a public, versioned contract (docs/consumers.md):
 *
 *   <prefix>.v1.<workspace_id>.<account_id|_>.<aggregate_type>.<aggregate_id>
 *
 * One subject per aggregate is the consistency boundary: appends to it carry the
 * expected last subject sequence. Workspace-level aggregates (workspace, key) use `_` as
 * the account token so `<prefix>.v1.<ws>.*.>` still selects a whole workspace.
 */
export const SUBJECT_VERSION = 'v1';
export const NO_ACCOUNT_TOKEN = '_';

const TOKEN = /^[A-Za-z0-9_-]{1,64}$/;

export class InvalidSubjectTokenError extends Error {
  constructor(readonly token: string) {
    super(`'${token}' cannot be a subject token (letters, digits, _ and - only)`);
    this.name = 'InvalidSubjectTokenError';
  }
}

function checked(token: string): string {
  if (!TOKEN.test(token)) throw new InvalidSubjectTokenError(token);
  return token;
}

export interface SubjectAddress {
  readonly workspaceId: string;
  readonly accountId: string | null;
  readonly aggregate: AggregateRef;
}

export class Subjects {
  constructor(readonly prefix: string) {}

  /** Every event of this deployment. */
  get all(): string {
    return `${this.prefix}.>`;
  }

  forAggregate({ workspaceId, accountId, aggregate }: SubjectAddress): string {
    return [
      this.prefix,
      SUBJECT_VERSION,
      checked(workspaceId),
      accountId === null ? NO_ACCOUNT_TOKEN : checked(accountId),
      aggregate.type,
      checked(aggregate.id),
    ].join('.');
  }

  /** A filter for a workspace, an account of it, and optionally one aggregate type. */
  filter(workspaceId = '*', accountId = '*', aggregateType = '*'): string {
    return `${this.prefix}.${SUBJECT_VERSION}.${workspaceId}.${accountId}.${aggregateType}.*`;
  }
}
