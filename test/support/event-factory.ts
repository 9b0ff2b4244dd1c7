import { v4 as uuidv4 } from 'uuid';
import type { UnsealedEvent } from '../../src/events/envelope.ts';

/** A schema-valid event for store-level tests: a workspace rename-free creation event. */
export function workspaceCreated(workspaceId: string, name = 'w'): UnsealedEvent {
  return {
    id: uuidv4(),
    type: 'WorkspaceCreated',
    version: 1,
    time: new Date().toISOString(),
    workspace_id: workspaceId,
    account_id: null,
    aggregate: { type: 'workspace', id: workspaceId },
    actor: { kind: 'system', id: 'test' },
    correlation_id: 'test',
    data: { name },
  };
}

/** A schema-valid ToolCalled with an output of about `outputBytes`, for tests that need a large stream. */
export function toolCalled(workspaceId: string, runId: string, index: number, outputBytes: number): UnsealedEvent {
  return {
    id: uuidv4(),
    type: 'ToolCalled',
    version: 1,
    time: new Date().toISOString(),
    workspace_id: workspaceId,
    account_id: 'acc',
    aggregate: { type: 'run', id: runId },
    actor: { kind: 'worker', id: 'test' },
    correlation_id: runId,
    data: { run_id: runId, index, name: 'get_search_terms', input: {}, ok: true, output: { blob: 'x'.repeat(outputBytes) }, duration_ms: 1 },
  };
}
