import { expect } from 'chai';
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
