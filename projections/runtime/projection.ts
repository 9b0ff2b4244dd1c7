import type { Kysely, Transaction } from 'kysely';
import type { Database } from '../../src/db/schema.ts';
import type { StoredEvent } from '../../src/event-store/event-store.ts';

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
}
