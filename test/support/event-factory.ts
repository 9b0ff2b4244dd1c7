import { v4 as uuidv4 } from 'uuid';
import { GENESIS_HASH, type EventEnvelope, type UnsealedEvent } from '../../src/events/envelope.ts';
import { sealEvent } from '../../src/events/event-hash.ts';
import type { EventSigner } from '../../src/events/signing/event-signer.ts';

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

/** `length` ToolCalled events of one run, signed by `signer` and hash-chained from the genesis, as the service appends them. */
export function signedToolCallChain(workspaceId: string, runId: string, length: number, outputBytes: number, signer: EventSigner): EventEnvelope[] {
  const events: EventEnvelope[] = [];
  let prev = GENESIS_HASH;
  for (let index = 0; index < length; index++) {
    const sealed = sealEvent(toolCalled(workspaceId, runId, index + 1, outputBytes), prev, signer);
    events.push(sealed);
    prev = sealed.hash;
  }
  return events;
}
