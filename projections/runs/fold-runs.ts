import { RUN_LIMITS } from '../../src/agent/run-limits.ts';
import type { DomainEvent } from '../../src/events/catalogue/index.ts';
import type { StoredEvent } from '../../src/event-store/event-store.ts';
import type { RunActionRecord, RunRecord } from './run-record.ts';

export type { RunActionRecord, RunRecord } from './run-record.ts';

/** The run an event belongs to, for events this projection folds. */
export function runIdOf(event: DomainEvent): string | null {
  switch (event.type) {
    case 'RunQueued':
    case 'RunStarted':
    case 'RunCanceled':
    case 'RunSucceeded':
    case 'RunFailed':
    case 'ToolCalled':
      return event.data.run_id;
    case 'ActionProposed':
      return event.data.run_id;
    default:
      return null;
  }
}

/**
 * Milliseconds from when the run began (started, else queued) to when it ended. For runs whose
 * terminal event carries no duration: a canceled run (never started) and a run that failed
 * before a worker took it; every terminal run has a `duration_ms`.
 */
function elapsedMs(row: RunRecord, finishedAt: string): number {
  return Math.max(0, Date.parse(finishedAt) - Date.parse(row.started_at ?? row.created_at));
}

/**
 * Folds a batch of events, in stream order, over the current rows of the runs they touch.
 * Pure: the projection reads the rows once and writes the changed ones back in one
 * statement, instead of one statement per event.
 */
export function foldRunEvents(rows: Map<string, RunRecord>, events: readonly StoredEvent[]): { changed: Set<string>; actions: RunActionRecord[] } {
  const changed = new Set<string>();
  const actions: RunActionRecord[] = [];
  for (const { seq, event: raw } of events) {
    const event = raw as DomainEvent;
    const runId = runIdOf(event);
    if (runId === null) continue;
    if (event.type === 'RunQueued') {
      rows.set(runId, {
        id: runId,
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
        usage: { input_tokens: 0, output_tokens: 0, steps: 0 },
        error: null,
        tool_calls: [],
        tool_call_count: 0,
        queued_seq: seq,
        last_seq: seq,
      });
      changed.add(runId);
      continue;
    }
    const row = rows.get(runId);
    if (!row) continue;
    switch (event.type) {
      case 'RunStarted':
        row.status = 'running';
        row.started_at = event.time;
        row.worker_id = event.data.worker_id;
        row.agent = event.data.agent;
        break;
      case 'RunCanceled':
        row.status = 'canceled';
        row.finished_at = event.time;
        row.duration_ms = elapsedMs(row, event.time);
        break;
      case 'RunSucceeded':
        Object.assign(row, {
          status: 'succeeded',
          finished_at: event.time,
          duration_ms: event.data.duration_ms,
          result_text: event.data.text,
          truncated: event.data.truncated,
          usage: event.data.usage,
        });
        break;
      case 'RunFailed':
        Object.assign(row, {
          status: 'failed',
          finished_at: event.time,
          duration_ms: event.data.duration_ms ?? elapsedMs(row, event.time),
          result_text: event.data.text,
          truncated: event.data.truncated,
          usage: event.data.usage,
          error: event.data.error,
        });
        break;
      case 'ToolCalled':
        // result.tool_calls keeps name, input and ok; outputs stay in the event log only.
        if (row.tool_calls.length < RUN_LIMITS.maxRecordedToolCalls) {
          row.tool_calls = [...row.tool_calls, { name: event.data.name, input: event.data.input, ok: event.data.ok }];
        }
        row.tool_call_count++;
        break;
      case 'ActionProposed':
        actions.push({
          id: event.data.action_id,
          run_id: runId,
          account_id: event.account_id!,
          kind: event.data.kind,
          summary: event.data.summary,
          risk_tier: event.data.risk_tier,
          disposition: event.data.disposition,
          policy_reasons: [...event.data.policy_reasons],
          seq,
        });
        break;
      default:
        break;
    }
    row.last_seq = seq;
    changed.add(runId);
  }
  return { changed, actions };
}
