import { expect } from 'chai';
import { randomUUID } from 'node:crypto';
import { AppendConflictError } from '../../src/event-store/errors.ts';
import { EMPTY_POSITION, type EventStore, type StoredEvent, type SubjectPosition } from '../../src/event-store/event-store.ts';
import { GENESIS_HASH } from '../../src/events/envelope.ts';
import { computeEventHash } from '../../src/events/event-hash.ts';
import { EventSchemaError } from '../../src/events/event-validator.ts';
import { workspaceCreated } from '../support/event-factory.ts';

/** What the contract needs from an implementation under test. */
export interface EventStoreHarness {
  readonly store: EventStore;
  /** The subject of a workspace aggregate in the store's subject space. */
  subjectOf(workspaceId: string): string;
  /** Stores bytes as they are on a subject, bypassing the store (what a forger could do). */
  publishRaw(subject: string, data: string): Promise<number>;
}

const positionAfter = (stored: StoredEvent): SubjectPosition => ({ lastSequence: stored.seq, lastHash: stored.event.hash });

async function collect<T>(items: AsyncIterable<T>): Promise<T[]> {
  const out: T[] = [];
  for await (const item of items) out.push(item);
  return out;
}

async function refusal(promise: Promise<unknown>): Promise<unknown> {
  try {
    await promise;
  } catch (error) {
    return error;
  }
  return undefined;
}

/**
 * The semantics every EventStore keeps (src/event-store/event-store.ts), run against the
 * JetStream store on a real server and against the in-memory store: the specifications
 * that use the in-memory store are only worth what this contract holds.
 */
export function eventStoreContract(open: () => Promise<EventStoreHarness>, close: () => Promise<void> = async () => undefined): void {
  let harness: EventStoreHarness;
  let store: EventStore;
  const fresh = () => harness.subjectOf(`ws-${randomUUID().slice(0, 8)}`);
  const idOf = (subject: string) => subject.split('.').pop()!;

  before(async () => {
    harness = await open();
    store = harness.store;
  });
  after(close);

  it('appends to an empty subject expecting EMPTY_POSITION, and reads it back as its last event and position', async () => {
    const subject = fresh();
    const [stored] = await store.append(subject, [workspaceCreated(idOf(subject))], EMPTY_POSITION);
    expect(stored!.subject).to.equal(subject);
    expect(stored!.event.prev_hash).to.equal(GENESIS_HASH);
    expect((await store.lastOf(subject))!.seq).to.equal(stored!.seq);
    expect(await store.positionOf(subject)).to.deep.equal(positionAfter(stored!));
    expect(await store.leaderLastSequenceOf(subject), 'the leader’s last sequence of the subject').to.equal(stored!.seq);
    const checked = await store.lastOfChecked(subject);
    expect(checked!.ok && checked!.stored.event.id).to.equal(stored!.event.id);
  });

  it('answers an empty subject with null and EMPTY_POSITION', async () => {
    const subject = fresh();
    expect(await store.lastOf(subject)).to.equal(null);
    expect(await store.lastOfChecked(subject)).to.equal(null);
    expect(await store.positionOf(subject)).to.deep.equal(EMPTY_POSITION);
    expect(await store.leaderLastSequenceOf(subject)).to.equal(0);
  });

  it('refuses an append whose expected subject sequence is stale with AppendConflictError, and stores nothing', async () => {
    const subject = fresh();
    const [first] = await store.append(subject, [workspaceCreated(idOf(subject))], EMPTY_POSITION);
    const error = await refusal(store.append(subject, [workspaceCreated(idOf(subject))], EMPTY_POSITION));
    expect(error).to.be.instanceOf(AppendConflictError);
    expect((error as AppendConflictError).subject).to.equal(subject);
    expect((error as AppendConflictError).expectedSequence).to.equal(0);
    expect((await store.lastOf(subject))!.seq).to.equal(first!.seq);
  });

  it('refuses an expectation ahead of the subject too', async () => {
    const subject = fresh();
    const [first] = await store.append(subject, [workspaceCreated(idOf(subject))], EMPTY_POSITION);
    const error = await refusal(store.append(subject, [workspaceCreated(idOf(subject))], { ...positionAfter(first!), lastSequence: first!.seq + 1000 }));
    expect(error).to.be.instanceOf(AppendConflictError);
  });

  it('lets exactly one of 20 concurrent appends with the same expectation succeed', async () => {
    const subject = fresh();
    const [first] = await store.append(subject, [workspaceCreated(idOf(subject))], EMPTY_POSITION);
    const outcomes = await Promise.allSettled(Array.from({ length: 20 }, () => store.append(subject, [workspaceCreated(idOf(subject))], positionAfter(first!))));
    expect(outcomes.filter((o) => o.status === 'fulfilled')).to.have.length(1);
    expect(outcomes.filter((o) => o.status === 'rejected' && o.reason instanceof AppendConflictError)).to.have.length(19);
  });

  it('keeps expectations per subject: sequences are stream-wide, another subject moving is no conflict', async () => {
    const [a, b] = [fresh(), fresh()];
    const [a1] = await store.append(a, [workspaceCreated(idOf(a))], EMPTY_POSITION);
    const [b1] = await store.append(b, [workspaceCreated(idOf(b))], EMPTY_POSITION);
    expect(b1!.seq).to.be.greaterThan(a1!.seq);
    const [a2] = await store.append(a, [workspaceCreated(idOf(a))], positionAfter(a1!));
    expect(a2!.seq).to.be.greaterThan(b1!.seq);
    expect(await store.lastSequence()).to.be.at.least(a2!.seq);
  });

  it('chains the events of one append: each expects and hashes over its predecessor', async () => {
    const subject = fresh();
    const id = idOf(subject);
    const stored = await store.append(subject, [workspaceCreated(id, 'a'), workspaceCreated(id, 'b'), workspaceCreated(id, 'c')], EMPTY_POSITION);
    expect(stored.map((s) => s.seq)).to.deep.equal([...stored.map((s) => s.seq)].sort((x, y) => x - y));
    let prev = GENESIS_HASH;
    for (const { event } of await collect(store.readSubject(subject, 0, stored[2]!.seq))) {
      expect(event.prev_hash).to.equal(prev);
      expect(event.hash).to.equal(computeEventHash(event, prev));
      prev = event.hash;
    }
    expect(prev).to.equal(stored[2]!.event.hash);
  });

  it('reads a subject in (after, upto], in order, and nothing of other subjects', async () => {
    const [subject, other] = [fresh(), fresh()];
    const id = idOf(subject);
    let position = EMPTY_POSITION;
    const seqs: number[] = [];
    for (const name of ['a', 'b', 'c', 'd']) {
      const [stored] = await store.append(subject, [workspaceCreated(id, name)], position);
      position = positionAfter(stored!);
      seqs.push(stored!.seq);
      await store.append(other, [workspaceCreated(idOf(other))], await store.positionOf(other));
    }
    const middle = await collect(store.readSubject(subject, seqs[0]!, seqs[2]!));
    expect(middle.map((s) => (s.event.data as { name: string }).name)).to.deep.equal(['b', 'c']);
    const checked = await collect(store.readSubjectChecked(subject, 0, seqs[3]!));
    expect(checked.map((r) => r.ok && r.stored.seq)).to.deep.equal(seqs);
    expect(await collect(store.readSubject(subject, seqs[3]!, seqs[3]!))).to.deep.equal([]);
  });

  it('stores a retried event id once and answers with the first copy’s sequence, whatever the retry expected', async () => {
    const subject = fresh();
    const event = workspaceCreated(idOf(subject));
    const [first] = await store.append(subject, [event], EMPTY_POSITION);
    const head = await store.lastSequence();
    const [again] = await store.append(subject, [event], EMPTY_POSITION);
    expect(again!.seq).to.equal(first!.seq);
    expect((await store.lastOf(subject))!.seq).to.equal(first!.seq);
    expect(await store.lastSequence()).to.equal(head);
  });

  it('refuses an event that does not match its schema, and stores nothing', async () => {
    const subject = fresh();
    const bad = { ...workspaceCreated(idOf(subject)), data: { name: 42 } };
    expect(await refusal(store.append(subject, [bad as never], EMPTY_POSITION))).to.be.instanceOf(EventSchemaError);
    expect(await store.lastOf(subject)).to.equal(null);
  });

  it('surfaces a corrupt message through the checked reads as a value, and counts it for the position', async () => {
    const subject = fresh();
    const [good] = await store.append(subject, [workspaceCreated(idOf(subject))], EMPTY_POSITION);
    const corruptSeq = await harness.publishRaw(subject, '{not json');
    const last = await store.lastOfChecked(subject);
    expect(last!.ok).to.equal(false);
    expect(!last!.ok && last!.corrupt.seq).to.equal(corruptSeq);
    const results = await collect(store.readSubjectChecked(subject, 0, corruptSeq));
    expect(results.map((r) => r.ok)).to.deep.equal([true, false]);
    // The next append must expect the corrupt message's sequence, not the last good one.
    expect(await refusal(store.append(subject, [workspaceCreated(idOf(subject))], positionAfter(good!)))).to.be.instanceOf(AppendConflictError);
    const [next] = await store.append(subject, [workspaceCreated(idOf(subject))], { lastSequence: corruptSeq, lastHash: good!.event.hash });
    expect(next!.seq).to.be.greaterThan(corruptSeq);
  });
}
