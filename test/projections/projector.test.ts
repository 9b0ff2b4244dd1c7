import { expect } from 'chai';
import { sql } from 'kysely';
import { rebuildProjection } from '../../projections/runtime/rebuild.ts';
import { readCheckpoint } from '../../projections/runtime/checkpoints.ts';
import { projectorConsumerName, type Projector } from '../../projections/runtime/projector.ts';
import { openInfrastructure, type Infrastructure } from '../../src/runtime/infrastructure.ts';
import { workspaceCreated } from '../support/event-factory.ts';
import { dropIsolated, isolatedConfig } from '../support/isolation.ts';
import { ChainedAppender } from '../support/chained-appender.ts';
import { ledgerProjection, ledgerProjector, ledgerRows, type TestProjectorOptions } from '../support/ledger-projection.ts';
import { eventually } from '../support/eventually.ts';

async function expectRejection(promise: Promise<unknown>, message: RegExp): Promise<void> {
  const outcome = await promise.then(
    () => null,
    (error: unknown) => error,
  );
  expect(outcome, 'the promise was fulfilled').to.be.instanceOf(Error);
  expect((outcome as Error).message).to.match(message);
}


describe('projection runtime', () => {
  const config = isolatedConfig('projector');
  let infra: Infrastructure;

  before(async () => {
    infra = await openInfrastructure(config, 'test-projector');
  });
  after(async () => {
    await infra.close();
    await dropIsolated(config);
  });

  const newProjector = (source: Infrastructure, afterCommit?: (seq: number) => Promise<void> | void) =>
    ledgerProjector(source, { batchSize: 25, afterCommit });

  /** Appends `count` events spread over `aggregates` subjects; returns their ids. */
  const appendEvents = async (count: number, aggregates = 10): Promise<string[]> => {
    const appender = new ChainedAppender(infra);
    const ids: string[] = [];
    for (let i = 0; i < count; i++) {
      const id = `agg-${i % aggregates}`;
      ids.push((await appender.append(appender.workspaceSubject(id), workspaceCreated(id))).event.id);
    }
    return ids;
  };

  /** Waits until the ledger projection's checkpoint is at `seq`. */
  const caughtUpTo = (seq: number, timeoutMs?: number) =>
    eventually(async () => expect((await readCheckpoint(infra.database.db, 'ledger'))!.lastSeq).to.equal(seq), timeoutMs);

  /** The ledger holds one row for every sequence 1..head, each applied exactly once. */
  const expectEachEventAppliedOnce = async (head: number) => {
    const rows = await ledgerRows(infra.database.db);
    expect(rows.map((r) => r.seq)).to.deep.equal(Array.from({ length: head }, (_, i) => i + 1));
    expect(rows.filter((r) => r.applied !== 1)).to.deep.equal([]);
  };

  /** Runs `work` with a ledger projector started, and stops it after, whatever happens. */
  const withLedgerProjector = async (options: TestProjectorOptions, work: (projector: Projector) => Promise<void>) => {
    const projector = ledgerProjector(infra, options);
    await projector.start();
    try {
      await work(projector);
    } finally {
      await projector.stop();
    }
  };

  it('applies every event exactly once when stopped between its commit and its ack', async () => {
    await appendEvents(100);
    const crashed = await openInfrastructure(config, 'test-projector-crashing');
    let freeze: (() => void) | undefined;
    const frozen = new Promise<void>((resolve) => (freeze = resolve));
    let commits = 0;
    const victim = newProjector(crashed, async () => {
      commits++;
      if (commits === 2) {
        freeze!();
        await new Promise(() => undefined); // never acks: the process "dies" here
      }
    });
    await victim.start();
    await frozen;
    // The crash: the connection goes away with two committed-but-unacked batches' worth pending.
    await crashed.nc.close();
    const checkpointAtCrash = (await readCheckpoint(infra.database.db, 'ledger'))!.lastSeq;
    expect(checkpointAtCrash).to.be.greaterThan(0);

    const survivor = newProjector(infra);
    await survivor.start();
    const head = await infra.store.lastSequence();
    await caughtUpTo(head);
    await survivor.stop();
    await crashed.database.close();

    const rows = await ledgerRows(infra.database.db);
    expect(rows).to.have.length(head);
    expect(rows.filter((r) => r.applied !== 1)).to.deep.equal([]);
    expect(rows.map((r) => r.seq)).to.deep.equal(Array.from({ length: head }, (_, i) => i + 1));
  });

  it('rebuilds from sequence 1 into rows identical to the live projection, and swaps them in', async () => {
    await appendEvents(60);
    const live = newProjector(infra);
    await live.start();
    const head = await infra.store.lastSequence();
    await caughtUpTo(head);
    const before = await ledgerRows(infra.database.db);

    const progress: number[] = [];
    const result = await rebuildProjection({
      db: infra.database.db,
      store: infra.store,
      schema: config.databaseSchema,
      filterSubject: infra.subjects.all,
      projection: ledgerProjection,
      batchSize: 40,
      onProgress: (applied) => progress.push(applied),
    });
    expect(result.lastSeq).to.equal(head);
    expect(progress.length).to.be.greaterThan(1);
    expect(await ledgerRows(infra.database.db)).to.deep.equal(before);

    // The live projector keeps going on the swapped-in tables.
    await appendEvents(5);
    const newHead = await infra.store.lastSequence();
    await caughtUpTo(newHead);
    await live.stop();
    const rows = await ledgerRows(infra.database.db);
    expect(rows).to.have.length(newHead);
    expect(rows.every((r) => r.applied === 1)).to.equal(true);
  });

  it('given a batch whose transaction fails in the middle of a rebuild, then the rebuild fails with that error and the live tables and checkpoint stay as they were', async () => {
    await appendEvents(40);
    const live = newProjector(infra);
    await live.start();
    const head = await infra.store.lastSequence();
    await caughtUpTo(head);
    await live.stop();
    const before = await ledgerRows(infra.database.db);
    const failAfter = Math.floor(head / 2);
    const failing = {
      ...ledgerProjection,
      apply: async (trx: Parameters<typeof ledgerProjection.apply>[0], events: Parameters<typeof ledgerProjection.apply>[1], context?: Parameters<typeof ledgerProjection.apply>[2]) => {
        if (events.some((stored) => stored.seq > failAfter)) throw new Error('disk full (test)');
        return ledgerProjection.apply(trx, events, context);
      },
    };
    const progress: number[] = [];

    const rebuilding = rebuildProjection({
      db: infra.database.db,
      store: infra.store,
      schema: config.databaseSchema,
      filterSubject: infra.subjects.all,
      projection: failing,
      batchSize: 5,
      onProgress: (seq) => progress.push(seq),
    });

    await expectRejection(rebuilding, /disk full \(test\)/);
    // Batches after the failing one were read ahead, but none of them committed.
    expect(Math.max(...progress)).to.be.at.most(failAfter);
    expect(await ledgerRows(infra.database.db)).to.deep.equal(before);
    expect((await readCheckpoint(infra.database.db, 'ledger'))!.lastSeq).to.equal(head);
  });

  /**
   * Changes the running projector's consumer filter on the server (what a stolen service password
   * can do), appends 30 events, and checks that nothing past the first missing sequence is applied
   * until the projector has seen no progress for its delivery stall time; then that it makes the
   * consumer again by itself, without a restart, and applies every event exactly once.
   */
  const expectRepairedWithoutRestart = async (filter: string) => {
    // Two looks a stall time apart: nothing is remade sooner than 4 s after the last commit.
    await withLedgerProjector({ batchSize: 25, deliveryStallMs: 2000 }, async (projector) => {
      await appendEvents(20);
      const before = await infra.store.lastSequence();
      await caughtUpTo(before);
      const name = projectorConsumerName([ledgerProjection]);
      await infra.jsm.consumers.update(config.eventStream, name, { filter_subject: filter });
      await appendEvents(30);
      const head = await infra.store.lastSequence();
      // The events the filter lets through arrive, but the ones before them never do: the batches stop at the gap.
      await new Promise((resolve) => setTimeout(resolve, 700));
      expect((await readCheckpoint(infra.database.db, 'ledger'))!.lastSeq).to.equal(before);
      expect((await ledgerRows(infra.database.db)).map((r) => r.seq)).to.deep.equal(Array.from({ length: before }, (_, i) => i + 1));
      expect(projector.deliveryStalls).to.equal(0);
      await caughtUpTo(head, 15_000);
      expect(projector.deliveryStalls).to.equal(1);
      await expectEachEventAppliedOnce(head);
      expect((await infra.jsm.consumers.info(config.eventStream, name)).config.filter_subject).to.equal(infra.subjects.all);
    });
  };

  it('given its consumer\'s filter narrowed on the server while it runs (a stolen service password), then it applies nothing past the first missing sequence, and once nothing moved for its delivery stall time it makes the consumer again and applies every event exactly once, without a restart', async () => {
    await expectRepairedWithoutRestart(new ChainedAppender(infra).workspaceSubject('agg-3'));
  });

  it('given its consumer filtered to nothing while it runs, then it makes the consumer again by itself and applies every event exactly once', async () => {
    await expectRepairedWithoutRestart(`${infra.subjects.prefix}.nothing.>`);
  });

  it('given it catches up for longer than its delivery stall time, then its moving checkpoint keeps it from making the consumer again', async () => {
    await appendEvents(200);
    const head = await infra.store.lastSequence();
    await sql`delete from projection_checkpoints where projection = 'ledger'`.execute(infra.database.db);
    // 10 events a batch and 60 ms after each: about 1.2 s for 200 events, four times the stall time.
    await withLedgerProjector({ batchSize: 10, deliveryStallMs: 300, afterCommit: () => new Promise((resolve) => setTimeout(resolve, 60)) }, async (projector) => {
      await caughtUpTo(head, 20_000);
      expect(projector.deliveryStalls).to.equal(0);
      expect(projector.subscriptionRestarts).to.equal(0);
      await expectEachEventAppliedOnce(head);
    });
  });

  it('given events appended now and then, each after more than its stall time of quiet, then it never makes its consumer again', async () => {
    // Each event waits 250 ms for others before it is applied: the watchdog looks (every 100 ms)
    // while it is delivered and not yet applied, after more than the stall time without progress.
    await withLedgerProjector({ batchSize: 25, deliveryStallMs: 300, lingerMs: 250 }, async (projector) => {
      for (let i = 0; i < 6; i++) {
        await new Promise((resolve) => setTimeout(resolve, 400));
        await appendEvents(1);
      }
      const head = await infra.store.lastSequence();
      await caughtUpTo(head);
      expect(projector.deliveryStalls).to.equal(0);
      await expectEachEventAppliedOnce(head);
    });
  });

  it('given it is caught up and nothing is appended, then it never makes its consumer again', async () => {
    await withLedgerProjector({ batchSize: 25, deliveryStallMs: 200 }, async (projector) => {
      await appendEvents(5);
      await caughtUpTo(await infra.store.lastSequence());
      await new Promise((resolve) => setTimeout(resolve, 1500));
      expect(projector.deliveryStalls).to.equal(0);
      expect(projector.subscriptionRestarts).to.equal(0);
    });
  });

  it('given its consumer\'s filter narrowed while it was stopped, then its start makes the consumer again and applies every event exactly once', async () => {
    const projector = newProjector(infra);
    await projector.start();
    await appendEvents(10);
    const before = await infra.store.lastSequence();
    await caughtUpTo(before);
    await projector.stop();
    const name = projectorConsumerName([ledgerProjection]);
    await infra.jsm.consumers.update(config.eventStream, name, { filter_subject: new ChainedAppender(infra).workspaceSubject('agg-5') });
    await appendEvents(20);
    const head = await infra.store.lastSequence();

    const restarted = newProjector(infra);
    await restarted.start();
    // Kept as it was (nothing pending, floor at the checkpoint), it would deliver agg-5's events only and the batches would wait at the gap forever.
    await caughtUpTo(head);
    await restarted.stop();
    await expectEachEventAppliedOnce(head);
  });

  it('given its consumer made to deliver headers only, while stopped or while running, then it parks nothing, makes the consumer again and applies every event exactly once', async () => {
    const name = projectorConsumerName([ledgerProjection]);
    const projector = newProjector(infra);
    await projector.start();
    await appendEvents(10);
    const first = await infra.store.lastSequence();
    await caughtUpTo(first);
    await projector.stop();

    // While stopped: its start must not keep such a consumer.
    await infra.jsm.consumers.update(config.eventStream, name, { headers_only: true });
    await appendEvents(10);
    const restarted = newProjector(infra);
    await restarted.start();
    const second = await infra.store.lastSequence();
    await caughtUpTo(second);

    // While running: the empty bodies it is given must not be taken for inadmissible events.
    await infra.jsm.consumers.update(config.eventStream, name, { headers_only: true });
    await appendEvents(10);
    const head = await infra.store.lastSequence();
    await caughtUpTo(head);
    await restarted.stop();

    await expectEachEventAppliedOnce(head);
    expect(restarted.statuses().map((status) => status.parked)).to.deep.equal([0]);
    expect((await infra.jsm.consumers.info(config.eventStream, name)).config.headers_only ?? false).to.equal(false);
  });

  it('waits out a Postgres failure without losing or doubling an event', async () => {
    const projector = newProjector(infra);
    await projector.start();
    // Simulate an outage of the projection's table: every batch fails until it is back.
    await sql`alter table ledger rename to ledger_offline`.execute(infra.database.db);
    await appendEvents(30);
    await eventually(async () => expect(projector.currentStatus().stalled).to.equal(true));
    await sql`alter table ledger_offline rename to ledger`.execute(infra.database.db);
    const head = await infra.store.lastSequence();
    await caughtUpTo(head, 15_000);
    expect(projector.currentStatus().stalled).to.equal(false);
    await projector.stop();
    const rows = await ledgerRows(infra.database.db);
    expect(rows).to.have.length(head);
    expect(rows.every((r) => r.applied === 1)).to.equal(true);
  });
  it('subscribes again when its durable consumer is deleted under it, and applies every later event exactly once', async () => {
    const projector = newProjector(infra);
    await projector.start();
    try {
      const before = await appendEvents(10);
      await eventually(async () => expect((await ledgerRows(infra.database.db)).filter((r) => before.includes(r.event_id))).to.have.length(10), 10_000);

      // What an operator (or the analytics user, were it allowed) could do: the subscription ends unasked.
      await infra.jsm.consumers.delete(config.eventStream, projector.consumerName);
      const after = await appendEvents(10);

      await eventually(async () => {
        const rows = await ledgerRows(infra.database.db);
        expect(rows.filter((r) => after.includes(r.event_id))).to.have.length(10);
      }, 20_000);
      expect(projector.subscriptionRestarts).to.be.at.least(1);
      const rows = (await ledgerRows(infra.database.db)).filter((r) => before.includes(r.event_id) || after.includes(r.event_id));
      expect(rows.map((r) => r.applied)).to.deep.equal(new Array(20).fill(1));
      expect(projector.currentStatus().stalled).to.equal(false);
    } finally {
      await projector.stop();
    }
  });
});
