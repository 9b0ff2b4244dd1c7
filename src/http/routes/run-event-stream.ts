import type { DomainEvent } from '../../events/catalogue/index.ts';
import { toActionRepresentation } from '../representations/action-representation.ts';

/** SSE event names, one per run milestone; `data` is JSON. */
export const RUN_STREAM_EVENTS = ['queued', 'started', 'tool_called', 'action_proposed', 'succeeded', 'failed', 'canceled'] as const;
export type RunStreamEvent = (typeof RUN_STREAM_EVENTS)[number];

export interface RunStreamMessage {
  readonly name: RunStreamEvent;
  readonly data: Record<string, unknown>;
  readonly terminal: boolean;
}

/**
 * What a client of GET /api/v1/runs/{runId}/events sees of an event of the run, or null
 * for events it does not show. Tool outputs are left out, as in result.tool_calls.
 */
export function toRunStreamMessage(event: DomainEvent, runId: string, publicBaseUrl: string): RunStreamMessage | null {
  if (event.correlation_id !== runId) return null;
  const common = { run_id: runId, time: event.time };
  switch (event.type) {
    case 'RunQueued':
      return event.data.run_id === runId ? { name: 'queued', data: { ...common, status: 'queued' }, terminal: false } : null;
    case 'RunStarted':
      return event.data.run_id === runId ? { name: 'started', data: { ...common, status: 'running', agent: event.data.agent }, terminal: false } : null;
    case 'ToolCalled':
      return {
        name: 'tool_called',
        data: { ...common, index: event.data.index, name: event.data.name, input: event.data.input, ok: event.data.ok, duration_ms: event.data.duration_ms },
        terminal: false,
      };
    case 'ActionProposed':
      if (event.data.run_id !== runId) return null;
      return {
        name: 'action_proposed',
        data: {
          ...common,
          action: toActionRepresentation({ ...event.data, id: event.data.action_id }, event.account_id!, publicBaseUrl),
        },
        terminal: false,
      };
    case 'RunSucceeded':
      return event.data.run_id === runId
        ? { name: 'succeeded', data: { ...common, status: 'succeeded', duration_ms: event.data.duration_ms, truncated: event.data.truncated, usage: event.data.usage }, terminal: true }
        : null;
    case 'RunFailed':
      return event.data.run_id === runId
        ? { name: 'failed', data: { ...common, status: 'failed', duration_ms: event.data.duration_ms, error: event.data.error, usage: event.data.usage }, terminal: true }
        : null;
    case 'RunCanceled':
      return event.data.run_id === runId ? { name: 'canceled', data: { ...common, status: 'canceled' }, terminal: true } : null;
    default:
      return null;
  }
}
