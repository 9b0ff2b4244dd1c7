import type { Kysely, Selectable, Transaction } from 'kysely';
import type { Database } from '../../src/db/schema.ts';
import type { DomainEvent } from '../../src/events/catalogue/index.ts';
import type { StoredEvent } from '../../src/event-store/event-store.ts';
import type { Projection } from '../runtime/projection.ts';
import { foldRunEvents, runIdOf, type RunRecord } from './fold-runs.ts';
import type { RunsTable } from './runs-tables.ts';

export const RUNS_PROJECTION = 'runs';

/** The runs GET /api/v1/runs/{runId} serves: status, timings, result and error of each run. */
export const runsProjection: Projection = {
  name: RUNS_PROJECTION,
  // 5: canceled runs (and runs failed before starting) have a duration_ms.
  version: 5,
  tables: ['run_actions', 'runs'],

  async createTables(db: Kysely<any>) {
    await db.schema
      .createTable('runs')
      .addColumn('id', 'text', (c) => c.primaryKey())
      .addColumn('workspace_id', 'text', (c) => c.notNull())
      .addColumn('account_id', 'text', (c) => c.notNull())
      .addColumn('key_id', 'text', (c) => c.notNull())
      .addColumn('scope', 'text', (c) => c.notNull())
      .addColumn('status', 'text', (c) => c.notNull())
      .addColumn('brief', 'text', (c) => c.notNull())
      .addColumn('auto_apply', 'boolean', (c) => c.notNull())
      .addColumn('agent', 'jsonb')
      .addColumn('worker_id', 'text')
      .addColumn('created_at', 'timestamptz', (c) => c.notNull())
      .addColumn('started_at', 'timestamptz')
      .addColumn('finished_at', 'timestamptz')
      .addColumn('duration_ms', 'integer')
      .addColumn('result_text', 'text', (c) => c.notNull().defaultTo(''))
      .addColumn('truncated', 'boolean', (c) => c.notNull().defaultTo(false))
      .addColumn('usage', 'jsonb', (c) => c.notNull())
      .addColumn('error', 'jsonb')
      .addColumn('tool_calls', 'jsonb', (c) => c.notNull())
      .addColumn('tool_call_count', 'integer', (c) => c.notNull().defaultTo(0))
      .addColumn('queued_seq', 'bigint', (c) => c.notNull())
      .addColumn('last_seq', 'bigint', (c) => c.notNull())
      .execute();
    await db.schema.createIndex('runs_account').on('runs').columns(['account_id', 'created_at']).execute();
    await db.schema
      .createTable('run_actions')
      .addColumn('id', 'text', (c) => c.primaryKey())
      .addColumn('run_id', 'text', (c) => c.notNull())
      .addColumn('account_id', 'text', (c) => c.notNull())
      .addColumn('kind', 'text', (c) => c.notNull())
      .addColumn('summary', 'text', (c) => c.notNull())
      .addColumn('risk_tier', 'text', (c) => c.notNull())
      .addColumn('disposition', 'text', (c) => c.notNull())
      .addColumn('policy_reasons', 'jsonb', (c) => c.notNull())
      .addColumn('seq', 'bigint', (c) => c.notNull())
      .execute();
    await db.schema.createIndex('run_actions_run').on('run_actions').columns(['run_id', 'seq']).execute();
  },

  handles: (event) => runIdOf(event as DomainEvent) !== null,

  async apply(trx: Transaction<Database>, events: readonly StoredEvent[]) {
    const runIds = [...new Set(events.map((e) => runIdOf(e.event as DomainEvent)).filter((id): id is string => id !== null))];
    if (runIds.length === 0) return;
    const rows = new Map<string, RunRecord>();
    for (const chunk of chunks(runIds, 1000)) {
      for (const row of await trx.selectFrom('runs').selectAll().where('id', 'in', chunk).execute()) rows.set(row.id, toRunRecord(row));
    }
    const { changed, actions } = foldRunEvents(rows, events);
    for (const chunk of chunks([...changed], 1000)) {
      const values = chunk.map((id) => {
        const row = rows.get(id)!;
        return {
          ...row,
          agent: row.agent === null ? null : JSON.stringify(row.agent),
          usage: JSON.stringify(row.usage),
          error: row.error === null ? null : JSON.stringify(row.error),
          tool_calls: JSON.stringify(row.tool_calls),
        };
      });
      await trx
        .insertInto('runs')
        .values(values)
        .onConflict((oc) =>
          oc.column('id').doUpdateSet((eb) => ({
            status: eb.ref('excluded.status'),
            agent: eb.ref('excluded.agent'),
            worker_id: eb.ref('excluded.worker_id'),
            started_at: eb.ref('excluded.started_at'),
            finished_at: eb.ref('excluded.finished_at'),
            duration_ms: eb.ref('excluded.duration_ms'),
            result_text: eb.ref('excluded.result_text'),
            truncated: eb.ref('excluded.truncated'),
            usage: eb.ref('excluded.usage'),
            error: eb.ref('excluded.error'),
            tool_calls: eb.ref('excluded.tool_calls'),
            tool_call_count: eb.ref('excluded.tool_call_count'),
            last_seq: eb.ref('excluded.last_seq'),
          })),
        )
        .execute();
    }
    for (const chunk of chunks(actions, 1000)) {
      await trx
        .insertInto('run_actions')
        .values(chunk.map((a) => ({ ...a, policy_reasons: JSON.stringify(a.policy_reasons) })))
        .execute();
    }
  },
};

function chunks<T>(items: readonly T[], size: number): T[][] {
  const result: T[][] = [];
  for (let i = 0; i < items.length; i += size) result.push(items.slice(i, i + size));
  return result;
}

/** A stored row as the fold takes it: timestamps as ISO strings. */
function toRunRecord(row: Selectable<RunsTable>): RunRecord {
  return {
    ...row,
    created_at: row.created_at.toISOString(),
    started_at: row.started_at?.toISOString() ?? null,
    finished_at: row.finished_at?.toISOString() ?? null,
  };
}
