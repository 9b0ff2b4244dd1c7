import type { Kysely, Selectable } from 'kysely';
import type { Database } from '../../src/db/schema.ts';
import { approvalsUrl } from '../../src/policy/proposal-service.ts';
import type { ApprovalsTable } from './approvals-tables.ts';

export type ApprovalRow = Selectable<ApprovalsTable>;

/** An action as the approvals endpoints show it: the specification's Action plus its lifecycle. */
export interface ApprovalRepresentation {
  readonly id: string;
  readonly object: 'action';
  readonly kind: string;
  readonly summary: string;
  readonly reason: string;
  readonly params: Record<string, unknown>;
  readonly risk_tier: string;
  readonly disposition: string;
  readonly policy_reasons: readonly string[];
  readonly approvals_url: string;
  readonly status: string;
  readonly status_reason: string | null;
  readonly run_id: string | null;
  readonly project_id: string;
  readonly created_at: string;
  readonly updated_at: string;
}

export function toApprovalRepresentation(row: ApprovalRow, publicBaseUrl: string): ApprovalRepresentation {
  return {
    id: row.id,
    object: 'action',
    kind: row.kind,
    summary: row.summary,
    reason: row.reason,
    params: row.params,
    risk_tier: row.risk_tier,
    disposition: row.disposition,
    policy_reasons: row.policy_reasons,
    approvals_url: approvalsUrl(publicBaseUrl, row.account_id),
    status: row.status,
    status_reason: row.status_reason,
    run_id: row.run_id,
    project_id: row.account_id,
    created_at: row.created_at.toISOString(),
    updated_at: row.updated_at.toISOString(),
  };
}

export async function findApproval(db: Kysely<Database>, workspaceId: string, accountId: string, actionId: string) {
  return db
    .selectFrom('approvals')
    .selectAll()
    .where('id', '=', actionId)
    .where('account_id', '=', accountId)
    .where('workspace_id', '=', workspaceId)
    .executeTakeFirst();
}

export interface ApprovalFilter {
  readonly status?: string;
  readonly runId?: string;
  /** Keyset cursor: only actions proposed after this stream sequence. */
  readonly afterSeq?: number;
  readonly limit: number;
}

/** One page of an account's actions, oldest first; `next` is the cursor of the following page. */
export async function listApprovals(db: Kysely<Database>, workspaceId: string, accountId: string, filter: ApprovalFilter) {
  let query = db
    .selectFrom('approvals')
    .selectAll()
    .where('workspace_id', '=', workspaceId)
    .where('account_id', '=', accountId)
    .orderBy('proposed_seq')
    .limit(filter.limit + 1);
  if (filter.status) query = query.where('status', '=', filter.status as never);
  if (filter.runId) query = query.where('run_id', '=', filter.runId);
  if (filter.afterSeq !== undefined) query = query.where('proposed_seq', '>', filter.afterSeq);
  const rows = await query.execute();
  const page = rows.slice(0, filter.limit);
  const next = rows.length > filter.limit ? page[page.length - 1]!.proposed_seq : null;
  return { rows: page, next };
}
