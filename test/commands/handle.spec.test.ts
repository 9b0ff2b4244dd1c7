import { expect } from 'chai';
import { Commands } from '../../commands/command-bus.ts';
import { loadQuota, loadWorkspace, loadWorkspaceFromLeader } from '../../commands/queries.ts';
import { quotaDecider } from '../../commands/quota/auto-apply-quota.ts';
import { Aggregates } from '../../commands/shared/aggregates.ts';
import { CommandContentionError } from '../../commands/shared/handle.ts';
import { EventStoreUnavailableError } from '../../src/event-store/errors.ts';
import { WorkspaceNotFoundError } from '../../commands/errors.ts';
import { workspaceDecider } from '../../commands/workspace/workspace-decider.ts';
import { InMemoryEventStore } from '../../src/event-store/in-memory-event-store.ts';
import { streams, Subjects } from '../../src/event-store/subjects.ts';
import type { StoredEvent, SubjectPosition } from '../../src/event-store/event-store.ts';
import type { EventEnvelope, UnsealedEvent } from '../../src/events/envelope.ts';
import { newEvent } from '../../commands/shared/new-event.ts';
import { transcriptDecider } from '../../commands/run/transcript.ts';
import { accountDecider } from '../../commands/account/account-decider.ts';
import { RunInProgressError } from '../../commands/errors.ts';

/** Counts the reads that ask the store for a subject's newest event (what a load costs). */
class CountingStore extends InMemoryEventStore {
  lastReads = 0;
  override async lastOfChecked(subject: string) {
    this.lastReads++;
    return super.lastOfChecked(subject);
  }
}

/** `handle` (commands/shared/handle.ts) on the in-memory store: load, decide, append with the expected sequence, retry on conflict. */
const meta = { actor: { kind: 'operator' as const, id: 'op' }, correlationId: 'c' };

describe('handle: commands on the in-memory event store (specs)', () => {
  let store: InMemoryEventStore;
  let commands: Commands;
  const subjects = new Subjects('spec');

  beforeEach(() => {
    store = new InMemoryEventStore();
    commands = new Commands(new Aggregates(store, subjects, null));
  });

  const createWorkspace = () => commands.handle(workspaceDecider, { type: 'CreateWorkspace', workspaceId: 'ws', name: 'w', meta });
  const engage = (options?: { maxAttempts: number }) =>
    commands.handle(workspaceDecider, { type: 'SetKillSwitch', workspaceId: 'ws', engaged: true, reason: 'r', meta }, options);

  it('appends what the decider decides on the command’s subject, and the query reads it back', async () => {
    const created = await createWorkspace();
    expect(created.appended.map((s) => s.subject)).to.deep.equal([subjects.forAggregate(streams.workspace('ws'))]);
    expect(created.state.exists).to.equal(true);
    await engage();
    const fresh = new Aggregates(store, subjects, null);
    expect((await loadWorkspace(fresh, 'ws')).state.killSwitch.engaged).to.equal(true);
  });

  it('appends nothing when the decision is nothing', async () => {
    await createWorkspace();
    await engage();
    const before = await store.lastSequence();
    const again = await engage();
    expect(again.appended).to.deep.equal([]);
    expect(await store.lastSequence()).to.equal(before);
  });

  it('passes a refusal through without retrying or appending', async () => {
    let thrown: unknown;
    await engage().catch((error: unknown) => (thrown = error));
    expect(thrown).to.be.instanceOf(WorkspaceNotFoundError);
    expect(await store.lastSequence()).to.equal(0);
  });

  it('decides again after losing a race: 15 concurrent reservations of the day get slots 1..15, each once', async () => {
    const reserve = (actionId: string) =>
      commands.handle(quotaDecider, { type: 'ReserveAutoApplySlot', workspaceId: 'ws', accountId: 'acc', day: '2026-11-21', actionId, cap: 20, touch: { kind: 'none' }, meta });
    await Promise.all(Array.from({ length: 15 }, (_, i) => reserve(`a${i}`)));
    const { state } = await loadQuota(new Aggregates(store, subjects, null), 'ws', 'acc', '2026-11-21');
    expect([...state.actionIds].sort()).to.deep.equal(Array.from({ length: 15 }, (_, i) => `a${i}`).sort());
    expect(await store.lastSequence()).to.equal(15);
  });

  it('gives up with CommandContentionError when every attempt loses the race', async () => {
    /** A rival writer that appends to the subject just before each of our appends. */
    class RivalFirst extends InMemoryEventStore {
      rivals = 0;
      override async append<E extends EventEnvelope>(subject: string, events: readonly UnsealedEvent[], expected: SubjectPosition): Promise<StoredEvent<E>[]> {
        this.rivals++;
        const rival = newEvent('AutoApplySlotReserved', { action_id: `rival-${this.rivals}`, day: '2026-11-21', slot: this.rivals }, streams.quota('ws', 'acc', '2026-11-21'), meta);
        await super.append(subject, [rival], await this.positionOf(subject));
        return super.append<E>(subject, events, expected);
      }
    }
    const contended = new RivalFirst();
    const losing = new Commands(new Aggregates(contended, subjects, null));
    let thrown: unknown;
    const reserve = { type: 'ReserveAutoApplySlot', workspaceId: 'ws', accountId: 'acc', day: '2026-11-21', actionId: 'mine', cap: 20, touch: { kind: 'none' }, meta } as const;
    await losing.handle(quotaDecider, reserve, { maxAttempts: 3 }).catch((error: unknown) => (thrown = error));
    expect(thrown).to.be.instanceOf(CommandContentionError);
    expect(thrown).to.include({ attempts: 3, subject: subjects.forAggregate(streams.quota('ws', 'acc', '2026-11-21')) });
    expect(contended.rivals).to.equal(3);
  });

  /** A store whose stream is unreachable for its first `outages` appends (a cluster electing a leader). */
  class FlakyStore extends InMemoryEventStore {
    failures = 0;
    outages: number;
    constructor(outages: number) {
      super();
      this.outages = outages;
    }
    override async append<E extends EventEnvelope>(subject: string, events: readonly UnsealedEvent[], expected: SubjectPosition): Promise<StoredEvent<E>[]> {
      if (this.failures < this.outages) {
        this.failures++;
        throw new EventStoreUnavailableError(`append to ${subject} failed: no responders`);
      }
      return super.append<E>(subject, events, expected);
    }
  }

  it('given an event log that is unreachable for a moment, when a background command rides it out, then it is appended once', async () => {
    const flaky = new FlakyStore(3);
    const background = new Commands(new Aggregates(flaky, subjects, null), { outageRideThroughMs: 5000 });
    const created = await background.handle(workspaceDecider, { type: 'CreateWorkspace', workspaceId: 'ws', name: 'w', meta });
    expect(created.appended).to.have.length(1);
    expect(flaky.failures).to.equal(3);
    expect(await flaky.lastSequence()).to.equal(1);
  });

  it('given an unreachable event log, when an API command (no ride-through) is handled, then it fails at once with the outage', async () => {
    const flaky = new FlakyStore(1);
    const api = new Commands(new Aggregates(flaky, subjects, null));
    let thrown: unknown;
    await api.handle(workspaceDecider, { type: 'CreateWorkspace', workspaceId: 'ws', name: 'w', meta }).catch((error: unknown) => (thrown = error));
    expect(thrown).to.be.instanceOf(EventStoreUnavailableError);
    expect(await flaky.lastSequence()).to.equal(0);
  });

  it('given an outage longer than the ride-through, then the command fails with the outage instead of waiting for ever', async () => {
    const flaky = new FlakyStore(Number.POSITIVE_INFINITY);
    const background = new Commands(new Aggregates(flaky, subjects, null), { outageRideThroughMs: 300 });
    const started = Date.now();
    let thrown: unknown;
    await background.handle(workspaceDecider, { type: 'CreateWorkspace', workspaceId: 'ws', name: 'w', meta }).catch((error: unknown) => (thrown = error));
    expect(thrown).to.be.instanceOf(EventStoreUnavailableError);
    expect(Date.now() - started).to.be.within(300, 3000);
  });

  it('given an event log that cannot be read for a moment, when background work queries an aggregate, then it waits and reads it; an API view fails at once', async () => {
    /** Reads of the last event fail twice, as during a leader election. */
    class FlakyReads extends InMemoryEventStore {
      failures = 0;
      override async lastOfChecked(subject: string) {
        if (this.failures < 2) {
          this.failures++;
          throw new EventStoreUnavailableError(`reading the last event of ${subject} failed: no responders`);
        }
        return super.lastOfChecked(subject);
      }
    }
    const flaky = new FlakyReads();
    const background = new Aggregates(flaky, subjects, null, { outageRideThroughMs: 5000 });
    await new Commands(background).handle(workspaceDecider, { type: 'CreateWorkspace', workspaceId: 'ws', name: 'w', meta });
    expect(flaky.failures).to.equal(2);
    flaky.failures = 0;
    let thrown: unknown;
    await loadWorkspace(background.withOptions({ outageRideThroughMs: 0 }), 'ws').catch((error: unknown) => (thrown = error));
    expect(thrown).to.be.instanceOf(EventStoreUnavailableError);
    expect((await loadWorkspace(background, 'ws')).state.exists).to.equal(true);
  });

  it('a corrupt message on the subject changes no decision, and the next append expects its sequence', async () => {
    await createWorkspace();
    const subject = subjects.forAggregate(streams.workspace('ws'));
    const corrupt = store.appendRaw(subject, '{"type":"KillSwitchEngaged", not json');
    const engaged = await engage();
    expect(engaged.appended).to.have.length(1);
    expect(engaged.appended[0]!.seq).to.equal(corrupt + 1);
    expect(engaged.state.killSwitch.engaged).to.equal(true);
  });

  it('de-duplicates a retried event id within the window, and stores it again after', async () => {
    let now = 0;
    const windowed = new InMemoryEventStore({ duplicateWindowMs: 1000, clock: () => now });
    const other = new Commands(new Aggregates(windowed, subjects, null));
    const created = await other.handle(workspaceDecider, { type: 'CreateWorkspace', workspaceId: 'ws', name: 'w', meta });
    const event = created.appended[0]!.event;
    const { hash: _hash, prev_hash: _prev, ...unsealed } = event as typeof event & { key_id?: string };
    const subject = subjects.forAggregate(streams.workspace('ws'));
    const [again] = await windowed.append(subject, [unsealed], { lastSequence: 1, lastHash: event.hash });
    expect(again!.seq).to.equal(1);
    now = 1001;
    const [later] = await windowed.append(subject, [unsealed], { lastSequence: 1, lastHash: event.hash });
    expect(later!.seq).to.equal(2);
  });
  describe('preferRemembered (a writer that is usually its subject\'s only one)', () => {
    const runSubject = subjects.forAggregate(streams.run('ws', 'acc', 'run-1'));
    const call = (index: number) => ({ run_id: 'run-1', index, name: 'list_campaigns', input: {}, ok: true, output: {}, duration_ms: 1 });
    const record = (writer: Commands, index: number) =>
      writer.handle(transcriptDecider, { type: 'RecordToolCall', workspaceId: 'ws', accountId: 'acc', call: call(index), meta }, { preferRemembered: true });

    it('appends on the state it remembers, without asking the store for the subject\'s newest event', async () => {
      const counting = new CountingStore();
      const writer = new Commands(new Aggregates(counting, subjects, null));
      await record(writer, 1);
      const readsAfterFirst = counting.lastReads;
      for (let index = 2; index <= 5; index++) await record(writer, index);
      expect(counting.lastReads).to.equal(readsAfterFirst);
      const { state } = await new Aggregates(counting, subjects, null).load(transcriptDecider, streams.run('ws', 'acc', 'run-1'));
      expect(state.toolCalls).to.equal(5);
      expect((await counting.lastSequence())).to.equal(5);
    });

    it('decides again on a fresh load when another writer moved the subject meanwhile', async () => {
      const mine = new Commands(new Aggregates(store, subjects, null));
      const other = new Commands(new Aggregates(store, subjects, null));
      await record(mine, 1);
      await record(other, 2);
      const third = await record(mine, 3);
      expect(third.appended).to.have.length(1);
      expect(third.appended[0]!.seq).to.equal(3);
      expect(third.state.toolCalls).to.equal(3);
    });

    it('with presumeNew, records the first call on a subject it remembers nothing of without a read either', async () => {
      const counting = new CountingStore();
      const writer = new Commands(new Aggregates(counting, subjects, null));
      const first = await writer.handle(transcriptDecider, { type: 'RecordToolCall', workspaceId: 'ws', accountId: 'acc', call: call(1), meta }, { preferRemembered: true, presumeNew: true });
      expect(counting.lastReads).to.equal(0);
      expect(first.appended.map((s) => s.seq)).to.deep.equal([1]);
      expect(first.state.toolCalls).to.equal(1);
    });

    it('with presumeNew on a subject that is not new, decides on a fresh load: the call is appended after the others, or not again', async () => {
      const other = new Commands(new Aggregates(store, subjects, null));
      await record(other, 1);
      await record(other, 2);
      const presumeNew = { preferRemembered: true, presumeNew: true };
      const retried = await new Commands(new Aggregates(store, subjects, null)).handle(
        transcriptDecider,
        { type: 'RecordToolCall', workspaceId: 'ws', accountId: 'acc', call: call(2), meta },
        presumeNew,
      );
      expect(retried.appended).to.deep.equal([]);
      const third = await new Commands(new Aggregates(store, subjects, null)).handle(
        transcriptDecider,
        { type: 'RecordToolCall', workspaceId: 'ws', accountId: 'acc', call: call(3), meta },
        presumeNew,
      );
      expect(third.appended.map((s) => s.seq)).to.deep.equal([3]);
      expect(third.state.toolCalls).to.equal(3);
      // A load believes only events that continue the subject's hash chain: the third one does.
      const { state } = await new Aggregates(store, subjects, null).load(transcriptDecider, streams.run('ws', 'acc', 'run-1'));
      expect(state.toolCalls).to.equal(3);
    });

    it('takes neither a "nothing to do" nor a refusal from a remembered state: a retried call recorded elsewhere is not written twice', async () => {
      const mine = new Commands(new Aggregates(store, subjects, null));
      const other = new Commands(new Aggregates(store, subjects, null));
      await record(mine, 1);
      await record(other, 2);
      // Remembered: 1 call, so index 2 looks new; the fresh state says it is recorded already.
      const retried = await record(mine, 2);
      expect(retried.appended).to.deep.equal([]);
      expect(retried.state.toolCalls).to.equal(2);
      expect(await store.lastSequence()).to.equal(2);
      expect((await store.lastOf(runSubject))!.event.data).to.include({ index: 2 });
    });
  });
});

describe('handle: StartRun is decided on the state this process remembers first (accountDecider.decideOnRemembered), specs', () => {
  const subjects = new Subjects('spec');
  const accountSubject = subjects.forAggregate(streams.account('ws', 'acc'));
  const apiMeta = { actor: { kind: 'api_key' as const, id: 'key-1' }, correlationId: 'c' };
  const startRun = (http: Commands, runId: string) =>
    http.handle(
      accountDecider,
      { type: 'StartRun', workspaceId: 'ws', accountId: 'acc', runId, brief: 'b', autoApply: false, keyId: 'key-1', scope: 'write', meta: apiMeta },
    );
  const cancelRun = (http: Commands, runId: string) =>
    http.handle(accountDecider, { type: 'CancelRun', workspaceId: 'ws', accountId: 'acc', runId, knownStatus: 'queued', meta: apiMeta });

  let store: CountingStore;
  let mineAggregates: Aggregates;
  let mine: Commands;
  let other: Commands;
  beforeEach(async () => {
    store = new CountingStore();
    // Two HTTP processes on one stream: each remembers what it last loaded or appended.
    mineAggregates = new Aggregates(store, subjects, null);
    mine = new Commands(mineAggregates);
    other = new Commands(new Aggregates(store, subjects, null));
    await mine.handle(accountDecider, { type: 'CreateAccount', workspaceId: 'ws', accountId: 'acc', name: 'a', platform: 'none', sandboxSeed: null, meta });
  });

  it('given an idle account this process created, when a run is started, then it is queued without reading the subject\'s newest event', async () => {
    const readsBefore = store.lastReads;
    const started = await startRun(mine, 'run-1');
    expect(started.appended.map((s) => s.event.type)).to.deep.equal(['RunQueued']);
    expect(store.lastReads).to.equal(readsBefore);
  });

  it('given another process queued a run since, when a run is started here, then it is refused (run-in-progress) and nothing is appended', async () => {
    await startRun(other, 'run-1');
    const head = await store.lastSequence();
    try {
      await startRun(mine, 'run-2');
      expect.fail('the second run was queued');
    } catch (error) {
      expect(error).to.be.instanceOf(RunInProgressError);
      expect((error as RunInProgressError).details).to.deep.equal({ active_run_id: 'run-1' });
    }
    expect(await store.lastSequence()).to.equal(head);
  });

  it('given this process remembers a run in progress that another process canceled, when a run is started here, then it is queued (the refusal is decided again on a fresh load)', async () => {
    await startRun(mine, 'run-1');
    await cancelRun(other, 'run-1');
    const started = await startRun(mine, 'run-2');
    expect(started.appended.map((s) => s.event.data)).to.deep.equal([{ run_id: 'run-2', brief: 'b', auto_apply: false, key_id: 'key-1', scope: 'write' }]);
  });

  /** What this process's run-state follower hands its aggregates: the account's messages after `afterSeq`, in order (`skip` left out). */
  const follow = async (afterSeq: number, skip: readonly number[] = []) => {
    for await (const result of store.readSubjectChecked(accountSubject, afterSeq, await store.lastSequence())) {
      if (!skip.includes(result.ok ? result.stored.seq : result.corrupt.seq)) mineAggregates.followed(result);
    }
  };

  it('given this process followed another process canceling the run it remembers, when a run is started here, then it is queued without a read', async () => {
    const first = await startRun(mine, 'run-1');
    await cancelRun(other, 'run-1');
    await follow(first.appended[0]!.seq);
    const readsBefore = store.lastReads;
    const started = await startRun(mine, 'run-2');
    expect(started.appended.map((s) => s.event.type)).to.deep.equal(['RunQueued']);
    expect(store.lastReads).to.equal(readsBefore);
  });

  it('given this process missed an event of the account, when it follows the next one, then it forgets the account: a start is refused, never a second run queued', async () => {
    await startRun(mine, 'run-1');
    const idle = await cancelRun(mine, 'run-1');
    // Another process queues run-2 and a worker claims it; this process's follower misses the RunQueued.
    const queued = await startRun(other, 'run-2');
    await other.handle(accountDecider, { type: 'ClaimRun', workspaceId: 'ws', accountId: 'acc', runId: 'run-2', workerId: 'w', agent: { kind: 'rules', model: 'm' }, meta });
    await follow(idle.appended[0]!.seq, [queued.appended[0]!.seq]);
    const readsBefore = store.lastReads;
    try {
      await startRun(mine, 'run-3');
      expect.fail('a second run was queued while run-2 runs');
    } catch (error) {
      expect(error).to.be.instanceOf(RunInProgressError);
    }
    expect(store.lastReads, 'the account was read again').to.be.greaterThan(readsBefore);
  });

  it('given a message on the account that cannot be admitted, when it is followed, then the account is forgotten rather than folded', async () => {
    const first = await startRun(mine, 'run-1');
    mineAggregates.followed({ ok: false, corrupt: { seq: first.appended[0]!.seq + 1, subject: accountSubject, code: 'untrusted', error: 'forged', detail: 'forged' } });
    const readsBefore = store.lastReads;
    await cancelRun(mine, 'run-1');
    expect(store.lastReads, 'the account was read again').to.be.greaterThan(readsBefore);
  });

  it('given 20 concurrent starts of different runs on one idle account, exactly one is queued and 19 are refused', async () => {
    const outcomes = await Promise.allSettled(Array.from({ length: 20 }, (_, i) => startRun(i % 2 === 0 ? mine : other, `run-${i}`)));
    const queued = outcomes.filter((o) => o.status === 'fulfilled' && o.value.appended.length === 1);
    const refused = outcomes.filter((o) => o.status === 'rejected' && o.reason instanceof RunInProgressError);
    expect(queued).to.have.length(1);
    expect(refused).to.have.length(19);
    const types: string[] = [];
    for await (const stored of store.readSubject(accountSubject, 0, await store.lastSequence())) types.push(stored.event.type);
    expect(types).to.deep.equal(['AccountCreated', 'RunQueued']);
  });
});

/**
 * A store whose reads are answered by a replica that is behind the stream leader for its first
 * `lagging` reads (direct gets on an R3 stream may be), while the leader knows every event.
 */
class LaggingReplicaStore extends InMemoryEventStore {
  lagging = 0;
  override async lastOfChecked(subject: string) {
    if (this.lagging > 0) {
      this.lagging--;
      return null;
    }
    return super.lastOfChecked(subject);
  }
}

describe('handle: a refusal is never decided on a replica behind the leader (specs)', () => {
  const subjects = new Subjects('spec');
  const engage = (commands: Commands) =>
    commands.handle(workspaceDecider, { type: 'SetKillSwitch', workspaceId: 'ws', engaged: true, reason: 'r', meta });

  it('given a workspace a lagging replica does not show yet, when the kill switch is engaged, then it is engaged (decided again on a reload)', async () => {
    const store = new LaggingReplicaStore();
    await new Commands(new Aggregates(store, subjects, null)).handle(workspaceDecider, { type: 'CreateWorkspace', workspaceId: 'ws', name: 'w', meta });
    store.lagging = 2;
    const engaged = await engage(new Commands(new Aggregates(store, subjects, null)));
    expect(engaged.state.killSwitch.engaged).to.equal(true);
    expect(store.lagging, 'both lagging reads were used').to.equal(0);
  });

  it('given a workspace the leader does not have either, then the refusal stands (no reload loop)', async () => {
    const store = new LaggingReplicaStore();
    const error = await engage(new Commands(new Aggregates(store, subjects, null))).catch((e: unknown) => e);
    expect(error).to.be.instanceOf(WorkspaceNotFoundError);
  });

  it('given a replica that stays behind, then the refusal stands after a few reloads', async () => {
    const store = new LaggingReplicaStore();
    await new Commands(new Aggregates(store, subjects, null)).handle(workspaceDecider, { type: 'CreateWorkspace', workspaceId: 'ws', name: 'w', meta });
    store.lagging = 1_000;
    const error = await engage(new Commands(new Aggregates(store, subjects, null))).catch((e: unknown) => e);
    expect(error).to.be.instanceOf(WorkspaceNotFoundError);
    expect(1_000 - store.lagging, 'reads: the first and five reloads').to.equal(6);
  });
});

/** Reads answered by a replica one event behind the leader, for the next `lagging` reads. */
class OneBehindReplicaStore extends InMemoryEventStore {
  lagging = 0;
  override async lastOfChecked(subject: string) {
    const last = await super.lastOfChecked(subject);
    if (this.lagging === 0 || !last?.ok) return last;
    this.lagging--;
    let previous: Awaited<ReturnType<InMemoryEventStore['lastOfChecked']>> = null;
    for await (const result of this.readSubjectChecked(subject, 0, last.stored.seq - 1)) previous = result;
    return previous;
  }
}

describe('handle: a decision that nothing is to be done is never taken on a replica behind the leader (specs)', () => {
  const subjects = new Subjects('spec');
  const switchTo = (commands: Commands, engaged: boolean) =>
    commands.handle(workspaceDecider, { type: 'SetKillSwitch', workspaceId: 'ws', engaged, reason: engaged ? 'incident' : 'over', meta });

  it('given the kill switch just released, when it is engaged on a replica that still shows it engaged, then it is engaged in the log', async () => {
    const store = new OneBehindReplicaStore();
    const first = new Commands(new Aggregates(store, subjects, null));
    await first.handle(workspaceDecider, { type: 'CreateWorkspace', workspaceId: 'ws', name: 'w', meta });
    await switchTo(first, true);
    await switchTo(first, false);
    store.lagging = 1;
    const engaged = await switchTo(new Commands(new Aggregates(store, subjects, null)), true);
    expect(engaged.appended.map((e) => e.event.type)).to.deep.equal(['KillSwitchEngaged']);
    expect((await loadWorkspace(new Aggregates(store, subjects, null), 'ws')).state.killSwitch.engaged).to.equal(true);
  });

  it('given the switch just engaged, when the apply worker reads it from the leader on a replica that still shows it released, then it reads it engaged', async () => {
    const store = new OneBehindReplicaStore();
    const commands = new Commands(new Aggregates(store, subjects, null));
    await commands.handle(workspaceDecider, { type: 'CreateWorkspace', workspaceId: 'ws', name: 'w', meta });
    await switchTo(commands, true);
    store.lagging = 1;
    expect((await loadWorkspace(new Aggregates(store, subjects, null), 'ws')).state.killSwitch.engaged, 'a plain read on the replica').to.equal(false);
    store.lagging = 1;
    expect((await loadWorkspaceFromLeader(new Aggregates(store, subjects, null), 'ws')).state.killSwitch.engaged).to.equal(true);
  });

  it('given the switch engaged in the log too, when it is engaged again, then nothing is appended (the leader has nothing newer)', async () => {
    const store = new OneBehindReplicaStore();
    const commands = new Commands(new Aggregates(store, subjects, null));
    await commands.handle(workspaceDecider, { type: 'CreateWorkspace', workspaceId: 'ws', name: 'w', meta });
    await switchTo(commands, true);
    expect((await switchTo(new Commands(new Aggregates(store, subjects, null)), true)).appended).to.deep.equal([]);
  });
});
