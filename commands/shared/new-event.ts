import { v4 as uuidv4 } from 'uuid';
import type { Actor, AggregateRef, UnsealedEvent } from '../../src/events/envelope.ts';
import { CURRENT_VERSION, type EventData, type EventType } from '../../src/events/catalogue/index.ts';

/** Who and what a command runs for; copied into every event it decides. */
export interface CommandMeta {
  readonly actor: Actor;
  readonly correlationId: string;
  readonly now?: Date;
}

export interface EventAddress {
  readonly workspaceId: string;
  readonly accountId: string | null;
  readonly aggregate: AggregateRef;
}

/**
 * Builds an unsealed event of the current schema version for a type; the data type is
 * checked against the catalogue at compile time.
 *
 * @example
 * ```ts
 * newEvent('RunCanceled', { run_id }, address, meta)
 * ```
 */
export function newEvent<T extends EventType>(
  type: T,
  data: EventData<T>,
  address: EventAddress,
  meta: CommandMeta,
): UnsealedEvent<T, EventData<T>> {
  return {
    id: uuidv4(),
    type,
    version: CURRENT_VERSION[type] ?? 1,
    time: (meta.now ?? new Date()).toISOString(),
    workspace_id: address.workspaceId,
    account_id: address.accountId,
    aggregate: address.aggregate,
    actor: meta.actor,
    correlation_id: meta.correlationId,
    data,
  };
}
