import { sql, type Kysely, type Transaction } from 'kysely';
import type { Database } from '../../src/db/schema.ts';
import type { ActionAppliedData, DomainEvent } from '../../src/events/catalogue/index.ts';
import type { StoredEvent } from '../../src/event-store/event-store.ts';
import type { Projection } from '../runtime/projection.ts';

export const APPROVALS_PROJECTION = 'approvals';

/** Every action of every account with its current status: the approvals view. */
export const approvalsProjection: Projection = {
  name: APPROVALS_PROJECTION,
  version: 3,
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
      .execute();
    await db.schema.createIndex('approvals_account').on('approvals').columns(['account_id', 'proposed_seq']).execute();
  },

  // Every event apply acts on is an action's (ActionProposed, ActionApproved, ...).
  handles: (event) => event.type.startsWith('Action'),

  async apply(trx: Transaction<Database>, events: readonly StoredEvent[]) {
    for (const { seq, event: raw } of events) {
      const event = raw as DomainEvent;
      const update = (status: string, statusReason: string | null, extra: Record<string, unknown> = {}) =>
        trx
          .updateTable('approvals')
          .set({ status: status as never, status_reason: statusReason, updated_at: event.time, last_seq: seq, ...extra })
          .where('id', '=', event.aggregate.id)
          .execute();
      switch (event.type) {
        case 'ActionProposed':
          await trx
            .insertInto('approvals')
            .values({
              id: event.data.action_id,
              workspace_id: event.workspace_id,
              account_id: event.account_id!,
              run_id: event.data.run_id,
              kind: event.data.kind,
              summary: event.data.summary,
              reason: event.data.reason,
              params: JSON.stringify(event.data.params),
              risk_tier: event.data.risk_tier,
              disposition: event.data.disposition,
              policy_reasons: JSON.stringify(event.data.policy_reasons),
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
            })
            .execute();
          break;
        case 'ActionEdited': {
          const { before, after } = event.data;
          // The first version stays the original: a returned action edited again keeps pointing at the proposal.
          const original = JSON.stringify({ summary: before.summary, params: before.params, risk_tier: before.risk_tier, policy_reasons: before.policy_reasons });
          await trx
            .updateTable('approvals')
            .set({
              summary: after.summary,
              params: JSON.stringify(after.params),
              risk_tier: after.risk_tier,
              policy_reasons: JSON.stringify(after.policy_reasons),
              original: sql<string>`coalesce(original, ${original}::jsonb)`,
              edited_at: event.time,
              edited_by: `${event.actor.kind}:${event.actor.id}`,
              updated_at: event.time,
              last_seq: seq,
            })
            .where('id', '=', event.aggregate.id)
            .execute();
          break;
        }
        case 'ActionApproved':
          await update('approved', event.data.note || null);
          break;
        case 'ActionRejected':
          await update('rejected', event.data.reason || null);
          break;
        case 'ActionApplyStarted':
          await update('applying', null, { apply_attempts: event.data.attempt });
          break;
        case 'ActionApplied':
          await update('applied', appliedReason(event.data));
          break;
        case 'ActionApplyFailed':
          await update('applying', `attempt ${event.data.attempt} failed: ${event.data.error}`);
          break;
        case 'ActionReturnedToQueue':
          await update('returned', event.data.reason);
          break;
        default:
          break;
      }
    }
  },
};

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
  return (applied.length > 0 ? `applied ${applied.join(', ')}; refused ${refused}` : `applied except ${refused}`).slice(0, 4000);
}
