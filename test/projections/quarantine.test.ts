import { expect } from 'chai';
import { sql, type Kysely, type Transaction } from 'kysely';
import { readCheckpoint } from '../../projections/runtime/checkpoints.ts';
import type { Projection } from '../../projections/runtime/projection.ts';
import { Projector } from '../../projections/runtime/projector.ts';
import { listQuarantine } from '../../projections/runtime/quarantine.ts';
import { retryQuarantined } from '../../projections/runtime/quarantine-retry.ts';
import { rebuildProjection } from '../../projections/runtime/rebuild.ts';
import type { Database } from '../../src/db/schema.ts';
import type { StoredEvent } from '../../src/event-store/event-store.ts';
import { EventAdmission } from '../../src/events/event-admission.ts';
import { GENESIS_HASH, type UnsealedEvent } from '../../src/events/envelope.ts';
import { sealEvent } from '../../src/events/event-hash.ts';
import { createLogger } from '../../src/log/logger.ts';
import { openInfrastructure, type Infrastructure } from '../../src/runtime/infrastructure.ts';
import { workspaceCreated } from '../support/event-factory.ts';
import { eventually } from '../support/eventually.ts';
import { dropIsolated, isolatedConfig } from '../support/isolation.ts';

/**
 * A projection Postgres can refuse for an event's data: workspace names go into a
 * varchar(8), so a longer name fails with SQLSTATE 22001 (string data right truncation),
 * the same class (22) as the U+0000 / surrogate refusals of the real projections.
 */
function pickyProjectionNamed(table: string): Projection {
  return {
    name: table,
    version: 1,
    tables: [table],
    async createTables(db: Kysely<any>) {
      await db.schema
        .createTable(table)
        .addColumn('seq', 'bigint', (c) => c.primaryKey())
        .addColumn('name', 'varchar(8)', (c) => c.notNull())
        .addColumn('applied', 'integer', (c) => c.notNull())
        .execute();
    },
    async apply(trx: Transaction<Database>, events: readonly StoredEvent[]) {
      const db = trx as unknown as Kysely<any>;
      for (const { seq, event } of events) {
        await db
          .insertInto(table)
          .values({ seq, name: (event.data as { name: string }).name, applied: 1 })
          .onConflict((oc: any) => oc.column('seq').doUpdateSet({ applied: sql`${sql.ref(`${table}.applied`)} + 1` }))
          .execute();
      }
    },
  };
}
const pickyProjection = pickyProjectionNamed('picky');

async function pickyRows(db: Kysely<any>): Promise<{ seq: number; name: string; applied: number }[]> {
  return db.selectFrom('picky').select(['seq', 'name', 'applied']).orderBy('seq').execute();
}

describe('projection quarantine: one bad event is parked, the projector stays live', () => {
  const config = isolatedConfig('quarantine');
  let infra: Infrastructure;
  let sealCount = 0;

  before(async () => {
    infra = await openInfrastructure(config, 'test-quarantine');
  });
  after(async () => {
    await infra.close();
    await dropIsolated(config);
  });

  const subjectOf = (workspace: string) =>
    infra.subjects.forAggregate({ workspaceId: workspace, accountId: null, aggregate: { type: 'workspace', id: workspace } });
  /** Publishes straight onto the stream, bypassing the store's validator: what a buggy or hostile publisher does. */
  const publishRaw = async (subject: string, payload: string | object): Promise<number> => {
    const text = typeof payload === 'string' ? payload : JSON.stringify(payload);
    return (await infra.js.publish(subject, text)).seq;
  };
  /**
   * Chained and signed like the store would, except where the canonical JSON of the hash cannot be
   * made at all (a lone surrogate): a forger would then put any hash there.
   */
  const sealed = (event: UnsealedEvent) => {
    try {
      return sealEvent(event, GENESIS_HASH, infra.signing.signer);
    } catch {
      return { ...event, prev_hash: GENESIS_HASH, hash: 'f'.repeat(64) };
    }
  };
  const fresh = (name: string) => {
    const workspace = `ws-${++sealCount}`;
    return { workspace, event: workspaceCreated(workspace, name) };
  };
  const projectorOf = (projection: Projection, { batchSize = 50, admission = infra.store.admission, lingerMs }: { batchSize?: number; admission?: EventAdmission; lingerMs?: number } = {}) =>
    new Projector({
      db: infra.database.db,
      js: infra.js,
      jsm: infra.jsm,
      stream: config.eventStream,
      filterSubject: infra.subjects.all,
      projection,
      admission,
      logger: createLogger('silent'),
      batchSize,
      lingerMs,
    });
  const checkpointOf = async (projection: string) => (await readCheckpoint(infra.database.db, projection))?.lastSeq;
  /** A picky table's rows from `seq` on: the earlier tests' events are in this stream too. */
  const pickyRowsFrom = (table: string, seq: number): Promise<{ name: string; applied: number }[]> =>
    (infra.database.db as Kysely<any>).selectFrom(table).select(['name', 'applied']).where('seq', '>=', seq).orderBy('seq').execute();

  /** The events of the first test, in order: [expected quarantine code or null for good, seq]. */
  const published: { seq: number; code: string | null; name: string | null }[] = [];

  it('parks a non-JSON, schema-invalid, unknown-type, foreign-subject, bad-text and Postgres-refused event with the right code and applies everything else once', async () => {
    const good = async (name: string) => {
      const { workspace, event } = fresh(name);
      published.push({ seq: await publishRaw(subjectOf(workspace), sealed(event)), code: null, name });
    };
    const bad = async (code: string, build: () => { subject: string; payload: string | object }) => {
      const { subject, payload } = build();
      published.push({ seq: await publishRaw(subject, payload), code, name: null });
    };
    await good('first');
    await bad('not-json', () => ({ subject: subjectOf('ws-x'), payload: '{"id": "broken' }));
    await bad('schema', () => {
      const { workspace, event } = fresh('x');
      return { subject: subjectOf(workspace), payload: sealed({ ...event, data: { name: 42 } }) };
    });
    await bad('unknown-type', () => {
      const { workspace, event } = fresh('x');
      return { subject: subjectOf(workspace), payload: sealed({ ...event, type: 'WorkspaceExploded' }) };
    });
    await bad('subject-mismatch', () => {
      const { event } = fresh('x');
      return { subject: subjectOf('someone-else'), payload: sealed(event) };
    });
    await good('second');
    await bad('bad-text', () => {
      const { workspace, event } = fresh('nul\u0000');
      return { subject: subjectOf(workspace), payload: sealed(event) };
    });
    await bad('bad-text', () => {
      const { workspace, event } = fresh('\ud800');
      return { subject: subjectOf(workspace), payload: sealed(event) };
    });
    await bad('refused', () => {
      const { workspace, event } = fresh('far-too-long-for-eight');
      return { subject: subjectOf(workspace), payload: sealed(event) };
    });
    for (let i = 0; i < 20; i++) await good(`g${i}`);

    const projector = projectorOf(pickyProjection);
    await projector.start();
    const head = await infra.store.lastSequence();
    try {
      await eventually(async () => expect((await readCheckpoint(infra.database.db, 'picky'))!.lastSeq).to.equal(head), 15_000);
      expect(projector.currentStatus().stalled).to.equal(false);
      expect(projector.currentStatus().parked).to.equal(7);
    } finally {
      await projector.stop();
    }

    const rows = await pickyRows(infra.database.db);
    const goods = published.filter((p) => p.code === null);
    expect(rows.map((r) => [r.seq, r.name, r.applied])).to.deep.equal(goods.map((g) => [g.seq, g.name, 1]));
    const parked = await listQuarantine(infra.database.db);
    expect(parked.map((p) => [p.projection, p.seq, p.code])).to.deep.equal(
      published.filter((p) => p.code !== null).map((p) => ['picky', p.seq, p.code]),
    );
    const notJson = parked.find((p) => p.code === 'not-json')!;
    expect(Buffer.from(notJson.payload).toString()).to.equal('{"id": "broken');
    expect(notJson.subject).to.equal(subjectOf('ws-x'));
    expect(parked.find((p) => p.code === 'refused')!.error).to.match(/SQLSTATE 22001/);
  });

  it('a rebuild parks the same events and applies the same rows', async () => {
    const before = await pickyRows(infra.database.db);
    const parkedBefore = (await listQuarantine(infra.database.db)).map((p) => [p.seq, p.code, p.firstSeenAt.getTime()]);
    await sql`delete from event_quarantine`.execute(infra.database.db);
    const result = await rebuildProjection({
      db: infra.database.db,
      store: infra.store,
      schema: config.databaseSchema,
      filterSubject: infra.subjects.all,
      projection: pickyProjection,
      batchSize: 5,
    });
    expect(result.parked).to.equal(7);
    expect(result.events).to.equal(before.length);
    expect(await pickyRows(infra.database.db)).to.deep.equal(before);
    expect((await listQuarantine(infra.database.db)).map((p) => [p.seq, p.code])).to.deep.equal(parkedBefore.map(([seq, code]) => [seq, code]));
  });

  it('retry applies a parked event once the projection can take it, and refuses out-of-order application unless forced', async () => {
    const refused = published.find((p) => p.code === 'refused')!;
    const unfixable = published.find((p) => p.code === 'schema')!;
    const retry = (seq: number, force = false) =>
      retryQuarantined({ db: infra.database.db, store: infra.store, projections: [pickyProjection], seq, force });

    expect((await retry(refused.seq)).map((r) => r.outcome)).to.deep.equal(['still-failing']);
    expect((await retry(unfixable.seq)).map((r) => r.outcome)).to.deep.equal(['still-failing']);
    await sql`alter table picky alter column name type varchar(64)`.execute(infra.database.db);
    expect((await retry(refused.seq)).map((r) => r.outcome)).to.deep.equal(['applied']);
    expect((await pickyRows(infra.database.db)).find((r) => r.seq === refused.seq)).to.deep.equal({
      seq: refused.seq,
      name: 'far-too-long-for-eight',
      applied: 1,
    });
    expect((await listQuarantine(infra.database.db)).map((p) => p.seq)).not.to.include(refused.seq);

    // An event whose aggregate moved on since it was parked: retrying alone would apply it out of order.
    const { workspace, event } = fresh('a-name-too-long-again');
    await sql`alter table picky alter column name type varchar(8) using left(name, 8)`.execute(infra.database.db);
    const late = await publishRaw(subjectOf(workspace), sealed(event));
    const later = await publishRaw(subjectOf(workspace), sealed(workspaceCreated(workspace, 'ok')));
    const projector = projectorOf(pickyProjection);
    await projector.start();
    try {
      await eventually(async () => expect((await readCheckpoint(infra.database.db, 'picky'))!.lastSeq).to.equal(later));
    } finally {
      await projector.stop();
    }
    expect((await listQuarantine(infra.database.db)).map((p) => p.seq)).to.include(late);
    await sql`alter table picky alter column name type varchar(64)`.execute(infra.database.db);
    expect((await retry(late)).map((r) => r.outcome)).to.deep.equal(['out-of-order']);
    expect((await retry(late, true)).map((r) => r.outcome)).to.deep.equal(['applied']);
    expect((await retry(late)).map((r) => r.outcome)).to.deep.equal([]);
  });

  it('parks what the pluggable authenticity check refuses as untrusted', async () => {
    const forged = fresh('forged');
    const genuine = fresh('genuine');
    const admission = new EventAdmission({
      authenticity: {
        check: (event) => {
          if (event.workspace_id === forged.workspace) throw new Error('no valid signature from a known key');
        },
      },
    });
    const forgedSeq = await publishRaw(subjectOf(forged.workspace), sealed(forged.event));
    const genuineSeq = await publishRaw(subjectOf(genuine.workspace), sealed(genuine.event));
    const projector = projectorOf(pickyProjectionNamed('picky_signed'), { batchSize: 2000, admission });
    await projector.start();
    try {
      await eventually(async () => expect((await readCheckpoint(infra.database.db, 'picky_signed'))!.lastSeq).to.equal(genuineSeq));
    } finally {
      await projector.stop();
    }
    const parked = (await listQuarantine(infra.database.db)).filter((p) => p.projection === 'picky_signed' && p.seq >= forgedSeq);
    expect(parked.map((p) => [p.seq, p.code, p.error])).to.deep.equal([
      [forgedSeq, 'untrusted', `stream sequence ${forgedSeq} (${subjectOf(forged.workspace)}) is inadmissible (untrusted): no valid signature from a known key`],
    ]);
  });

  it('still retries transient failures (serialization failure 40001) in order, parking nothing', async () => {
    let failuresLeft = 3;
    let calls = 0;
    const flaky: Projection = {
      ...pickyProjection,
      name: 'flaky',
      tables: ['flaky_rows'],
      async createTables(db: Kysely<any>) {
        await db.schema.createTable('flaky_rows').addColumn('seq', 'bigint', (c) => c.primaryKey()).addColumn('applied', 'integer').execute();
      },
      async apply(trx: Transaction<Database>, events: readonly StoredEvent[]) {
        calls++;
        if (failuresLeft > 0) {
          failuresLeft--;
          throw Object.assign(new Error('could not serialize access due to concurrent update'), { code: '40001' });
        }
        const db = trx as unknown as Kysely<any>;
        for (const { seq } of events) {
          await db
            .insertInto('flaky_rows')
            .values({ seq, applied: 1 })
            .onConflict((oc: any) => oc.column('seq').doUpdateSet({ applied: sql`flaky_rows.applied + 1` }))
            .execute();
        }
      },
    };
    const projector = projectorOf(flaky, { batchSize: 1000 });
    const quarantinedBefore = (await listQuarantine(infra.database.db)).filter((p) => p.projection === 'flaky').length;
    await projector.start();
    const head = await infra.store.lastSequence();
    try {
      await eventually(async () => expect((await readCheckpoint(infra.database.db, 'flaky'))!.lastSeq).to.equal(head), 20_000);
    } finally {
      await projector.stop();
    }
    expect(calls).to.be.greaterThan(3);
    const rows: { seq: number; applied: number }[] = await (infra.database.db as Kysely<any>)
      .selectFrom('flaky_rows')
      .select(['seq', 'applied'])
      .orderBy('seq')
      .execute();
    expect(rows.every((r) => r.applied === 1)).to.equal(true);
    // Every admissible event is applied exactly once, in order; only the inadmissible ones are parked (none for Postgres reasons).
    const flakyParked = (await listQuarantine(infra.database.db)).filter((p) => p.projection === 'flaky');
    expect(quarantinedBefore).to.equal(0);
    expect(flakyParked.every((p) => p.code !== 'refused')).to.equal(true);
    expect(rows.length + flakyParked.length).to.equal(head);
  });
  it('a live projector sees a retry move a chain head behind its back, and applies the next event of that subject', async () => {
    // The projector remembers the chain heads it committed and, once it wrote the checkpoint
    // itself, commits without locking it. The retry below moves a head it remembers and
    // rewrites the checkpoint at the same sequence: the projector must notice before it judges
    // the subject's next event against the head it remembers (it would park it as chain-broken).
    const table = 'picky_heads';
    const { workspace, event: zero } = fresh('zero');
    const admission = new EventAdmission({
      authenticity: {
        check: (event) => {
          if ((event.data as { name?: string }).name === 'late' && !trusted) throw new Error('no valid signature from a known key');
        },
      },
    });
    let trusted = false;
    const projector = projectorOf(pickyProjectionNamed(table), { admission, lingerMs: 0 });
    const first = sealed(zero);
    const zeroSeq = await publishRaw(subjectOf(workspace), first);
    await projector.start();
    try {
      await eventually(async () => expect(await checkpointOf(table)).to.equal(zeroSeq));
      const late = sealEvent(workspaceCreated(workspace, 'late'), first.hash, infra.signing.signer);
      const firstSeq = await publishRaw(subjectOf(workspace), late);
      await eventually(async () => expect(await checkpointOf(table)).to.equal(firstSeq));
      const parkedSince = async () => (await listQuarantine(infra.database.db)).filter((p) => p.projection === table && p.seq >= zeroSeq).map((p) => [p.seq, p.code]);
      expect(await parkedSince()).to.deep.equal([[firstSeq, 'untrusted']]);

      trusted = true;
      const retried = await retryQuarantined({ db: infra.database.db, store: infra.store, projections: [pickyProjectionNamed(table)], seq: firstSeq });
      expect(retried.map((r) => r.outcome)).to.deep.equal(['applied']);
      const next = sealEvent(workspaceCreated(workspace, 'next'), late.hash, infra.signing.signer);
      const nextSeq = await publishRaw(subjectOf(workspace), next);
      await eventually(async () => expect(await checkpointOf(table)).to.equal(nextSeq));
      expect(await parkedSince()).to.deep.equal([]);
    } finally {
      await projector.stop();
    }
    expect(await pickyRowsFrom(table, zeroSeq)).to.deep.equal([
      { name: 'zero', applied: 1 },
      { name: 'late', applied: 1 },
      { name: 'next', applied: 1 },
    ]);
  });
  it('a live projector that commits without savepoints isolates an event Postgres refuses, and applies the rest of its batch once', async () => {
    const table = 'picky_live';
    const projector = projectorOf(pickyProjectionNamed(table), { lingerMs: 50 });
    const warm = fresh('warm');
    const warmSeq = await publishRaw(subjectOf(warm.workspace), sealed(warm.event));
    await projector.start();
    try {
      // The first batch takes the careful path (the projector has not written the checkpoint yet); the next ones the fast one.
      await eventually(async () => expect(await checkpointOf(table)).to.equal(warmSeq));
      // The earlier tests' bad events are in this stream too.
      const parkedBefore = projector.currentStatus().parked;
      const batch = [fresh('before'), fresh('much-too-long-for-eight'), fresh('after')];
      const seqs = await Promise.all(batch.map(({ workspace, event }) => publishRaw(subjectOf(workspace), sealed(event))));
      await eventually(async () => expect(await checkpointOf(table)).to.equal(Math.max(...seqs)));
      expect(projector.currentStatus()).to.include({ stalled: false, parked: parkedBefore + 1 });
    } finally {
      await projector.stop();
    }
    const parked = (await listQuarantine(infra.database.db)).filter((p) => p.projection === table && p.seq > warmSeq);
    expect(parked.map((p) => p.code)).to.deep.equal(['refused']);
    expect(parked[0]!.error).to.match(/SQLSTATE 22001/);
    expect(await pickyRowsFrom(table, warmSeq)).to.deep.equal([
      { name: 'warm', applied: 1 },
      { name: 'before', applied: 1 },
      { name: 'after', applied: 1 },
    ]);
  });
});
