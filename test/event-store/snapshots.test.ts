import { expect } from 'chai';
import type { AccountState } from '../../commands/account/account-state.ts';
import { AggregateRepository } from '../../src/event-store/aggregate-repository.ts';
import { generateKeyPairSync } from 'node:crypto';
import { Kvm } from '@nats-io/kv';
import { SnapshotStore, type Snapshot } from '../../src/event-store/snapshot-store.ts';
import { EventSigner } from '../../src/events/signing/event-signer.ts';
import { workspaceDecider, type WorkspaceState } from '../../commands/workspace/workspace-decider.ts';
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
    const snapshots = await SnapshotStore.open(infra.nc, `${config.eventStream}_snapshots`, 1, infra.signing.signer);
    // Snapshots are written asynchronously after the append that makes them due.
    await eventually(async () => expect((await snapshots.read(subject))?.lastSequence ?? 0).to.be.greaterThan(expected.lastSequence - 64));
    const fresh = new AggregateRepository(infra.store, snapshots, counting);
    const loaded = await fresh.load(subject);
    expect(folded).to.be.at.most(64);
    expect(loaded.state).to.deep.equal(expected.state);
    expect(loaded.lastSequence).to.equal(expected.lastSequence);
    expect(loaded.lastHash).to.equal(expected.lastHash);
  });

  it('given snapshots planted by a NATS user without the signing key (a released kill switch the log does not hold), then a fresh process folds the log and the switch stays engaged', async () => {
    const { commands, subjects } = infra;
    const ws = 'ws-forged-snapshot';
    const meta = { actor: { kind: 'operator' as const, id: 'test' }, correlationId: 'c' };
    await commands.handle(workspaceDecider, { type: 'CreateWorkspace', workspaceId: ws, name: 'W', meta });
    await commands.handle(workspaceDecider, { type: 'SetKillSwitch', workspaceId: ws, engaged: true, reason: 'incident', meta });
    const subject = subjects.forAggregate(streams.workspace(ws));
    const genuine = await infra.aggregates.load(workspaceDecider, streams.workspace(ws));
    expect(genuine.state.killSwitch.engaged).to.equal(true);
    const forged: Snapshot<WorkspaceState> = {
      lastSequence: genuine.lastSequence,
      lastHash: genuine.lastHash,
      stateVersion: workspaceDecider.stateVersion,
      state: { ...genuine.state, killSwitch: { engaged: false, reason: 'forged', since: null } },
    };
    const bucket = `${config.eventStream}_snapshots`;
    const kv = await new Kvm(infra.nc).open(bucket);
    const keyed = await SnapshotStore.open(infra.nc, bucket, 1, infra.signing.signer);
    const attacker = new EventSigner(generateKeyPairSync('ed25519').privateKey);
    const plants: Record<string, () => Promise<unknown>> = {
      'plain JSON, as snapshots were stored before': () => kv.put(subject, JSON.stringify(forged)),
      'authenticated with another key': async () => (await SnapshotStore.open(infra.nc, bucket, 1, attacker)).write(subject, forged),
      "this process's own snapshot of another workspace, moved here": async () => {
        await keyed.write(subjects.forAggregate(streams.workspace('ws-other')), forged);
        const moved = await kv.get(subjects.forAggregate(streams.workspace('ws-other')));
        await kv.put(subject, moved!.string());
      },
    };

    for (const [how, plant] of Object.entries(plants)) {
      await plant();
      expect(await keyed.read(subject), how).to.equal(null);
      let folded = 0;
      const counting = { ...workspaceDecider, evolve: (state: WorkspaceState, event: DomainEvent) => (folded++, workspaceDecider.evolve(state, event)) };
      const loaded = await new AggregateRepository(infra.store, keyed, counting).load(subject);
      expect(loaded.state.killSwitch, how).to.deep.include({ engaged: true, reason: 'incident' });
      expect(folded, how).to.equal(2);
    }

    // Written with this process's key, the same snapshot is believed: the MAC, not the shape, decides.
    await keyed.write(subject, forged);
    expect((await keyed.read<WorkspaceState>(subject))?.state.killSwitch.engaged).to.equal(false);
  });
});
