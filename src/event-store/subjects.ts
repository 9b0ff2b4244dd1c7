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
  readonly token: string;

  constructor(token: string) {
    super(`'${token}' cannot be a subject token (letters, digits, _ and - only)`);
    this.token = token;
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
  readonly prefix: string;

  constructor(prefix: string) {
    this.prefix = prefix;
  }

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

/** The id of an account's auto-apply quota aggregate for one UTC day (`yyyy-mm-dd`). */
export function quotaAggregateId(accountId: string, day: string): string {
  return `${accountId}_${day.replaceAll('-', '')}`;
}

/**
 * The address of each aggregate's subject: the one mapping from ids to a consistency
 * boundary, used by the deciders' `streamOf`, the queries and tests.
 *
 * @example
 * ```ts
 * subjects.forAggregate(streams.account(workspaceId, accountId)) // '<prefix>.v1.<ws>.<acc>.account.<acc>'
 * ```
 */
export const streams = {
  workspace: (workspaceId: string): SubjectAddress => ({ workspaceId, accountId: null, aggregate: { type: 'workspace', id: workspaceId } }),
  key: (workspaceId: string, keyId: string): SubjectAddress => ({ workspaceId, accountId: null, aggregate: { type: 'key', id: keyId } }),
  account: (workspaceId: string, accountId: string): SubjectAddress => ({ workspaceId, accountId, aggregate: { type: 'account', id: accountId } }),
  /** A run's transcript (its tool calls); the run's lifecycle is decided on the account. */
  run: (workspaceId: string, accountId: string, runId: string): SubjectAddress => ({ workspaceId, accountId, aggregate: { type: 'run', id: runId } }),
  action: (workspaceId: string, accountId: string, actionId: string): SubjectAddress => ({ workspaceId, accountId, aggregate: { type: 'action', id: actionId } }),
  quota: (workspaceId: string, accountId: string, day: string): SubjectAddress => ({
    workspaceId,
    accountId,
    aggregate: { type: 'quota', id: quotaAggregateId(accountId, day) },
  }),
} as const;
