import type { ColumnType, JSONColumnType } from 'kysely';
import type { RunErrorCode, RunUsage, AgentIdentity } from '../../src/events/catalogue/index.ts';
import type { RecordedToolCall, RunActionRecord, RunRecord } from './run-record.ts';

export { RUN_STATUSES, TERMINAL_RUN_STATUSES, type RecordedToolCall, type RunStatus } from './run-record.ts';

/** The runs row as Postgres stores it: the fold's record, with timestamps and JSON as columns. */
export interface RunsTable extends Omit<RunRecord, 'agent' | 'created_at' | 'started_at' | 'finished_at' | 'usage' | 'error' | 'tool_calls'> {
  agent: JSONColumnType<AgentIdentity | null, string | null, string | null>;
  created_at: ColumnType<Date, string, never>;
  started_at: ColumnType<Date | null, string | null, string | null>;
  finished_at: ColumnType<Date | null, string | null, string | null>;
  usage: JSONColumnType<RunUsage, string, string>;
  error: JSONColumnType<{ code: RunErrorCode; message: string } | null, string | null, string | null>;
  tool_calls: JSONColumnType<RecordedToolCall[], string, string>;
}

export interface RunActionsTable extends Omit<RunActionRecord, 'policy_reasons'> {
  policy_reasons: JSONColumnType<string[], string, string>;
}

/** Model tokens of the runs of a workspace that ended on a UTC day (the token quota's figure). */
export interface WorkspaceTokenUsageTable {
  workspace_id: string;
  /** The UTC day, written and compared as YYYY-MM-DD. */
  day: ColumnType<Date, string, string>;
  /** bigint: pg returns it as a string. */
  tokens: ColumnType<string, number, number>;
}
