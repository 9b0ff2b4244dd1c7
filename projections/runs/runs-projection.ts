import { sql, type Kysely, type Selectable, type Transaction } from 'kysely';
import type { Database } from '../../src/db/schema.ts';
import type { DomainEvent } from '../../src/events/catalogue/index.ts';
import type { StoredEvent } from '../../src/event-store/event-store.ts';
import { copyRows, type CopyColumns } from '../../src/db/copy-rows.ts';
import { sqlStateOf } from '../runtime/apply-failure.ts';
import type { ApplyContext, Projection } from '../runtime/projection.ts';
import { inSavepoint } from '../runtime/savepoint.ts';
import { foldRunEvents, runIdOf, type RunActionRecord, type RunRecord } from './fold-runs.ts';
import type { RunsTable } from './runs-tables.ts';

export const RUNS_PROJECTION = 'runs';

/** The runs GET /api/v1/runs/{runId} serves: status, timings, result and error of each run. */
export const runsProjection: Projection = {
  name: RUNS_PROJECTION,
  // 5: canceled runs (and runs failed before starting) have a duration_ms.
  // 6: runs by workspace and time (the run quota's count), and each workspace's tokens per UTC day.
  // 7: no index on (account_id, created_at): nothing reads runs by account, and every insert paid for it.
  version: 7,
  tables: ['workspace_token_usage', 'run_actions', 'runs'],

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
    await db.schema.createIndex('runs_workspace').on('runs').columns(['workspace_id', 'created_at']).execute();
    // The token quota's figure: one row per workspace and day, instead of a sum over the day's runs per request.
    await db.schema
      .createTable('workspace_token_usage')
      .addColumn('workspace_id', 'text', (c) => c.notNull())
      .addColumn('day', 'date', (c) => c.notNull())
      .addColumn('tokens', 'bigint', (c) => c.notNull())
      .addPrimaryKeyConstraint('workspace_token_usage_pk', ['workspace_id', 'day'])
      .execute();
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

  async apply(trx: Transaction<Database>, events: readonly StoredEvent[], context?: ApplyContext) {
    const firstEventOf = new Map<string, DomainEvent['type']>();
    for (const { event } of events) {
      const runId = runIdOf(event as DomainEvent);
      if (runId !== null && !firstEventOf.has(runId)) firstEventOf.set(runId, (event as DomainEvent).type);
    }
    if (firstEventOf.size === 0) return;
    // A run whose first event here is RunQueued starts from a fresh record whatever is stored
    // (see foldRunEvents), so only the others are read.
    const stored = [...firstEventOf].filter(([, type]) => type !== 'RunQueued').map(([runId]) => runId);
    const rows = new Map<string, RunRecord>();
    if (stored.length > 0) {
      const found = await trx.selectFrom('runs').selectAll().where(sql<boolean>`id = any(${stored}::text[])`).execute();
      for (const row of found) rows.set(row.id, toRunRecord(row));
    }
    const endedBefore = new Set([...rows.values()].filter((row) => row.finished_at !== null).map((row) => row.id));
    const { changed, actions } = foldRunEvents(rows, events);
    if (changed.size > 0) {
      // A run queued in this batch is almost always new: it is copied in (COPY), which costs
      // Postgres about half what the upsert below does. When one is stored already (a second
      // RunQueued for a run) the copy fails as a whole: guarded, inside a savepoint of its own,
      // after which every run is upserted; unguarded, it fails the transaction, and the
      // projector applies the batch again guarded.
      const inserted: RunRecord[] = [];
      const upserted: RunRecord[] = [];
      for (const id of changed) (firstEventOf.get(id) === 'RunQueued' ? inserted : upserted).push(rows.get(id)!);
      if (inserted.length > 0) {
        if (context?.guarded === false) await copyRows(trx, 'runs', RUN_COLUMN_TYPES, inserted);
        else if (!(await insertUnlessStored(trx, inserted))) upserted.push(...inserted);
      }
      if (upserted.length > 0) await upsertRuns(trx, upserted);
    }
    if (actions.length > 0) await insertRunActions(trx, actions);
    const usage = tokensByWorkspaceDay([...changed].map((id) => rows.get(id)!).filter((row) => !endedBefore.has(row.id)));
    if (usage.length > 0) await addTokenUsage(trx, usage);
  },
};

const RUN_COLUMN_TYPES: CopyColumns<RunRecord> = [
  ['id', 'text'], ['workspace_id', 'text'], ['account_id', 'text'], ['key_id', 'text'], ['scope', 'text'], ['status', 'text'],
  ['brief', 'text'], ['auto_apply', 'boolean'], ['agent', 'jsonb'], ['worker_id', 'text'], ['created_at', 'timestamptz'],
  ['started_at', 'timestamptz'], ['finished_at', 'timestamptz'], ['duration_ms', 'integer'], ['result_text', 'text'],
  ['truncated', 'boolean'], ['usage', 'jsonb'], ['error', 'jsonb'], ['tool_calls', 'jsonb'], ['tool_call_count', 'integer'],
  ['queued_seq', 'bigint'], ['last_seq', 'bigint'],
];
const RUN_COLUMN_NAMES = sql.raw(RUN_COLUMN_TYPES.map(([name]) => name).join(', '));
/** The runs columns as `json_to_recordset` reads them from the JSON of RunRecords. */
const RUN_RECORD_COLUMNS = sql.raw(RUN_COLUMN_TYPES.map(([name, type]) => `${name} ${type}`).join(', '));

const UNIQUE_VIOLATION = '23505';

/** Copies new runs in; false, with nothing written, when one of them is stored already. */
async function insertUnlessStored(trx: Transaction<Database>, records: readonly RunRecord[]): Promise<boolean> {
  const failure = await inSavepoint(trx, 'runs_insert', async () => {
    await copyRows(trx, 'runs', RUN_COLUMN_TYPES, records);
  });
  if (failure === null) return true;
  if (sqlStateOf(failure) !== UNIQUE_VIOLATION) throw failure;
  return false;
}

/**
 * Writes runs queued before this batch (and those queued in it whose copy failed), in one
 * statement whose only parameter is their JSON: Postgres unpacks it, instead of the client
 * compiling and sending one parameter per column of every row. What a run's later events
 * cannot change (who queued it, when, its brief) is kept.
 */
async function upsertRuns(trx: Transaction<Database>, records: readonly RunRecord[]): Promise<void> {
  await sql`
    insert into runs (${RUN_COLUMN_NAMES}) select ${RUN_COLUMN_NAMES} from json_to_recordset(${JSON.stringify(records)}::json) as r(${RUN_RECORD_COLUMNS})
    on conflict (id) do update set
      status = excluded.status, agent = excluded.agent, worker_id = excluded.worker_id, started_at = excluded.started_at,
      finished_at = excluded.finished_at, duration_ms = excluded.duration_ms, result_text = excluded.result_text,
      truncated = excluded.truncated, usage = excluded.usage, error = excluded.error, tool_calls = excluded.tool_calls,
      tool_call_count = excluded.tool_call_count, last_seq = excluded.last_seq
  `.execute(trx);
}

interface TokenUsage {
  readonly workspace_id: string;
  /** UTC day the runs ended, YYYY-MM-DD. */
  readonly day: string;
  readonly tokens: number;
}

/** The tokens of runs that ended in this batch, per workspace and UTC day of their end (what the token quota counts). */
function tokensByWorkspaceDay(runs: readonly RunRecord[]): TokenUsage[] {
  const sums = new Map<string, TokenUsage>();
  for (const run of runs) {
    if (run.finished_at === null) continue;
    const tokens = run.usage.input_tokens + run.usage.output_tokens;
    if (tokens <= 0) continue;
    const day = new Date(run.finished_at).toISOString().slice(0, 10);
    const key = `${run.workspace_id}\n${day}`;
    sums.set(key, { workspace_id: run.workspace_id, day, tokens: (sums.get(key)?.tokens ?? 0) + tokens });
  }
  return [...sums.values()];
}

async function addTokenUsage(trx: Transaction<Database>, usage: readonly TokenUsage[]): Promise<void> {
  await sql`
    insert into workspace_token_usage (workspace_id, day, tokens)
    select workspace_id, day, tokens from json_to_recordset(${JSON.stringify(usage)}::json) as u(workspace_id text, day date, tokens bigint)
    on conflict (workspace_id, day) do update set tokens = workspace_token_usage.tokens + excluded.tokens
  `.execute(trx);
}

async function insertRunActions(trx: Transaction<Database>, actions: readonly RunActionRecord[]): Promise<void> {
  await sql`
    insert into run_actions (id, run_id, account_id, kind, summary, risk_tier, disposition, policy_reasons, seq)
    select id, run_id, account_id, kind, summary, risk_tier, disposition, policy_reasons, seq
    from json_to_recordset(${JSON.stringify(actions)}::json) as a(id text, run_id text, account_id text, kind text,
      summary text, risk_tier text, disposition text, policy_reasons jsonb, seq bigint)
  `.execute(trx);
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
