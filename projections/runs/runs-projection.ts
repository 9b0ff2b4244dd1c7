import type { Kysely, Transaction } from 'kysely';
import type { Database } from '../../src/db/schema.ts';
import type { DomainEvent } from '../../src/events/catalogue/index.ts';
import type { StoredEvent } from '../../src/event-store/event-store.ts';
import { sql } from 'kysely';
import { RUN_LIMITS } from '../../src/agent/run-limits.ts';
import type { Projection } from '../runtime/projection.ts';

export const RUNS_PROJECTION = 'runs';

/** The runs GET /api/v1/runs/{runId} serves: status, timings, result and error of each run. */
export const runsProjection: Projection = {
  name: RUNS_PROJECTION,
  version: 3,
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

  async apply(trx: Transaction<Database>, events: readonly StoredEvent[]) {
    for (const { seq, event: raw } of events) {
      const event = raw as DomainEvent;
      switch (event.type) {
        case 'RunQueued':
          await trx
            .insertInto('runs')
            .values({
              id: event.data.run_id,
              workspace_id: event.workspace_id,
              account_id: event.account_id!,
              key_id: event.data.key_id,
              scope: event.data.scope,
              status: 'queued',
              brief: event.data.brief,
              auto_apply: event.data.auto_apply,
              agent: null,
              worker_id: null,
              created_at: event.time,
              started_at: null,
              finished_at: null,
              duration_ms: null,
              result_text: '',
              truncated: false,
              usage: JSON.stringify({ input_tokens: 0, output_tokens: 0, steps: 0 }),
              error: null,
              tool_calls: '[]',
              tool_call_count: 0,
              queued_seq: seq,
              last_seq: seq,
            })
            .execute();
          break;
        case 'RunStarted':
          await trx
            .updateTable('runs')
            .set({
              status: 'running',
              started_at: event.time,
              worker_id: event.data.worker_id,
              agent: JSON.stringify(event.data.agent),
              last_seq: seq,
            })
            .where('id', '=', event.data.run_id)
            .execute();
          break;
        case 'RunCanceled':
          await trx
            .updateTable('runs')
            .set({ status: 'canceled', finished_at: event.time, last_seq: seq })
            .where('id', '=', event.data.run_id)
            .execute();
          break;
        case 'RunSucceeded':
          await trx
            .updateTable('runs')
            .set({
              status: 'succeeded',
              finished_at: event.time,
              duration_ms: event.data.duration_ms,
              result_text: event.data.text,
              truncated: event.data.truncated,
              usage: JSON.stringify(event.data.usage),
              last_seq: seq,
            })
            .where('id', '=', event.data.run_id)
            .execute();
          break;
        case 'RunFailed':
          await trx
            .updateTable('runs')
            .set({
              status: 'failed',
              finished_at: event.time,
              duration_ms: event.data.duration_ms,
              result_text: event.data.text,
              truncated: event.data.truncated,
              usage: JSON.stringify(event.data.usage),
              error: JSON.stringify(event.data.error),
              last_seq: seq,
            })
            .where('id', '=', event.data.run_id)
            .execute();
          break;
        case 'ToolCalled': {
          // result.tool_calls keeps name, input and ok; outputs stay in the event log only.
          const entry = JSON.stringify([{ name: event.data.name, input: event.data.input, ok: event.data.ok }]);
          await trx
            .updateTable('runs')
            .set({
              tool_call_count: sql`tool_call_count + 1`,
              tool_calls: sql`case when jsonb_array_length(tool_calls) < ${RUN_LIMITS.maxRecordedToolCalls} then tool_calls || ${entry}::jsonb else tool_calls end`,
              last_seq: seq,
            })
            .where('id', '=', event.data.run_id)
            .execute();
          break;
        }
        case 'ActionProposed':
          if (event.data.run_id === null) break;
          await trx
            .insertInto('run_actions')
            .values({
              id: event.data.action_id,
              run_id: event.data.run_id,
              account_id: event.account_id!,
              kind: event.data.kind,
              summary: event.data.summary,
              risk_tier: event.data.risk_tier,
              disposition: event.data.disposition,
              policy_reasons: JSON.stringify(event.data.policy_reasons),
              seq,
            })
            .execute();
          await trx.updateTable('runs').set({ last_seq: seq }).where('id', '=', event.data.run_id).execute();
          break;
        default:
          break;
      }
    }
  },
};
