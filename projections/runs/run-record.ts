import type { AgentIdentity, RunErrorCode, RunUsage } from '../../src/events/catalogue/index.ts';

/**
 * The shapes the runs fold works on, free of any database type: the fold is domain code
 * (see .dependency-cruiser.cjs), and the projection maps rows to and from these.
 */
export const RUN_STATUSES = ['queued', 'running', 'succeeded', 'failed', 'canceled'] as const;
export type RunStatus = (typeof RUN_STATUSES)[number];
export const TERMINAL_RUN_STATUSES: readonly RunStatus[] = ['succeeded', 'failed', 'canceled'];

export interface RecordedToolCall {
  readonly name: string;
  readonly input: Record<string, unknown>;
  readonly ok: boolean;
}

/** A runs row as the fold works on it: timestamps as ISO strings, JSON columns as values. */
export interface RunRecord {
  id: string;
  workspace_id: string;
  account_id: string;
  key_id: string;
  scope: 'read' | 'write' | 'admin';
  status: RunStatus;
  brief: string;
  auto_apply: boolean;
  agent: AgentIdentity | null;
  worker_id: string | null;
  created_at: string;
  started_at: string | null;
  finished_at: string | null;
  duration_ms: number | null;
  result_text: string;
  truncated: boolean;
  usage: RunUsage;
  error: { code: RunErrorCode; message: string } | null;
  tool_calls: RecordedToolCall[];
  tool_call_count: number;
  /** Stream sequence of RunQueued: where the run's events start. */
  queued_seq: number;
  last_seq: number;
}

export interface RunActionRecord {
  id: string;
  run_id: string;
  account_id: string;
  kind: string;
  summary: string;
  risk_tier: string;
  disposition: string;
  policy_reasons: string[];
  seq: number;
}
