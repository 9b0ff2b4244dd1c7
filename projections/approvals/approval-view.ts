import type { Kysely, Selectable } from 'kysely';
import type { Database } from '../../src/db/schema.ts';
import type { ApprovalsTable } from './approvals-tables.ts';

export type ApprovalRow = Selectable<ApprovalsTable>;

export async function findApproval(db: Kysely<Database>, workspaceId: string, accountId: string, actionId: string) {
  return db
    .selectFrom('approvals')
    .selectAll()
    .where('id', '=', actionId)
    .where('account_id', '=', accountId)
    .where('workspace_id', '=', workspaceId)
    .executeTakeFirst();
}

/** The orders an account's actions can be listed in, by when they were proposed. */
export const APPROVALS_ORDERS = ['oldest_first', 'newest_first'] as const;
export type ApprovalsOrder = (typeof APPROVALS_ORDERS)[number];

export interface ApprovalFilter {
  readonly status?: string;
  readonly runId?: string;
  /** Keyset cursor: only actions proposed after this stream sequence (before it, newest first). */
  readonly afterSeq?: number;
  readonly limit: number;
  /** Default oldest_first. */
  readonly order?: ApprovalsOrder;
}

/** One page of an account's actions in the filter's order; `next` is the cursor of the following page. */
export async function listApprovals(db: Kysely<Database>, workspaceId: string, accountId: string, filter: ApprovalFilter) {
  const newestFirst = filter.order === 'newest_first';
  let query = db
    .selectFrom('approvals')
    .selectAll()
    .where('workspace_id', '=', workspaceId)
    .where('account_id', '=', accountId)
    .orderBy('proposed_seq', newestFirst ? 'desc' : 'asc')
    .limit(filter.limit + 1);
  if (filter.status) query = query.where('status', '=', filter.status as never);
  if (filter.runId) query = query.where('run_id', '=', filter.runId);
  if (filter.afterSeq !== undefined) query = query.where('proposed_seq', newestFirst ? '<' : '>', filter.afterSeq);
  const rows = await query.execute();
  const page = rows.slice(0, filter.limit);
  const next = rows.length > filter.limit ? page[page.length - 1]!.proposed_seq : null;
  return { rows: page, next };
}
