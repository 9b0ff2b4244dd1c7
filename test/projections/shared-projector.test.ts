import { expect } from 'chai';
import { sql, type Kysely, type Transaction } from 'kysely';
import { readCheckpoint } from '../../projections/runtime/checkpoints.ts';
import type { Projection } from '../../projections/runtime/projection.ts';
import { Projector, ProjectorConfigurationError, subjectSlices } from '../../projections/runtime/projector.ts';
import type { Database } from '../../src/db/schema.ts';
import type { StoredEvent } from '../../src/event-store/event-store.ts';
import { EventAdmission, type AuthenticityCheck } from '../../src/events/event-admission.ts';
import type { EventEnvelope } from '../../src/events/envelope.ts';
import { createLogger } from '../../src/log/logger.ts';
import { openInfrastructure, type Infrastructure } from '../../src/runtime/infrastructure.ts';
import { ChainedAppender } from '../support/chained-appender.ts';
import { workspaceCreated } from '../support/event-factory.ts';
import { eventually } from '../support/eventually.ts';
import { dropIsolated, isolatedConfig } from '../support/isolation.ts';

/**
 * A counter per event, incremented by every application: an event applied twice shows as 2,
 * a lost one as a missing row. `failFirst` calls of `apply` fail with a serialization
 * failure (40001), which the projector retries.
 */
function counterProjection(name: string, failFirst = 0, failWhile: () => boolean = () => false): Projection & { calls: number } {
  let failuresLeft = failFirst;
  return {
    name,
    version: 1,
    tables: [name],
    calls: 0,
    async createTables(db: Kysely<any>) {
      await db.schema
        .createTable(name)
        .addColumn('seq', 'bigint', (c) => c.primaryKey())
        .addColumn('applied', 'integer', (c) => c.notNull())
        .execute();
    },
    async apply(this: { calls: number }, trx: Transaction<Database>, events: readonly StoredEvent[]) {
      this.calls++;
      if (failuresLeft > 0 || failWhile()) {
        failuresLeft--;
        throw Object.assign(new Error('could not serialize access'), { code: '40001' });
      }
      const db = trx as unknown as Kysely<any>;
      for (const { seq } of events) {
        await db
          .insertInto(name)
          .values({ seq, applied: 1 })
          .onConflict((oc: any) => oc.column('seq').doUpdateSet({ applied: sql`${sql.ref(`${name}.applied`)} + 1` }))
          .execute();
      }
    },
  };
}

async function counterRows(db: Kysely<any>, name: string): Promise<{ seq: number; applied: number }[]> {
  return db.selectFrom(name).select(['seq', 'applied']).orderBy('seq').execute();
}

describe('one projector for several projections: one consumer, one admission, a transaction each', () => {
  const config = isolatedConfig('sharedprojector');
  let infra: Infrastructure;

  before(async () => {
    infra = await openInfrastructure(config, 'test-shared-projector');
  });
  after(async () => {
    await infra.close();
    await dropIsolated(config);
  });

  const projectorOf = (source: Infrastructure, projections: readonly Projection[], afterCommit?: (seq: number) => Promise<void> | void, lingerMs?: number) =>
    new Projector({
      db: source.database.db,
      js: source.js,
      jsm: source.jsm,
      stream: config.eventStream,
      filterSubject: source.subjects.all,
      projections,
      admission: source.store.admission,
      logger: createLogger('silent'),
      batchSize: 25,
      afterCommit,
      ...(lingerMs !== undefined ? { lingerMs } : {}),
    });

  const appendEvents = async (count: number, aggregates = 10): Promise<void> => {
    const appender = new ChainedAppender(infra);
    for (let i = 0; i < count; i++) {
      const id = `agg-${i % aggregates}`;
      await appender.append(appender.workspaceSubject(id), workspaceCreated(id));
    }
  };

  const reachedHead = async (names: readonly string[]) => {
    const head = await infra.store.lastSequence();
    await eventually(async () => {
      for (const name of names) expect((await readCheckpoint(infra.database.db, name))?.lastSeq, name).to.equal(head);
    }, 20_000);
    return head;
  };

  /** Every event of the stream applied exactly once, in a table that started at sequence `from`. */
  const expectEachOnce = async (name: string, head: number, from = 1) => {
    const rows = await counterRows(infra.database.db, name);
    expect(rows.map((r) => r.seq), name).to.deep.equal(Array.from({ length: head - from + 1 }, (_, i) => from + i));
    expect(rows.filter((r) => r.applied !== 1), name).to.deep.equal([]);
  };

  it('refuses a projector without projections, with both options, or with one projection twice', () => {
    const one = counterProjection('refused_one');
    const options = { db: infra.database.db, js: infra.js, jsm: infra.jsm, stream: config.eventStream, filterSubject: infra.subjects.all, logger: createLogger('silent') };
    expect(() => new Projector({ ...options, projections: [] })).to.throw(ProjectorConfigurationError);
    expect(() => new Projector({ ...options, projection: one, projections: [one] })).to.throw(ProjectorConfigurationError);
    expect(() => new Projector({ ...options, projections: [one, one] })).to.throw(ProjectorConfigurationError);
  });

  it('applies every event once to each projection, each with its own checkpoint, through one durable consumer', async () => {
    await appendEvents(120);
    const projector = projectorOf(infra, [counterProjection('shared_a'), counterProjection('shared_b')]);
    await projector.start();
    try {
      const head = await reachedHead(['shared_a', 'shared_b']);
      await expectEachOnce('shared_a', head);
      await expectEachOnce('shared_b', head);
      expect(projector.statuses().map((s) => [s.name, s.lastSeq, s.stalled])).to.deep.equal([
        ['shared_a', head, false],
        ['shared_b', head, false],
      ]);
      const consumers: string[] = [];
      for await (const info of await infra.jsm.consumers.list(config.eventStream)) consumers.push(info.name);
      expect(consumers.filter((name) => name.startsWith('projector'))).to.deep.equal([projector.consumerName]);
    } finally {
      await projector.stop();
    }
  });

  it('given events trickling in one at a time, applies several in each transaction (lingering), each exactly once', async () => {
    const trickled = counterProjection('lingered');
    const projector = projectorOf(infra, [trickled], undefined, 200);
    await projector.start();
    try {
      await reachedHead(['lingered']);
      const callsBefore = trickled.calls;
      const appender = new ChainedAppender(infra);
      const started = performance.now();
      for (let i = 0; i < 20; i++) {
        await appender.append(appender.workspaceSubject(`trickle-${i}`), workspaceCreated(`trickle-${i}`));
        await new Promise((resolve) => setTimeout(resolve, 5));
      }
      const trickleMs = performance.now() - started;
      const head = await reachedHead(['lingered']);
      await expectEachOnce('lingered', head);
      // Applied one by one, 20 events make 20 transactions; lingering 200 ms makes one per 200 ms of trickle (and one for the tail).
      expect(trickled.calls - callsBefore).to.be.at.most(Math.ceil(trickleMs / 200) + 2);
    } finally {
      await projector.stop();
    }
  });

  it('retries only the projection that failed: the other is not applied again and neither loses an event', async () => {
    const flaky = counterProjection('retried_flaky', 3);
    const steady = counterProjection('retried_steady');
    await appendEvents(60);
    const projector = projectorOf(infra, [flaky, steady]);
    await projector.start();
    try {
      const head = await reachedHead(['retried_flaky', 'retried_steady']);
      await expectEachOnce('retried_flaky', head);
      await expectEachOnce('retried_steady', head);
      // Three failed calls on the flaky one, none extra on the steady one.
      expect(flaky.calls - steady.calls).to.equal(3);
      expect(projector.statuses().every((s) => !s.stalled)).to.equal(true);
    } finally {
      await projector.stop();
    }
  });

  it('lets a projection that keeps failing alone go on with a consumer of its own, so the others are not held back', async () => {
    let broken = true;
    const names = ['detached_broken', 'detached_steady'];
    const projector = projectorOf(infra, [counterProjection(names[0]!, 0, () => broken), counterProjection(names[1]!)]);
    await appendEvents(50);
    await projector.start();
    try {
      const head = await reachedHead(['detached_steady']);
      expect(projector.statuses()[0]!.stalled).to.equal(true);
      expect((await readCheckpoint(infra.database.db, 'detached_broken'))!.lastSeq).to.be.lessThan(head);
      const consumers: string[] = [];
      for await (const info of await infra.jsm.consumers.list(config.eventStream)) consumers.push(info.name);
      expect(consumers).to.include.members([projector.consumerName, 'projector_detached_broken']);

      broken = false;
      await appendEvents(10);
      const newHead = await reachedHead(names);
      for (const name of names) await expectEachOnce(name, newHead);
      await eventually(() => expect(projector.statuses().map((s) => s.stalled)).to.deep.equal([false, false]));
    } finally {
      await projector.stop();
    }
  });

  it('starts from the projection furthest behind: one added later catches up while the others skip what they have', async () => {
    await appendEvents(40);
    const early = counterProjection('late_early');
    const alone = projectorOf(infra, [early]);
    await alone.start();
    await reachedHead(['late_early']);
    await alone.stop();

    await appendEvents(30);
    const together = projectorOf(infra, [early, counterProjection('late_added')]);
    await together.start();
    try {
      await appendEvents(10);
      const head = await reachedHead(['late_early', 'late_added']);
      await expectEachOnce('late_early', head);
      await expectEachOnce('late_added', head);
    } finally {
      await together.stop();
    }
  });

  it('applies every event exactly once to each projection when stopped between the commits and the ack', async () => {
    await appendEvents(100);
    const names = ['crash_a', 'crash_b'];
    const crashed = await openInfrastructure(config, 'test-shared-projector-crashing');
    let freeze: (() => void) | undefined;
    const frozen = new Promise<void>((resolve) => (freeze = resolve));
    let commits = 0;
    const victim = projectorOf(crashed, names.map((name) => counterProjection(name)), async () => {
      if (++commits === 2) {
        freeze!();
        await new Promise(() => undefined); // never acks: the process "dies" here
      }
    });
    await victim.start();
    await frozen;
    await crashed.nc.close();
    for (const name of names) expect((await readCheckpoint(infra.database.db, name))!.lastSeq).to.be.greaterThan(0);

    const survivor = projectorOf(infra, names.map((name) => counterProjection(name)));
    await survivor.start();
    try {
      const head = await reachedHead(names);
      for (const name of names) await expectEachOnce(name, head);
    } finally {
      await survivor.stop();
      await crashed.database.close();
    }
  });
});

describe('subjectSlices: a batch admitted in slices that share no subject', () => {
  const message = (seq: number, subject: string) => ({ seq, subject });

  it('puts each subject in one slice, keeps stream order in each, and covers the batch once', () => {
    const subjects = ['a', 'b', 'a', 'c', 'c', 'b', 'd', 'a', 'e', 'e', 'c'];
    const messages = subjects.map((subject, i) => message(i + 1, subject));
    const slices = subjectSlices(messages, 3);
    expect(slices.length).to.be.greaterThan(1);
    expect(slices.flat().sort((x, y) => x - y)).to.deep.equal(messages.map((_, i) => i));
    const sliceOf = new Map<string, number>();
    slices.forEach((slice, index) => {
      expect(slice).to.deep.equal([...slice].sort((x, y) => x - y));
      for (const position of slice) {
        const subject = messages[position]!.subject;
        expect(sliceOf.get(subject) ?? index, subject).to.equal(index);
        sliceOf.set(subject, index);
      }
    });
  });

  it('gives the verdicts, and checks the signatures, that admitting the batch at once gives', async () => {
    const config = isolatedConfig('subjectslices');
    const infra = await openInfrastructure(config, 'test-subject-slices');
    try {
      const appender = new ChainedAppender(infra);
      for (let i = 0; i < 60; i++) {
        const id = `slice-${i % 7}`;
        await appender.append(appender.workspaceSubject(id), workspaceCreated(id));
      }
      const raws: { seq: number; subject: string; data: Uint8Array }[] = [];
      for await (const raw of infra.store.readRaw(infra.subjects.all, 1)) raws.push(raw);
      // A forged copy of an event in the middle of its subject: refused either way.
      const forgedAt = 30;
      const forged = JSON.parse(new TextDecoder().decode(raws[forgedAt]!.data)) as EventEnvelope;
      raws[forgedAt] = { ...raws[forgedAt]!, data: new TextEncoder().encode(JSON.stringify({ ...forged, data: { name: 'forged' } })) };

      const counting = () => {
        const check = { checks: 0 } as AuthenticityCheck & { checks: number };
        check.check = (event, subject, seq) => {
          check.checks++;
          infra.signing.verifier.check(event, subject, seq);
        };
        check.canVouchFor = (event, seq) => infra.signing.verifier.canVouchFor(event, seq);
        return check;
      };
      const wholeCheck = counting();
      const whole = new EventAdmission({ authenticity: wholeCheck }).tryAdmitBatch(raws);
      const slicedCheck = counting();
      const slicedAdmission = new EventAdmission({ authenticity: slicedCheck });
      const sliced = new Array<ReturnType<EventAdmission['tryAdmit']>>(raws.length);
      for (const slice of subjectSlices(raws, 10)) {
        const results = slicedAdmission.tryAdmitBatch(slice.map((position) => raws[position]!));
        slice.forEach((position, i) => (sliced[position] = results[i]!));
      }
      const verdicts = (results: typeof whole) => results.map((r) => (r.ok ? `ok ${r.stored.seq}` : `${r.corrupt.code} ${r.corrupt.seq}`));
      expect(verdicts(sliced)).to.deep.equal(verdicts(whole));
      expect(verdicts(whole).filter((v) => !v.startsWith('ok'))).to.have.length.greaterThan(0);
      expect(slicedCheck.checks).to.equal(wholeCheck.checks);
    } finally {
      await infra.close();
      await dropIsolated(config);
    }
  });
});
