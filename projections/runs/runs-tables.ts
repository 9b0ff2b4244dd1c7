import type { ColumnType, JSONColumnType } from 'kysely';
import type { RunErrorCode, RunUsage, AgentIdentity } from '../../src/events/catalogue/index.ts';

export const RUN_STATUSES = ['queued', 'running', 'succeeded', 'failed', 'canceled'] as const;
export type RunStatus = (typeof RUN_STATUSES)[number];
export const TERMINAL_RUN_STATUSES: readonly RunStatus[] = ['succeeded', 'failed', 'canceled'];

export interface RecordedToolCall {
  readonly name: string;
  readonly input: Record<string, unknown>;
  readonly ok: boolean;
}

export interface RunsTable {
  id: string;
  workspace_id: string;
  account_id: string;
  key_id: string;
  scope: 'read' | 'write' | 'admin';
  status: RunStatus;
  brief: string;
  auto_apply: boolean;
  agent: JSONColumnType<AgentIdentity | null, string | null, string | null>;
  worker_id: string | null;
  created_at: ColumnType<Date, string, never>;
  started_at: ColumnType<Date | null, string | null, string | null>;
  finished_at: ColumnType<Date | null, string | null, string | null>;
  duration_ms: number | null;
  result_text: string;
  truncated: boolean;
  usage: JSONColumnType<RunUsage, string, string>;
  error: JSONColumnType<{ code: RunErrorCode; message: string } | null, string | null, string | null>;
  tool_calls: JSONColumnType<RecordedToolCall[], string, string>;
  tool_call_count: number;
  /** Stream sequence of RunQueued: where the run's events start. */
  queued_seq: number;
  last_seq: number;
}

export interface RunActionsTable {
  id: string;
  run_id: string;
  account_id: string;
  kind: string;
  summary: string;
  risk_tier: string;
  disposition: string;
  policy_reasons: JSONColumnType<string[], string, string>;
  seq: number;
}
