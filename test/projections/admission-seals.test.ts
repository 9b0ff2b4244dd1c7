import { expect } from 'chai';
import { generateKeyPairSync } from 'node:crypto';
import { sql, type Kysely, type Transaction } from 'kysely';
import { v4 as uuidv4 } from 'uuid';
import { AdmissionSeals, admissionSealsOf } from '../../projections/runtime/admission-seals.ts';
import { readCheckpoint } from '../../projections/runtime/checkpoints.ts';
import type { Projection } from '../../projections/runtime/projection.ts';
import { Projector } from '../../projections/runtime/projector.ts';
import { listQuarantine } from '../../projections/runtime/quarantine.ts';
import { rebuildProjection } from '../../projections/runtime/rebuild.ts';
import type { Database } from '../../src/db/schema.ts';
import { EMPTY_POSITION, type StoredEvent } from '../../src/event-store/event-store.ts';
import { GENESIS_HASH } from '../../src/events/envelope.ts';
import { EventAdmission } from '../../src/events/event-admission.ts';
import { sealEvent } from '../../src/events/event-hash.ts';
import { sealSignedBytes } from '../../src/events/sealing/admission-seal.ts';
import { EventSigner } from '../../src/events/signing/event-signer.ts';
import { EventVerifier } from '../../src/events/signing/event-verifier.ts';
import type { Config } from '../../src/config/config.ts';
import { createLogger } from '../../src/log/logger.ts';
import { openInfrastructure, type Infrastructure } from '../../src/runtime/infrastructure.ts';
import { workspaceCreated } from '../support/event-factory.ts';
import { eventually } from '../support/eventually.ts';
import { ledgerProjector, ledgerRows } from '../support/ledger-projection.ts';
import { dropIsolated, isolatedConfig } from '../support/isolation.ts';

/** Small blocks, so a few dozen events make several. */
const BLOCK = 10;
const logger = createLogger('silent');

/** Records every event it is given, once per application: what a projection believed, in order. */
function recordingProjection(name: string): Projection {
  return {
    name,
    version: 1,
    tables: [name],
    async createTables(db: Kysely<any>) {
      await db.schema
        .createTable(name)
        .addColumn('seq', 'bigint', (c) => c.primaryKey())
        .addColumn('event_id', 'text', (c) => c.notNull())
        .execute();
    },
    async apply(trx: Transaction<Database>, events: readonly StoredEvent[]) {
      const db = trx as unknown as Kysely<any>;
      await db.insertInto(name).values(events.map(({ seq, event }) => ({ seq, event_id: event.id }))).execute();
    },
  };
}

async function believed(db: Kysely<any>, projection: string): Promise<{ seq: number; event_id: string }[]> {
  return (await db.selectFrom(projection).select(['seq', 'event_id']).orderBy('seq').execute()).map((row: any) => ({ seq: Number(row.seq), event_id: row.event_id }));
}

async function parked(db: Kysely<Database>, projection: string): Promise<{ seq: number; code: string }[]> {
  return (await listQuarantine(db)).filter((entry) => entry.projection === projection).map((entry) => ({ seq: Number(entry.seq), code: entry.code }));
}

function sealsFor(infra: Infrastructure, admission = infra.store.admission, verifier = infra.signing.verifier): AdmissionSeals {
  return admissionSealsOf(infra, logger, { admission, verifier, blockSize: BLOCK });
}

/** Runs `projection` from zero to the stream's head on `infra` and stops. */
async function project(infra: Infrastructure, projection: Projection, seals: AdmissionSeals | undefined, admission = infra.store.admission): Promise<void> {
  const head = await infra.store.lastSequence();
  const projector = new Projector({
    db: infra.database.db,
    js: infra.js,
    jsm: infra.jsm,
    stream: infra.config.eventStream,
    filterSubject: infra.subjects.all,
    projection,
    admission,
    seals,
    logger,
    batchSize: 20,
    // The stream is written before the projector starts: batches of 20 from sequence 1, each ending at a block's end.
    lingerMs: 500,
  });
  await projector.start();
  try {
    await eventually(async () => expect((await readCheckpoint(infra.database.db, projection.name))?.lastSeq).to.equal(head), 20_000);
  } finally {
    await projector.stop();
  }
}

describe('admission seals: a block admitted once is believed from its signed seal, never from anything weaker', function () {
  this.timeout(60_000);
  const config = isolatedConfig('seals');
  let writer: Infrastructure;
  let workspaces = 0;

  before(async () => {
    writer = await openInfrastructure(config, 'test-seals-writer');
  });
  after(async () => {
    await writer.close();
    await dropIsolated(config);
  });

  const subjectOf = (infra: Infrastructure, workspace: string) =>
    infra.subjects.forAggregate({ workspaceId: workspace, accountId: null, aggregate: { type: 'workspace', id: workspace } });
  const appendGenuine = async (infra: Infrastructure, count: number) => {
    for (let i = 0; i < count; i++) {
      const workspace = `ws-${++workspaces}`;
      await infra.store.append(subjectOf(infra, workspace), [workspaceCreated(workspace)], EMPTY_POSITION);
    }
  };
  const publishRaw = async (infra: Infrastructure, subject: string, payload: string | object) =>
    (await infra.js.publish(subject, typeof payload === 'string' ? payload : JSON.stringify(payload))).seq;
  /** A schema-valid, chained event signed by a key that is not the service's. */
  const signedBy = (infra: Infrastructure, signer: EventSigner) => {
    const workspace = `ws-${++workspaces}`;
    return { subject: subjectOf(infra, workspace), event: sealEvent(workspaceCreated(workspace), GENESIS_HASH, signer) };
  };
  const attacker = new EventSigner(generateKeyPairSync('ed25519').privateKey);

  /** A process of its own on `on`'s stream and database: nothing remembered from any other. */
  const withProcess = async <T>(on: Config, work: (infra: Infrastructure) => Promise<T>): Promise<T> => {
    const infra = await openInfrastructure(on, 'test-seals-reader');
    try {
      return await work(infra);
    } finally {
      await infra.close();
    }
  };
  /** A fresh process's view of the writer's stream and database. */
  const withFreshProcess = <T>(work: (infra: Infrastructure) => Promise<T>): Promise<T> => withProcess(config, work);
  /** A stream and database of the test's own, dropped after it. */
  const withOwnStream = async (label: string, work: (own: Config) => Promise<void>): Promise<void> => {
    const own = isolatedConfig(label);
    try {
      await work(own);
    } finally {
      await dropIsolated(own);
    }
  };
  /** Well-formed and chained, but unsigned: what anyone with publish rights can write. */
  const unsignedEvent = (workspace: string) => ({ ...workspaceCreated(workspace), prev_hash: GENESIS_HASH, hash: '0'.repeat(64) });

  const forged: { seq: number; code: string }[] = [];

  it('seals every block a projector admitted whole, and a fresh process reading the stream again believes them: same events, same refusals, no event signature checked', async () => {
    await appendGenuine(writer, 12);
    forged.push({ seq: await publishRaw(writer, subjectOf(writer, 'ws-forged'), unsignedEvent('ws-forged')), code: 'untrusted' });
    await appendGenuine(writer, 5);
    forged.push({ seq: await publishRaw(writer, subjectOf(writer, 'ws-junk'), '{"not json'), code: 'not-json' });
    const other = signedBy(writer, attacker);
    forged.push({ seq: await publishRaw(writer, other.subject, other.event), code: 'untrusted' });
    await appendGenuine(writer, 21);
    const head = await writer.store.lastSequence();
    expect(head).to.equal(41);

    const first = sealsFor(writer);
    await project(writer, recordingProjection('first_pass'), first);
    expect(first.counts.written, 'blocks 1-10 … 31-40 were admitted whole; 41 is alone in its block').to.equal(4);
    expect(await parked(writer.database.db, 'first_pass')).to.deep.equal(forged);

    await withFreshProcess(async (reader) => {
      const seals = sealsFor(reader);
      const signaturesBefore = reader.signing.verifier.ed25519Verifications;
      await project(reader, recordingProjection('second_pass'), seals);
      expect(seals.counts.eventsFromSeals).to.equal(40);
      expect(seals.counts.rejected).to.equal(0);
      // Four seal signatures and the one event outside a sealed block (41), nothing else.
      expect(reader.signing.verifier.ed25519Verifications - signaturesBefore).to.equal(5);
      expect(await believed(reader.database.db, 'second_pass')).to.deep.equal(await believed(writer.database.db, 'first_pass'));
      expect(await parked(reader.database.db, 'second_pass')).to.deep.equal(forged);
    });
  });

  it('does not believe a seal altered in Postgres, or one signed by another key: the block is admitted in full and the forged events are refused again', async () => {
    const db = writer.database.db as Kysely<any>;
    // Whoever can write the table drops the refusals of the block holding the forged event…
    await sql`update admission_seals set refused = '[]'::jsonb where stream = ${config.eventStream} and first_seq = 11`.execute(db);
    // …and seals the block of the other two with a key of their own.
    const row = await db.selectFrom('admission_seals').selectAll().where('stream', '=', config.eventStream).where('first_seq', '=', 11 + BLOCK).executeTakeFirstOrThrow();
    const unsigned = { stream: config.eventStream, firstSeq: 21, lastSeq: 30, digest: row.digest, rules: row.rules, refused: [], keyId: attacker.keyId };
    await sql`update admission_seals set refused = '[]'::jsonb, key_id = ${attacker.keyId}, signature = ${attacker.signRecord(sealSignedBytes(unsigned))}
      where stream = ${config.eventStream} and first_seq = 21`.execute(db);

    await withFreshProcess(async (reader) => {
      const seals = sealsFor(reader);
      await project(reader, recordingProjection('tampered'), seals);
      expect(seals.counts.rejected).to.equal(2);
      expect(seals.counts.eventsFromSeals).to.equal(20);
      expect(await parked(reader.database.db, 'tampered')).to.deep.equal(forged);
      expect(await believed(reader.database.db, 'tampered')).to.deep.equal(await believed(writer.database.db, 'first_pass'));
    });
  });

  it('adsagent projections rebuild believes the sealed blocks too, and parks the same events', async () => {
    const before = await believed(writer.database.db, 'first_pass');
    await withFreshProcess(async (reader) => {
      const seals = sealsFor(reader);
      const signaturesBefore = reader.signing.verifier.ed25519Verifications;
      const result = await rebuildProjection({
        db: reader.database.db,
        store: reader.store,
        schema: config.databaseSchema,
        filterSubject: reader.subjects.all,
        projection: recordingProjection('first_pass'),
        seals,
      });
      expect(result).to.include({ events: 38, parked: 3, lastSeq: 41 });
      // The pass above sealed the two altered blocks again: all four are believed.
      expect(seals.counts.eventsFromSeals).to.equal(40);
      expect(reader.signing.verifier.ed25519Verifications - signaturesBefore).to.equal(5);
      expect(await believed(reader.database.db, 'first_pass')).to.deep.equal(before);
      expect(await parked(reader.database.db, 'first_pass')).to.deep.equal(forged);
    });
  });

  it('does not believe a seal over other messages: a stream made again with a forged event where a genuine one was is refused', () =>
    withOwnStream('seals-remade', async (remade) => {
      await withProcess(remade, async (first) => {
        await appendGenuine(first, BLOCK);
        const seals = sealsFor(first);
        await project(first, recordingProjection('before_remake'), seals);
        expect(seals.counts.written).to.equal(1);
        await first.jsm.streams.delete(remade.eventStream);
      });
      // The same stream name, the same sequences, other bytes: the seal of block 1 stays in Postgres.
      await withProcess(remade, async (second) => {
        await appendGenuine(second, 4);
        const forgedSeq = await publishRaw(second, subjectOf(second, 'ws-forged-2'), unsignedEvent('ws-forged-2'));
        await appendGenuine(second, BLOCK - 5);
        const seals = sealsFor(second);
        await project(second, recordingProjection('after_remake'), seals);
        expect(seals.counts.rejected).to.equal(1);
        expect(seals.counts.eventsFromSeals).to.equal(0);
        expect(await parked(second.database.db, 'after_remake')).to.deep.equal([{ seq: forgedSeq, code: 'untrusted' }]);
      });
    }));

  it('reaches a verdict again under other rules: an event refused for an unknown key is believed once that key is known', () =>
    withOwnStream('seals-rules', (rotated) =>
      withProcess(rotated, async (infra) => {
        await appendGenuine(infra, 3);
        const retiredKeyEvent = signedBy(infra, attacker);
        const seq = await publishRaw(infra, retiredKeyEvent.subject, retiredKeyEvent.event);
        await appendGenuine(infra, BLOCK - 4);
        const seals = sealsFor(infra);
        await project(infra, recordingProjection('one_key'), seals);
        expect(seals.counts.written).to.equal(1);
        expect(await parked(infra.database.db, 'one_key')).to.deep.equal([{ seq, code: 'untrusted' }]);

        // The operator adds the other key as a retired one: the rules change, and so do the verdicts.
        const verifier = new EventVerifier(
          [...infra.signing.keys, { keyId: attacker.keyId, publicKey: attacker.publicKey, status: 'retired' }],
          infra.signing.verifier.activation,
        );
        const admission = new EventAdmission({ authenticity: verifier });
        expect(admission.rulesFingerprint()).to.not.equal(infra.store.admission.rulesFingerprint());
        const again = sealsFor(infra, admission, verifier);
        await project(infra, recordingProjection('two_keys'), again, admission);
        expect(again.counts.eventsFromSeals).to.equal(0);
        expect(await parked(infra.database.db, 'two_keys')).to.deep.equal([]);
        expect((await believed(infra.database.db, 'two_keys')).map((row) => row.seq)).to.include(seq);
      }),
    ));

  it('does not seal a block whose refusal quotes hostile or oversized text, and still refuses those events on every read', () =>
    withOwnStream('seals-hostile', (hostile) =>
      withProcess(hostile, async (infra) => {
        await appendGenuine(infra, 2);
        const base = unsignedEvent('ws-hostile');
        const nul = await publishRaw(infra, subjectOf(infra, 'ws-hostile'), { ...base, id: uuidv4(), type: 'Evil\u0000Type' });
        await appendGenuine(infra, BLOCK - 3);
        // Block 2: a type name far longer than a seal carries.
        const long = await publishRaw(infra, subjectOf(infra, 'ws-hostile-2'), { ...base, id: uuidv4(), type: 'X'.repeat(5_000) });
        await appendGenuine(infra, BLOCK - 1);
        const seals = sealsFor(infra);
        await project(infra, recordingProjection('hostile_first'), seals);
        expect(seals.counts.written).to.equal(0);
        const expected = [{ seq: nul, code: 'unknown-type' }, { seq: long, code: 'unknown-type' }];
        expect(await parked(infra.database.db, 'hostile_first')).to.deep.equal(expected);
        await project(infra, recordingProjection('hostile_again'), seals);
        expect(seals.counts.eventsFromSeals).to.equal(0);
        expect(await parked(infra.database.db, 'hostile_again')).to.deep.equal(expected);
      }),
    ));

  it('applies every event exactly once and in order when a projector believing seals is stopped between its commit and its ack', () =>
    withOwnStream('seals-crash', async (own) => {
      await withProcess(own, async (infra) => {
        await appendGenuine(infra, 3 * BLOCK);
        const sealing = sealsFor(infra);
        await project(infra, recordingProjection('sealing'), sealing);
        expect(sealing.counts.written).to.equal(3);
      });
      const head = 3 * BLOCK;
      // The victim commits its first batch and "dies" before acknowledging the second.
      await withProcess(own, async (crashed) => {
        let freeze: (() => void) | undefined;
        const frozen = new Promise<void>((resolve) => (freeze = resolve));
        let commits = 0;
        const victim = ledgerProjector(crashed, {
          batchSize: BLOCK,
          lingerMs: 500,
          seals: sealsFor(crashed),
          afterCommit: async () => {
            if (++commits < 2) return;
            freeze!();
            await new Promise(() => undefined);
          },
        });
        await victim.start();
        await frozen;
        await crashed.nc.close();
      });
      await withProcess(own, async (survivor) => {
        expect((await readCheckpoint(survivor.database.db, 'ledger'))!.lastSeq).to.be.within(1, head - 1);
        const seals = sealsFor(survivor);
        const projector = ledgerProjector(survivor, { batchSize: BLOCK, lingerMs: 500, seals });
        await projector.start();
        try {
          await eventually(async () => expect((await readCheckpoint(survivor.database.db, 'ledger'))!.lastSeq).to.equal(head), 20_000);
        } finally {
          await projector.stop();
        }
        expect(seals.counts.eventsFromSeals).to.be.greaterThan(0);
        const rows = await ledgerRows(survivor.database.db);
        expect(rows.filter((row) => row.applied !== 1)).to.deep.equal([]);
        expect(rows.map((row) => Number(row.seq))).to.deep.equal(Array.from({ length: head }, (_, i) => i + 1));
      });
    }));

  it('seals only blocks it saw admitted from first to last sequence: a gap leaves the block unsealed', async () => {
    const seals = sealsFor(writer);
    const recorder = seals.recorder();
    const message = (seq: number) => ({ seq, subject: `s.${seq}`, data: Buffer.from(`{"n":${seq}}`) });
    const ok = (seq: number) => ({ ok: true as const, stored: { seq, subject: `s.${seq}`, event: {} as any } });
    const range = (from: number, to: number) => Array.from({ length: to - from + 1 }, (_, i) => from + i);
    const feed = (seqs: number[]) => recorder.record(seqs.map(message), seqs.map(ok), new Set());
    // Block 1001-1010 with 1006 missing (a redelivery cut the flow), then 1011-1020 whole.
    feed(range(1001, 1005));
    feed(range(1007, 1010));
    feed(range(1011, 1020));
    await seals.flush();
    expect(seals.counts.written).to.equal(1);
    const rows = await (writer.database.db as Kysely<any>).selectFrom('admission_seals').select('first_seq').where('stream', '=', config.eventStream).where('first_seq', '>', 1000).execute();
    expect(rows.map((row: any) => Number(row.first_seq))).to.deep.equal([1011]);
  });

  it('ends a catching-up batch at a block end, so the next batch holds its blocks whole', () => {
    const seals = new AdmissionSeals({ db: writer.database.db, stream: 'S', admission: writer.store.admission, verifier: writer.signing.verifier, logger, blockSize: 500 });
    const buffered = (from: number, count: number) => Array.from({ length: count }, (_, i) => ({ seq: from + i }));
    expect(seals.alignedCount(buffered(1, 2000), 2000)).to.equal(2000);
    expect(seals.alignedCount(buffered(257, 2000), 2000)).to.equal(1744);
    expect(seals.alignedCount(buffered(257, 200), 200), 'no block ends inside: taken as it is').to.equal(200);
    const gapBefore = [...buffered(257, 300), ...buffered(600, 1700)];
    expect(seals.alignedCount(gapBefore, 2000), 'a gap before the block end does not move it').to.equal(1701);
    const gapAfter = [...buffered(1, 1990), ...buffered(2005, 10)];
    expect(seals.alignedCount(gapAfter, 2000), 'no message at the block end: taken as it is').to.equal(2000);
  });
});
