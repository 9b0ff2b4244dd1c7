import { expect } from 'chai';
import { jetstream, jetstreamManager } from '@nats-io/jetstream';
import type { NatsConnection } from '@nats-io/nats-core';
import { connect } from '@nats-io/transport-node';
import { SubjectChangeFeed } from '../../src/event-store/subject-changes.ts';
import { eventually } from '../support/eventually.ts';
import { PrivateNats } from '../support/private-nats.ts';

/**
 * What lets an agent worker skip reading a run's key and account before each tool call: a
 * tracker says "changed" after anything is stored on its subjects, and also after the
 * connection dropped (anything could have been missed then); otherwise "unchanged".
 */
describe('SubjectChangeFeed: changes of stored subjects heard on the wire', function () {
  this.timeout(60_000);
  let nats: PrivateNats;
  let nc: NatsConnection;
  let feed: SubjectChangeFeed;

  before(async () => {
    nats = await PrivateNats.start();
    nc = await connect({ servers: nats.url, maxReconnectAttempts: -1, reconnectTimeWait: 100 });
    await (await jetstreamManager(nc)).streams.add({ name: 'CHANGES', subjects: ['chg.>'] });
    feed = await SubjectChangeFeed.start(nc, ['chg.*.key.*', 'chg.*.account.*']);
  });
  after(async () => {
    feed?.stop();
    await nc?.close().catch(() => undefined);
    await nats?.kill();
  });

  const store = (subject: string) => jetstream(nc).publish(subject, '{}');

  it('says changed on the first look, then only after an event is stored on a tracked subject', async () => {
    const tracker = feed.track(['chg.w1.key.k1', 'chg.w1.account.a1']);
    try {
      expect(tracker.changedSinceLastLook(), 'first look').to.equal(true);
      expect(tracker.changedSinceLastLook(), 'nothing stored since').to.equal(false);
      await store('chg.w1.account.a2');
      await store('chg.w2.key.k1');
      await nc.flush();
      expect(tracker.changedSinceLastLook(), 'other subjects only').to.equal(false);
      await store('chg.w1.key.k1');
      await eventually(() => expect(tracker.changedSinceLastLook()).to.equal(true), 5000, 20);
      expect(tracker.changedSinceLastLook(), 'once per change').to.equal(false);
      await store('chg.w1.account.a1');
      await eventually(() => expect(tracker.changedSinceLastLook()).to.equal(true), 5000, 20);
    } finally {
      tracker.release();
    }
  });

  it('does not count what the caller says it stored itself, and still counts what others store', async () => {
    const tracker = feed.track(['chg.w5.key.k5', 'chg.w5.account.a5']);
    try {
      tracker.changedSinceLastLook();
      await store('chg.w5.account.a5');
      await nc.flush();
      tracker.storedItself('chg.w5.account.a5', 1);
      expect(tracker.changedSinceLastLook(), 'only its own event stored').to.equal(false);
      await store('chg.w5.account.a5');
      await eventually(() => expect(tracker.changedSinceLastLook(), 'an event it did not store').to.equal(true), 5000, 20);
      expect(tracker.changedSinceLastLook()).to.equal(false);
      await store('chg.w5.key.k5');
      await nc.flush();
      tracker.storedItself('chg.w5.account.a5', 1); // not the subject it stored on: still a change
      await eventually(() => expect(tracker.changedSinceLastLook()).to.equal(true), 5000, 20);
    } finally {
      tracker.release();
    }
  });

  it('says changed after the connection dropped, when a change could have gone unheard', async () => {
    const tracker = feed.track(['chg.w3.key.k3']);
    try {
      expect(tracker.changedSinceLastLook()).to.equal(true);
      expect(tracker.changedSinceLastLook()).to.equal(false);
      await nats.kill();
      await nats.restart();
      await eventually(async () => expect((await jetstreamManager(nc)).streams.info('CHANGES')).to.be.ok, 20_000, 200);
      expect(tracker.changedSinceLastLook(), 'after a reconnect').to.equal(true);
      expect(tracker.changedSinceLastLook()).to.equal(false);
    } finally {
      tracker.release();
    }
  });

  it('says changed for ever once released or stopped (a stale tracker must not skip a read)', async () => {
    const tracker = feed.track(['chg.w4.key.k4']);
    tracker.changedSinceLastLook();
    tracker.release();
    expect(tracker.changedSinceLastLook()).to.equal(true);
    expect(tracker.changedSinceLastLook()).to.equal(true);
  });
});
