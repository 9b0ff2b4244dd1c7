import { sql, type Kysely, type Transaction } from 'kysely';
import type { Database } from '../../src/db/schema.ts';
import type { ActionAppliedData, DomainEvent } from '../../src/events/catalogue/index.ts';
import type { StoredEvent } from '../../src/event-store/event-store.ts';
import type { EditedFrom } from './approvals-tables.ts';
import type { ApprovalRow } from './approval-view.ts';
import type { Projection } from '../runtime/projection.ts';
import { clipText } from '../../src/text/clip-text.ts';
import { sharedSettingsOf } from '../../src/policy/policy-context.ts';
import { actorKey } from '../../commands/action/action-state.ts';

export const APPROVALS_PROJECTION = 'approvals';

/** Every action of every account with its current status: the approvals view. */
export const approvalsProjection: Projection = {
  name: APPROVALS_PROJECTION,
  // 4: portfolio_id and shared_budget_id, what else a budget or target change moves (the learning period).
  version: 4,
  tables: ['approvals'],

  async createTables(db: Kysely<any>) {
    await db.schema
      .createTable('approvals')
      .addColumn('id', 'text', (c) => c.primaryKey())
      .addColumn('workspace_id', 'text', (c) => c.notNull())
      .addColumn('account_id', 'text', (c) => c.notNull())
      .addColumn('run_id', 'text')
      .addColumn('kind', 'text', (c) => c.notNull())
      .addColumn('summary', 'text', (c) => c.notNull())
      .addColumn('reason', 'text', (c) => c.notNull())
      .addColumn('params', 'jsonb', (c) => c.notNull())
      .addColumn('risk_tier', 'text', (c) => c.notNull())
      .addColumn('disposition', 'text', (c) => c.notNull())
      .addColumn('policy_reasons', 'jsonb', (c) => c.notNull())
      .addColumn('status', 'text', (c) => c.notNull())
      .addColumn('status_reason', 'text')
      .addColumn('original', 'jsonb')
      .addColumn('edited_at', 'timestamptz')
      .addColumn('edited_by', 'text')
      .addColumn('apply_attempts', 'integer', (c) => c.notNull())
      .addColumn('proposed_seq', 'bigint', (c) => c.notNull())
      .addColumn('created_at', 'timestamptz', (c) => c.notNull())
      .addColumn('updated_at', 'timestamptz', (c) => c.notNull())
      .addColumn('last_seq', 'bigint', (c) => c.notNull())
      // The portfolio strategy a target change sets, the shared budget a budget change sets: they
      // move every campaign on them, which the learning period counts (applied-change-lookup.ts).
      .addColumn('portfolio_id', 'text')
      .addColumn('shared_budget_id', 'text')
      .execute();
    await db.schema.createIndex('approvals_account').on('approvals').columns(['account_id', 'proposed_seq']).execute();
  },

  // Every event apply acts on is an action's (ActionProposed, ActionApproved, ...).
  handles: (event) => event.type.startsWith('Action'),

  /**
   * Folds the batch over the rows it touches in memory and writes each row once: new actions
   * in one insert, changed ones in one update. The same rows as one statement per event:
   * an update of an action that does not exist changes nothing, and a second proposal of an
   * id (in the table or earlier in the batch) makes the insert fail with a unique violation,
   * so the batch is applied again event by event (applyIsolating) and that proposal parked.
   */
  async apply(trx: Transaction<Database>, events: readonly StoredEvent[]) {
    const targetOf = (event: DomainEvent) => (event.type === 'ActionProposed' ? event.data.action_id : event.aggregate.id);
    const firstIsProposal = new Map<string, boolean>();
    for (const { event } of events) {
      const id = targetOf(event as DomainEvent);
      if (!firstIsProposal.has(id)) firstIsProposal.set(id, (event as DomainEvent).type === 'ActionProposed');
    }
    const stored = [...firstIsProposal].filter(([, proposal]) => !proposal).map(([id]) => id);
    const rows = new Map<string, ApprovalRecord>();
    if (stored.length > 0) {
      // edited_at as Postgres writes it: written back unchanged, it must not lose its microseconds to a Date.
      const found = await trx
        .selectFrom('approvals')
        .selectAll()
        .select(sql<string | null>`edited_at::text`.as('edited_at_text'))
        .where(sql<boolean>`id = any(${stored}::text[])`)
        .execute();
      for (const row of found) rows.set(row.id, toApprovalRecord(row));
    }
    const inserted: ApprovalRecord[] = [];
    const insertedRows = new Set<ApprovalRecord>();
    const updated = new Set<ApprovalRecord>();
    for (const { seq, event: raw } of events) {
      const event = raw as DomainEvent;
      if (event.type === 'ActionProposed') {
        const record: ApprovalRecord = {
          id: event.data.action_id,
          workspace_id: event.workspace_id,
          account_id: event.account_id!,
          run_id: event.data.run_id,
          kind: event.data.kind,
          summary: event.data.summary,
          reason: event.data.reason,
          params: event.data.params,
          risk_tier: event.data.risk_tier,
          disposition: event.data.disposition,
          policy_reasons: event.data.policy_reasons,
          status: event.data.disposition,
          status_reason: null,
          original: null,
          edited_at: null,
          edited_by: null,
          apply_attempts: 0,
          proposed_seq: seq,
          created_at: event.time,
          updated_at: event.time,
          last_seq: seq,
          ...sharedSettingColumns(event.data.kind, event.data.based_on),
        };
        inserted.push(record);
        insertedRows.add(record);
        // A later event of the batch changes what is inserted; a duplicate id fails the insert.
        if (!rows.has(record.id)) rows.set(record.id, record);
        continue;
      }
      const row = rows.get(event.aggregate.id);
      if (!row) continue;
      const setStatus = (status: string, statusReason: string | null) => Object.assign(row, { status, status_reason: statusReason });
      switch (event.type) {
        case 'ActionEdited': {
          const { before, after } = event.data;
          // The first version stays the original: a returned action edited again keeps pointing at the proposal.
          row.original ??= { summary: before.summary, params: before.params, risk_tier: before.risk_tier, policy_reasons: before.policy_reasons };
          Object.assign(row, {
            summary: after.summary,
            params: after.params,
            risk_tier: after.risk_tier,
            policy_reasons: after.policy_reasons,
            edited_at: event.time,
            edited_by: actorKey(event.actor),
            ...sharedSettingColumns(row.kind, after.based_on),
          });
          break;
        }
        case 'ActionApproved':
          setStatus('approved', event.data.note || null);
          break;
        case 'ActionRejected':
          setStatus('rejected', event.data.reason || null);
          break;
        case 'ActionApplyStarted':
          setStatus('applying', null);
          row.apply_attempts = event.data.attempt;
          break;
        case 'ActionApplied':
          setStatus('applied', appliedReason(event.data));
          break;
        case 'ActionApplyFailed':
          setStatus('applying', `attempt ${event.data.attempt} failed: ${event.data.error}`);
          break;
        case 'ActionReturnedToQueue':
          setStatus('returned', event.data.reason);
          break;
        default:
          continue;
      }
      row.updated_at = event.time;
      row.last_seq = seq;
      if (!insertedRows.has(row)) updated.add(row);
    }
    if (inserted.length > 0) {
      await sql`
        insert into approvals (${APPROVAL_COLUMN_NAMES})
        select ${APPROVAL_COLUMN_NAMES} from json_to_recordset(${JSON.stringify(inserted)}::json) as r(${APPROVAL_COLUMNS})
      `.execute(trx);
    }
    if (updated.size > 0) {
      await sql`
        update approvals set
          summary = r.summary, params = r.params, risk_tier = r.risk_tier, policy_reasons = r.policy_reasons, status = r.status,
          status_reason = r.status_reason, original = r.original, edited_at = r.edited_at, edited_by = r.edited_by,
          apply_attempts = r.apply_attempts, updated_at = r.updated_at, last_seq = r.last_seq,
          portfolio_id = r.portfolio_id, shared_budget_id = r.shared_budget_id
        from json_to_recordset(${JSON.stringify([...updated])}::json) as r(${APPROVAL_COLUMNS})
        where approvals.id = r.id
      `.execute(trx);
    }
  },
};

/** An approvals row as the fold works on it: timestamps as ISO strings, JSON columns as values. */
interface ApprovalRecord {
  id: string;
  workspace_id: string;
  account_id: string;
  run_id: string | null;
  kind: string;
  summary: string;
  reason: string;
  params: Record<string, unknown>;
  risk_tier: string;
  disposition: string;
  policy_reasons: readonly string[];
  status: string;
  status_reason: string | null;
  original: EditedFrom | null;
  edited_at: string | null;
  edited_by: string | null;
  apply_attempts: number;
  proposed_seq: number;
  created_at: string;
  updated_at: string;
  last_seq: number;
  portfolio_id: string | null;
  shared_budget_id: string | null;
}


const APPROVAL_COLUMN_TYPES: readonly (readonly [keyof ApprovalRecord, string])[] = [
  ['id', 'text'], ['workspace_id', 'text'], ['account_id', 'text'], ['run_id', 'text'], ['kind', 'text'], ['summary', 'text'],
  ['reason', 'text'], ['params', 'jsonb'], ['risk_tier', 'text'], ['disposition', 'text'], ['policy_reasons', 'jsonb'],
  ['status', 'text'], ['status_reason', 'text'], ['original', 'jsonb'], ['edited_at', 'timestamptz'], ['edited_by', 'text'],
  ['apply_attempts', 'integer'], ['proposed_seq', 'bigint'], ['created_at', 'timestamptz'], ['updated_at', 'timestamptz'],
  ['last_seq', 'bigint'], ['portfolio_id', 'text'], ['shared_budget_id', 'text'],
];
const APPROVAL_COLUMN_NAMES = sql.raw(APPROVAL_COLUMN_TYPES.map(([name]) => name).join(', '));
/** The approvals columns as `json_to_recordset` reads them from the JSON of ApprovalRecords. */
const APPROVAL_COLUMNS = sql.raw(APPROVAL_COLUMN_TYPES.map(([name, type]) => `${name} ${type}`).join(', '));

function toApprovalRecord({ edited_at_text, ...row }: ApprovalRow & { edited_at_text: string | null }): ApprovalRecord {
  return {
    ...row,
    created_at: row.created_at.toISOString(),
    updated_at: row.updated_at.toISOString(),
    edited_at: edited_at_text,
  };
}

/**
 * A partly applied change says which parts went live and which the platform refused, each
 * refusal with the platform's message and code; a change applied whole needs no reason.
 */
function appliedReason(data: ActionAppliedData): string | null {
  const failures = data.partial_failures ?? [];
  if (failures.length === 0) return null;
  const applied = (data.applied_operations ?? []).map((o) => o.subject);
  const refused = failures.map((f) => `${f.subject}: ${f.message} (${f.error_code})`).join('; ');
  // Events recorded before applied_operations existed name only the refusals.
  return clipText(applied.length > 0 ? `applied ${applied.join(', ')}; refused ${refused}` : `applied except ${refused}`, 4000);
}

/** The portfolio and shared budget a change sets, as the approvals row keeps them (the learning period reads them). */
function sharedSettingColumns(kind: string, basedOn: unknown): Pick<ApprovalRecord, 'portfolio_id' | 'shared_budget_id'> {
  const { portfolioId, sharedBudgetId } = sharedSettingsOf(kind, basedOn);
  return { portfolio_id: portfolioId, shared_budget_id: sharedBudgetId };
}
