import { expect } from 'chai';
import { sql, type Kysely } from 'kysely';
import { readCheckpoint } from '../../projections/runtime/checkpoints.ts';
import type { Projection } from '../../projections/runtime/projection.ts';
import { ensureProjectionTables } from '../../projections/runtime/projection-tables.ts';
import { listQuarantine, parkEvent } from '../../projections/runtime/quarantine.ts';
import { retryQuarantined } from '../../projections/runtime/quarantine-retry.ts';
import { rebuildProjection, RebuildLockLostError, RebuildSwapError, type RebuildOptions } from '../../projections/runtime/rebuild.ts';
import { InadmissibleCode } from '../../src/events/event-admission.ts';
import { openInfrastructure, type Infrastructure } from '../../src/runtime/infrastructure.ts';
import { workspaceCreated } from '../support/event-factory.ts';
import { dropIsolated, isolatedConfig } from '../support/isolation.ts';
import { ChainedAppender } from '../support/chained-appender.ts';
import { ledgerProjection, ledgerRows, slowedProjection, testProjector } from '../support/ledger-projection.ts';
import { eventually } from '../support/eventually.ts';
import type { Config } from '../../src/config/config.ts';

/** Appends `count` events spread over `aggregates` subjects. */
async function appendEvents(infra: Infrastructure, count: number, aggregates = 10): Promise<void> {
  const appender = new ChainedAppender(infra);
  for (let i = 0; i < count; i++) {
    const id = `agg-${i % aggregates}`;
    await appender.append(appender.workspaceSubject(id), workspaceCreated(id));
  }
}

const caughtUpTo = (infra: Infrastructure, seq: number) =>
  eventually(async () => expect((await readCheckpoint(infra.database.db, 'ledger'))!.lastSeq).to.equal(seq), 15_000);

async function shadowSchemaLeft(infra: Infrastructure, schema: string): Promise<boolean> {
  const { rows } = await sql<{ n: string }>`select nspname as n from pg_namespace where nspname = ${`${schema}_rebuild`}`.execute(infra.database.db);
  return rows.length > 0;
}

async function expectEachEventAppliedOnce(infra: Infrastructure, head: number): Promise<void> {
  const rows = await ledgerRows(infra.database.db);
  expect(rows.map((r) => Number(r.seq))).to.deep.equal(Array.from({ length: head }, (_, i) => i + 1));
  expect(rows.filter((r) => r.applied !== 1)).to.deep.equal([]);
}

/**
 * Holds the ledger's checkpoint row (select … for update in an open transaction), as a careful-path
 * batch or a quarantine retry does, until `release()`; `released` settles when that transaction ended.
 */
async function holdCheckpointRow(infra: Infrastructure): Promise<{ release(): void; readonly released: Promise<void> }> {
  let release: (() => void) | undefined;
  let locked: (() => void) | undefined;
  const isLocked = new Promise<void>((resolve) => (locked = resolve));
  const released = infra.database.db.transaction().execute(async (trx) => {
    await sql`select 1 from projection_checkpoints where projection = 'ledger' for update`.execute(trx);
    locked!();
    await new Promise<void>((resolve) => (release = resolve));
  });
  await isLocked;
  return { release: () => release!(), released };
}

/** Opens the infrastructure of `config` before the describe's tests and closes and drops it after them. */
function openedForDescribe(config: Config, clientName: string, use: (infra: Infrastructure) => void): void {
  let infra: Infrastructure | undefined;
  before(async () => {
    infra = await openInfrastructure(config, clientName);
    use(infra);
  });
  after(async () => {
    await infra?.close();
    await dropIsolated(config);
  });
}

describe('projection rebuild: the swap against the live projector', function () {
  this.timeout(60_000);
  const config = isolatedConfig('rebuildswap');
  let infra: Infrastructure;
  openedForDescribe(config, 'test-rebuild-swap', (opened) => (infra = opened));

  const rebuild = (projection: Projection = ledgerProjection, options: Pick<RebuildOptions, 'batchSize' | 'onWait'> = {}) =>
    rebuildProjection({ db: infra.database.db, store: infra.store, schema: config.databaseSchema, filterSubject: infra.subjects.all, projection, ...options });

  it('given a fast-path batch of the live projector in flight (its apply slowed down), then a rebuild waits for it, swaps in, and every event is applied once with no shadow schema left', async () => {
    let slowSeconds = 0;
    let slowBatchStarted: (() => void) | undefined;
    const slowBatch = new Promise<void>((resolve) => (slowBatchStarted = resolve));
    const slowLedger: Projection = {
      ...ledgerProjection,
      async apply(trx, events, context) {
        await ledgerProjection.apply(trx, events, context);
        if (slowSeconds > 0) {
          slowBatchStarted!();
          await sql`select pg_sleep(${slowSeconds})`.execute(trx);
        }
      },
    };
    await appendEvents(infra, 200);
    const live = testProjector(infra, slowLedger, { lingerMs: 0, batchSize: 20 });
    await live.start();
    try {
      await caughtUpTo(infra, await infra.store.lastSequence());
      // The lane wrote the checkpoint last itself: its next batch takes the fast path (tables first, checkpoint row last).
      slowSeconds = 2;
      await appendEvents(infra, 1);
      await slowBatch;
      // The swap then waits for the batch's tables well under Postgres's deadlock_timeout (1 s) before the batch
      // asks for the checkpoint row: a swap holding that row meanwhile (checkpoint first, then tables) was the one
      // Postgres ended, losing the fold.
      await new Promise((resolve) => setTimeout(resolve, 1000));

      const result = await rebuild();
      slowSeconds = 0;

      const head = await infra.store.lastSequence();
      expect(result.lastSeq).to.equal(head);
      expect(result.events).to.equal(head);
      expect(await shadowSchemaLeft(infra, config.databaseSchema)).to.equal(false);
      await appendEvents(infra, 3);
      const newHead = await infra.store.lastSequence();
      await caughtUpTo(infra, newHead);
      expect(live.currentStatus().stalled).to.equal(false);
      await expectEachEventAppliedOnce(infra, newHead);
    } finally {
      slowSeconds = 0;
      await live.stop();
    }
  });

  it('given the checkpoint row held by someone else for a moment, then the swap is tried again and the rebuild completes', async () => {
    const head = await infra.store.lastSequence();
    const holder = await holdCheckpointRow(infra);
    setTimeout(() => holder.release(), 400);
    const result = await rebuild();
    await holder.released;
    expect(result.lastSeq).to.equal(head);
    expect(await shadowSchemaLeft(infra, config.databaseSchema)).to.equal(false);
    await expectEachEventAppliedOnce(infra, head);
  });

  it('given the checkpoint row held for longer than every swap attempt, then the rebuild fails with a RebuildSwapError, drops its shadow schema, and leaves the live tables and checkpoint as they were', async () => {
    const before = await ledgerRows(infra.database.db);
    const checkpoint = await readCheckpoint(infra.database.db, 'ledger');
    const holder = await holdCheckpointRow(infra);
    const outcome = await rebuild().then(
      () => null,
      (error: unknown) => error,
    );
    holder.release();
    await holder.released;
    expect(outcome).to.be.instanceOf(RebuildSwapError);
    expect((outcome as RebuildSwapError).message).to.match(/could not swap its new tables in after \d+ attempts .*SQLSTATE 55P03.*unchanged/);
    expect(await shadowSchemaLeft(infra, config.databaseSchema)).to.equal(false);
    expect(await ledgerRows(infra.database.db)).to.deep.equal(before);
    expect(await readCheckpoint(infra.database.db, 'ledger')).to.deep.equal(checkpoint);
  });

  it('given a rebuild whose lock session ends during the fold, then it swaps nothing in and says so, and the next rebuild completes', async () => {
    await ensureProjectionTables(infra.database.db, ledgerProjection);
    const db = infra.database.db;
    const head = await infra.store.lastSequence();
    const before = await readCheckpoint(db, 'ledger');
    const slow = slowedProjection(ledgerProjection, 0.05);
    const rebuilding = rebuild(slow.projection, { batchSize: 20 }).then(
      () => null,
      (error: unknown) => error,
    );
    await slow.firstBatch;
    // The backend holding the advisory lock of the shadow schema (a bigint key: classid is its high half, objid its low half).
    const { rows: [{ key }] } = await sql<{ key: string }>`select hashtextextended(${`shadow-schema:${config.databaseSchema}_rebuild`}, 0)::text as key`.execute(db) as unknown as { rows: [{ key: string }] };
    const unsigned = BigInt(key) & 0xffffffffffffffffn;
    const { rows: holders } = await sql<{ pid: number }>`
      select pid from pg_locks where locktype = 'advisory' and granted and classid = ${String(unsigned >> 32n)}::oid and objid = ${String(unsigned & 0xffffffffn)}::oid
    `.execute(db);
    expect(holders).to.have.length(1);
    await sql`select pg_terminate_backend(${holders[0]!.pid})`.execute(db);
    const outcome = await rebuilding;
    expect(outcome).to.be.instanceOf(RebuildLockLostError);
    expect(await readCheckpoint(db, 'ledger')).to.deep.equal(before);
    expect(await shadowSchemaLeft(infra, config.databaseSchema)).to.equal(false);
    const again = await rebuild();
    expect(again.lastSeq).to.equal(head);
    await expectEachEventAppliedOnce(infra, head);
  });

  it('given a rebuild folding (each batch slowed down), then a second rebuild started meanwhile waits for it instead of dropping its shadow schema, and both complete with every event applied once', async () => {
    await ensureProjectionTables(infra.database.db, ledgerProjection);
    const head = await infra.store.lastSequence();
    const slow = slowedProjection(ledgerProjection, 0.05);
    const first = rebuild(slow.projection, { batchSize: 20 });
    await slow.firstBatch;
    let waits = 0;
    const second = rebuild(slow.projection, { batchSize: 20, onWait: () => waits++ });
    const results = await Promise.all([first, second]);
    expect(waits).to.equal(1);
    expect(results.map((r) => r.lastSeq)).to.deep.equal([head, head]);
    expect(await shadowSchemaLeft(infra, config.databaseSchema)).to.equal(false);
    await expectEachEventAppliedOnce(infra, head);
  });
});

describe('projection rebuild: the quarantine holds what the new fold parked', function () {
  this.timeout(60_000);
  const config = isolatedConfig('rebuildquarantine');
  let infra: Infrastructure;
  openedForDescribe(config, 'test-rebuild-quarantine', (opened) => (infra = opened));

  /** A ledger that Postgres refuses the events at `refused` for (a check constraint: SQLSTATE 23514, parked as `refused`). */
  const refusing = (version: number, refused: readonly number[]): Projection => ({
    ...ledgerProjection,
    version,
    async createTables(db: Kysely<any>) {
      await ledgerProjection.createTables(db);
      if (refused.length > 0) await sql`alter table ledger add constraint refused check (seq not in (${sql.join(refused.map((seq) => sql.lit(seq)))}))`.execute(db);
    },
  });
  const quarantined = async () => (await listQuarantine(infra.database.db)).map((entry) => `${entry.projection} ${entry.seq} ${entry.code}`);
  const otherProjectionsRow = async (seq: number) =>
    parkEvent(infra.database.db, { projection: 'other', seq, subject: 'x', code: InadmissibleCode.Refused, error: 'kept', payload: new Uint8Array() });

  it('given a rebuild with a projection fixed for one refused event, then that event leaves the quarantine (a retry finds nothing to apply), the event it still refuses stays, and other projections\' rows are kept', async () => {
    await appendEvents(infra, 8);
    const v1 = refusing(1, [3, 5]);
    const live = testProjector(infra, v1, { lingerMs: 0, signatures: true });
    await live.start();
    try {
      await caughtUpTo(infra, 8);
    } finally {
      await live.stop();
    }
    await otherProjectionsRow(6);
    expect(await quarantined()).to.deep.equal(['ledger 3 refused', 'ledger 5 refused', 'other 6 refused']);

    const v2 = refusing(2, [3]);
    const result = await rebuildProjection({ db: infra.database.db, store: infra.store, schema: config.databaseSchema, filterSubject: infra.subjects.all, projection: v2 });
    expect(result).to.include({ lastSeq: 8, events: 7, parked: 1 });
    expect(await quarantined()).to.deep.equal(['ledger 3 refused', 'other 6 refused']);
    expect(await retryQuarantined({ db: infra.database.db, store: infra.store, projections: [v2], seq: 5 })).to.deep.equal([]);
    const rows = await ledgerRows(infra.database.db);
    expect(rows.map((r) => [Number(r.seq), r.applied])).to.deep.equal([1, 2, 4, 5, 6, 7, 8].map((seq) => [seq, 1]));
  });

  it('given a projection whose version went up, then the reset at start empties its quarantine (the replay parks again) and keeps other projections\' rows', async () => {
    await parkEvent(infra.database.db, { projection: 'ledger', seq: 7, subject: 'x', code: InadmissibleCode.Refused, error: 'old version', payload: new Uint8Array() });
    expect(await quarantined()).to.include.members(['ledger 7 refused', 'other 6 refused']);
    expect(await ensureProjectionTables(infra.database.db, refusing(3, []))).to.equal(0);
    expect(await quarantined()).to.deep.equal(['other 6 refused']);
  });
});
