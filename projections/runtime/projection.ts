import type { Kysely, Transaction } from 'kysely';
import type { Database } from '../../src/db/schema.ts';
import type { StoredEvent } from '../../src/event-store/event-store.ts';
import type { EventEnvelope } from '../../src/events/envelope.ts';

/**
 * A read model built from the event log. It owns its tables: `createTables` makes them in
 * the transaction's schema (the live one, or a fresh one during a rebuild), and `apply`
 * turns a batch of events, in stream order, into row writes. Both must only use
 * unqualified table names so a rebuild can aim them at another schema.
 */
export interface Projection {
  readonly name: string;
  /** Bump when tables or the meaning of rows change: the projection is then rebuilt at start. */
  readonly version: number;
  /** Owned tables, in the order they can be dropped. */
  readonly tables: readonly string[];
  createTables(db: Kysely<any>): Promise<void>;
  apply(trx: Transaction<Database>, events: readonly StoredEvent[]): Promise<void>;
  /**
   * Whether `apply` would do anything with this event; when given, `apply` only ever sees
   * events it handles, and a batch of none costs no statement (the chain heads and the
   * checkpoint still move). Leave it out to be handed every event.
   */
  handles?(event: EventEnvelope): boolean;
}
