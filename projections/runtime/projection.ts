import type { Kysely, Transaction } from 'kysely';
import type { Database } from '../../src/db/schema.ts';
import type { StoredEvent } from '../../src/event-store/event-store.ts';
import type { EventEnvelope } from '../../src/events/envelope.ts';

/**
 * How `apply` is called. `guarded: true`: inside a savepoint its caller rolls back to when it
 * fails, so a statement apply expects may fail (an insert of a row that may exist) must be
 * wrapped in a savepoint of its own. `guarded: false`: any failure aborts the whole
 * transaction, and the caller applies the same batch again, guarded; apply may then write
 * without savepoints of its own, saving their round trips on the path almost every batch takes.
 */
export interface ApplyContext {
  readonly guarded: boolean;
}

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
  /**
   * @param context how the caller recovers from a failure of this call (see {@link ApplyContext});
   *   absent: guarded.
   */
  apply(trx: Transaction<Database>, events: readonly StoredEvent[], context?: ApplyContext): Promise<void>;
  /**
   * Whether `apply` would do anything with this event; when given, `apply` only ever sees
   * events it handles, and a batch of none costs no statement (the chain heads and the
   * checkpoint still move). Leave it out to be handed every event.
   */
  handles?(event: EventEnvelope): boolean;
}
