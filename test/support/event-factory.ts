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
