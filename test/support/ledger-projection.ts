import type { Kysely, Transaction } from 'kysely';
import { sql } from 'kysely';
import type { Projection } from '../../projections/runtime/projection.ts';
import type { AdmissionSeals } from '../../projections/runtime/admission-seals.ts';
import { Projector } from '../../projections/runtime/projector.ts';
import { createLogger } from '../../src/log/logger.ts';
import type { Infrastructure } from '../../src/runtime/infrastructure.ts';
import type { Database } from '../../src/db/schema.ts';
import type { StoredEvent } from '../../src/event-store/event-store.ts';

/**
 * A projection whose effect is not idempotent on purpose: every application of an event
 * increments its row's counter, so an event applied twice shows as 2 and a lost one as a
 * missing row.
 */
export const ledgerProjection: Projection = {
  name: 'ledger',
  version: 1,
  tables: ['ledger'],
  async createTables(db: Kysely<any>) {
    await db.schema
      .createTable('ledger')
      .addColumn('event_id', 'text', (c) => c.primaryKey())
      .addColumn('seq', 'bigint', (c) => c.notNull())
      .addColumn('subject', 'text', (c) => c.notNull())
      .addColumn('applied', 'integer', (c) => c.notNull())
      .execute();
  },
  async apply(trx: Transaction<Database>, events: readonly StoredEvent[]) {
    const db = trx as unknown as Kysely<any>;
    for (const { seq, subject, event } of events) {
      await db
        .insertInto('ledger')
        .values({ event_id: event.id, seq, subject, applied: 1 })
        .onConflict((oc: any) => oc.column('event_id').doUpdateSet({ applied: sql`ledger.applied + 1` }))
        .execute();
    }
  },
};

export async function ledgerRows(db: Kysely<any>): Promise<{ event_id: string; seq: number; applied: number }[]> {
  return db.selectFrom('ledger').select(['event_id', 'seq', 'applied']).orderBy('seq').execute();
}

export interface TestProjectorOptions {
  batchSize?: number;
  afterCommit?: (seq: number) => Promise<void> | void;
  seals?: AdmissionSeals;
  lingerMs?: number;
  deliveryStallMs?: number;
  /** Admit with the infrastructure's signature checks; without it (and without seals), structure only. */
  signatures?: boolean;
}

/** A projector of `projection` alone on an infrastructure's stream (not started). */
export function testProjector(infra: Infrastructure, projection: Projection, options: TestProjectorOptions = {}): Projector {
  return new Projector({
    db: infra.database.db,
    js: infra.js,
    jsm: infra.jsm,
    stream: infra.config.eventStream,
    filterSubject: infra.subjects.all,
    projection,
    logger: createLogger('silent'),
    batchSize: options.batchSize,
    afterCommit: options.afterCommit,
    admission: options.seals || options.signatures ? infra.store.admission : undefined,
    seals: options.seals,
    lingerMs: options.lingerMs,
    deliveryStallMs: options.deliveryStallMs,
  });
}

/** A projector of the ledger projection on an infrastructure's stream (not started), 20 events a batch unless told otherwise. */
export function ledgerProjector(infra: Infrastructure, options: TestProjectorOptions = {}): Projector {
  return testProjector(infra, ledgerProjection, { ...options, batchSize: options.batchSize ?? 20 });
}

/**
 * `projection` with every batch slowed down by `seconds` inside its transaction (a fold or a
 * projector that takes a while), and a promise that settles when its first batch has been
 * applied: a test starts something else while it is under way.
 *
 * @example
 * const { projection, firstBatch } = slowedProjection(ledgerProjection, 0.05);
 * const rebuilding = rebuildProjection({ ...options, projection });
 * await firstBatch; // the fold is running now
 */
export function slowedProjection(projection: Projection, seconds: number): { readonly projection: Projection; readonly firstBatch: Promise<void> } {
  let applied: (() => void) | undefined;
  const firstBatch = new Promise<void>((resolve) => (applied = resolve));
  return {
    projection: {
      ...projection,
      async apply(trx, events, context) {
        await projection.apply(trx, events, context);
        applied!();
        await sql`select pg_sleep(${seconds})`.execute(trx);
      },
    },
    firstBatch,
  };
}
