import { expect } from 'chai';
import { Socket } from 'node:net';
import { AppendConflictError } from '../../src/event-store/errors.ts';
import { EMPTY_POSITION } from '../../src/event-store/event-store.ts';
import { GENESIS_HASH } from '../../src/events/envelope.ts';
import { computeEventHash } from '../../src/events/event-hash.ts';
import { EventSchemaError } from '../../src/events/event-validator.ts';
import { openInfrastructure, type Infrastructure } from '../../src/runtime/infrastructure.ts';
import { workspaceCreated } from '../support/event-factory.ts';
import { dropIsolated, isolatedConfig } from '../support/isolation.ts';

describe('event store: optimistic concurrency per aggregate subject', () => {
  const config = isolatedConfig('append');
  let infra: Infrastructure;

  before(async () => {
    infra = await openInfrastructure(config, 'test-append');
  });
  after(async () => {
    await infra.close();
    await dropIsolated(config);
  });

  const subjectOf = (id: string) => infra.subjects.forAggregate({ workspaceId: id, accountId: null, aggregate: { type: 'workspace', id } });

  it('lets exactly one of 50 concurrent appends with the same expected sequence succeed', async () => {
    const subject = subjectOf('race-one');
    const [first] = await infra.store.append(subject, [workspaceCreated('race-one')], EMPTY_POSITION);
    const position = { lastSequence: first!.seq, lastHash: first!.event.hash };
    const outcomes = await Promise.allSettled(
      Array.from({ length: 50 }, () => infra.store.append(subject, [workspaceCreated('race-one')], position)),
    );
    const succeeded = outcomes.filter((o) => o.status === 'fulfilled');
    const conflicts = outcomes.filter((o) => o.status === 'rejected' && o.reason instanceof AppendConflictError);
    expect(succeeded).to.have.length(1);
    expect(conflicts).to.have.length(49);
    const head = await infra.store.lastOf(subject);
    expect(head!.seq).to.equal((succeeded[0] as PromiseFulfilledResult<{ seq: number }[]>).value[0]!.seq);
  });

  it('sends the appends that requests start in one turn of the event loop to NATS in one socket write', async () => {
    // Each append starts from a callback of its own, as each request's does from its own I/O
    // callback: nats.js alone would write each one at the microtask after its callback.
    const natsPort = Number(new URL(config.natsUrl.replace(/^nats:/, 'http:')).port || 4222);
    const write = Socket.prototype.write;
    let writes = 0;
    Socket.prototype.write = function (this: Socket, ...args: unknown[]) {
      if (this.remotePort === natsPort) writes++;
      return (write as (...a: unknown[]) => boolean).apply(this, args);
    } as typeof write;
    const appends: Promise<unknown>[] = [];
    try {
      await new Promise<void>((resolve) => {
        for (let i = 0; i < 40; i++) setImmediate(() => appends.push(infra.store.append(subjectOf(`turn-${i}`), [workspaceCreated(`turn-${i}`)], EMPTY_POSITION)));
        setImmediate(resolve);
      });
      await Promise.all(appends);
    } finally {
      Socket.prototype.write = write;
    }
    expect(appends).to.have.length(40);
    expect(writes).to.be.within(1, 2);
  });

  it('never conflicts between two aggregates appending concurrently', async () => {
    const subjects = [subjectOf('agg-a'), subjectOf('agg-b')];
    const appendChain = async (subject: string, count: number) => {
      let position = EMPTY_POSITION;
      for (let i = 0; i < count; i++) {
        const [stored] = await infra.store.append(subject, [workspaceCreated('agg')], position);
        position = { lastSequence: stored!.seq, lastHash: stored!.event.hash };
      }
      return position;
    };
    const ends = await Promise.all(subjects.map((s) => appendChain(s, 40)));
    expect(ends.every((p) => p.lastSequence > 0)).to.equal(true);
    for (const subject of subjects) {
      let count = 0;
      for await (const _ of infra.store.readSubject(subject, 0, (await infra.store.lastOf(subject))!.seq)) count++;
      expect(count).to.equal(40);
    }
  });

  it('chains every event of an aggregate to the hash of the one before', async () => {
    const subject = subjectOf('chain');
    let position = EMPTY_POSITION;
    for (let i = 0; i < 5; i++) {
      const [stored] = await infra.store.append(subject, [workspaceCreated('chain', `n${i}`)], position);
      position = { lastSequence: stored!.seq, lastHash: stored!.event.hash };
    }
    let prev = GENESIS_HASH;
    for await (const { event } of infra.store.readSubject(subject, 0, position.lastSequence)) {
      expect(event.prev_hash).to.equal(prev);
      expect(event.hash).to.equal(computeEventHash(event, prev));
      prev = event.hash;
    }
  });

  it('stores a retried publish of the same event id once', async () => {
    const subject = subjectOf('dedupe');
    const event = workspaceCreated('dedupe');
    const [first] = await infra.store.append(subject, [event], EMPTY_POSITION);
    // The retry carries the same Nats-Msg-Id; JetStream answers with the original sequence.
    const [again] = await infra.store.append(subject, [event], EMPTY_POSITION);
    expect(again!.seq).to.equal(first!.seq);
    expect((await infra.store.lastOf(subject))!.seq).to.equal(first!.seq);
  });

  it('refuses an event that does not match its schema, and stores nothing', async () => {
    const subject = subjectOf('invalid');
    const bad = { ...workspaceCreated('invalid'), data: { name: 42 } };
    let caught: unknown;
    try {
      await infra.store.append(subject, [bad as never], EMPTY_POSITION);
    } catch (error) {
      caught = error;
    }
    expect(caught).to.be.instanceOf(EventSchemaError);
    expect(await infra.store.lastOf(subject)).to.equal(null);
  });
});
