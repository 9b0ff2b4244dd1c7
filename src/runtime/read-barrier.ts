import type { Kysely } from 'kysely';
import type { Database } from '../db/schema.ts';
import type { EventStore } from '../event-store/event-store.ts';
import { waitForProjection } from '../../projections/runtime/projector.ts';

/**
 * Read-your-writes for the read side: before a GET answers "not found", it waits until the
 * projection has applied everything the stream held when the request arrived. Anything a
 * client was told exists (a 202's run id) is in that prefix, so it is found.
 */
export class ReadBarrier {
  private readonly store: EventStore;
  private readonly db: Kysely<Database>;
  private readonly timeoutMs: number;

  constructor(
    store: EventStore,
    db: Kysely<Database>,
    timeoutMs: number = 3000,
  ) {
    this.store = store;
    this.db = db;
    this.timeoutMs = timeoutMs;
  }

  async catchUp(projection: string): Promise<boolean> {
    const seq = await this.store.lastSequence();
    return waitForProjection(this.db, projection, seq, this.timeoutMs);
  }

  async reach(projection: string, seq: number): Promise<boolean> {
    return waitForProjection(this.db, projection, seq, this.timeoutMs);
  }
}
