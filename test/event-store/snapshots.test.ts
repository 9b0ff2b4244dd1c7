import { expect } from 'chai';
import type { AccountState } from '../../commands/account/account-state.ts';
import { AggregateRepository } from '../../src/event-store/aggregate-repository.ts';
import { SnapshotStore } from '../../src/event-store/snapshot-store.ts';
import type { DomainEvent } from '../../src/events/catalogue/index.ts';
import { openInfrastructure, type Infrastructure } from '../../src/runtime/infrastructure.ts';
import { dropIsolated, isolatedConfig } from '../support/isolation.ts';
import { eventually } from '../support/eventually.ts';
import { accountDecider } from '../../commands/account/account-decider.ts';
import { streams } from '../../src/event-store/subjects.ts';

describe('aggregate snapshots: loading does not grow with history', function () {
  this.timeout(60_000);
  const config = isolatedConfig('snapshots');
  let infra: Infrastructure;

  before(async () => {
    infra = await openInfrastructure(config, 'test-snapshots');
  });
  after(async () => {
    await infra.close();
    await dropIsolated(config);
  });

  it('a fresh process folds at most 64 events of an aggregate with 300, and gets the same state', async () => {
    const { commands, subjects } = infra;
    const ws = 'ws-snap';
    const account = 'acc-snap';
    const meta = { actor: { kind: 'operator' as const, id: 'test' }, correlationId: 'c' };
    await commands.handle(accountDecider, { type: 'CreateAccount', workspaceId: ws, accountId: account, name: 'A', platform: 'none', sandboxSeed: null, meta });
    for (let i = 0; i < 150; i++) {
      const runId = `run-${i}`;
      await commands.handle(accountDecider, { type: 'StartRun', workspaceId: ws, accountId: account, runId, brief: 'b', autoApply: false, keyId: 'k', scope: 'write', meta });
      await commands.handle(accountDecider, { type: 'CancelRun', workspaceId: ws, accountId: account, runId, knownStatus: 'queued', meta });
    }
    const subject = subjects.forAggregate(streams.account(ws, account));
    const expected = await infra.aggregates.load(accountDecider, streams.account(ws, account));
    expect(expected.state.runsQueued).to.equal(150);

    let folded = 0;
    const counting = { ...accountDecider, evolve: (state: AccountState, event: DomainEvent) => (folded++, accountDecider.evolve(state, event)) };
    const snapshots = await SnapshotStore.open(infra.nc, `${config.eventStream}_snapshots`, 1);
    // Snapshots are written asynchronously after the append that makes them due.
    await eventually(async () => expect((await snapshots.read(subject))?.lastSequence ?? 0).to.be.greaterThan(expected.lastSequence - 64));
    const fresh = new AggregateRepository(infra.store, snapshots, counting);
    const loaded = await fresh.load(subject);
    expect(folded).to.be.at.most(64);
    expect(loaded.state).to.deep.equal(expected.state);
    expect(loaded.lastSequence).to.equal(expected.lastSequence);
    expect(loaded.lastHash).to.equal(expected.lastHash);
  });
});
