import { expect } from 'chai';
import { readCheckpoint } from '../../projections/runtime/checkpoints.ts';
import { listQuarantine } from '../../projections/runtime/quarantine.ts';
import { api, campaignsByStrategy, cents, proposeTarget } from '../safe-apply/helpers.ts';
import { eventually } from '../support/eventually.ts';
import { startTestService, type TestService } from '../support/test-service.ts';
import { streams } from '../../src/event-store/subjects.ts';

/**
 * A signature says who wrote an event, not where it belongs. Whoever may publish to the
 * event subjects (the service NATS user, without the signing key) can publish the stored
 * bytes of an old, validly signed event again. The hash chain is what gives it away: its
 * prev_hash names an older event than the subject's last one.
 */
describe('a validly signed event replayed onto its subject', function () {
  this.timeout(90_000);
  let svc: TestService;

  before(async () => {
    svc = await startTestService('replay', { ROLES: 'http,projectors' });
  });
  after(async () => svc?.stop());

  it('is not believed: an old KillSwitchReleased replayed leaves the switch engaged, for reads and decisions, and is parked', async () => {
    const tenant = await svc.tenant('replay');
    const killSwitch = (verb: string) => api(svc, 'POST', `/api/v1/workspace/kill-switch/${verb}`, { key: tenant.keys.admin, body: { reason: verb } });
    for (const verb of ['engage', 'release', 'engage']) expect((await killSwitch(verb)).status).to.equal(200);

    const infra = svc.service.infrastructure;
    const subject = infra.subjects.forAggregate(streams.workspace(tenant.workspaceId));
    let release: number | undefined;
    for await (const { seq, event } of infra.store.readFiltered(subject, 1)) if (event.type === 'KillSwitchReleased') release = seq;
    const stored = await infra.store.rawAt(release!);
    // The exact signed bytes, without Nats-Msg-Id: nothing de-duplicates them.
    const replayed = (await infra.js.publish(stored!.subject, stored!.data)).seq;
    await eventually(async () => expect((await readCheckpoint(infra.database.db, 'identity'))!.lastSeq).to.be.at.least(replayed), 10_000);

    const shown = await api(svc, 'GET', '/api/v1/workspace/kill-switch', { key: tenant.keys.read });
    expect(shown.body.engaged, 'the write model still sees the switch engaged').to.equal(true);
    const { cpa } = await campaignsByStrategy(svc, tenant.keys.read, tenant.accounts.sandbox);
    const proposed = await proposeTarget(svc, tenant.keys.write, tenant.accounts.sandbox, cpa.id, {
      target_cpa: cents(cpa.bidding_strategy.target_cpa! * 1.05),
      auto_apply: true,
    });
    expect(proposed.disposition, JSON.stringify(proposed.policy_reasons)).to.equal('queued');

    const parked = (await listQuarantine(infra.database.db, replayed)).filter((entry) => entry.code === 'chain-broken');
    expect(parked.map((entry) => entry.projection)).to.include('identity');
    expect(parked[0]!.error).to.match(/does not continue its subject's chain/);
  });

  it('still believes the events that follow a replay on the same subject', async () => {
    const tenant = await svc.tenant('after-replay');
    const killSwitch = (verb: string) => api(svc, 'POST', `/api/v1/workspace/kill-switch/${verb}`, { key: tenant.keys.admin, body: { reason: verb } });
    expect((await killSwitch('engage')).status).to.equal(200);
    const infra = svc.service.infrastructure;
    const subject = infra.subjects.forAggregate(streams.workspace(tenant.workspaceId));
    const engaged = (await infra.store.lastOf(subject))!;
    await infra.js.publish(subject, (await infra.store.rawAt(engaged.seq))!.data);
    expect((await killSwitch('release')).status).to.equal(200);
    await eventually(async () => {
      const shown = await api(svc, 'GET', '/api/v1/workspace/kill-switch', { key: tenant.keys.read });
      expect(shown.body.engaged).to.equal(false);
    }, 10_000);
  });
  it('is listed in the history in its place as a chain-broken corrupt entry, never as an event, while the original stays an event', async () => {
    const tenant = await svc.tenant('history-replay');
    const account = tenant.accounts.sandbox;
    const { cpa } = await campaignsByStrategy(svc, tenant.keys.read, account);
    const queued = await proposeTarget(svc, tenant.keys.write, account, cpa.id, { target_cpa: cents(cpa.bidding_strategy.target_cpa! * 1.3), auto_apply: false });
    expect((await api(svc, 'POST', `/api/v1/accounts/${account}/approvals/${queued.id}/approve`, { key: tenant.keys.write, body: {} })).status).to.equal(200);
    const infra = svc.service.infrastructure;
    const subject = infra.subjects.forAggregate(streams.action(tenant.workspaceId, account, queued.id));
    const approval = (await infra.store.lastOf(subject))!;
    expect(approval.event.type).to.equal('ActionApproved');
    // The exact signed bytes again, without Nats-Msg-Id: nothing de-duplicates them.
    const replayed = (await infra.js.publish(subject, (await infra.store.rawAt(approval.seq))!.data)).seq;

    for (const query of ['', `&run_id=${queued.id}`]) {
      const page = await api(svc, 'GET', `/api/v1/accounts/${account}/history?limit=500${query}`, { key: tenant.keys.read });
      expect(page.status).to.equal(200);
      const bySeq = new Map((page.body.data as any[]).map((entry) => [entry.seq, entry]));
      expect(bySeq.get(approval.seq), query).to.include({ type: 'ActionApproved' }).and.not.have.property('corrupt');
      expect(bySeq.get(replayed), query).to.deep.include({ seq: replayed, subject, corrupt: true, code: 'chain-broken' });
      expect(bySeq.get(replayed).error).to.match(/does not continue its subject's chain/);
      expect(bySeq.get(replayed)).to.not.have.property('type');
    }
  });
  it('ends a history page at the projections\' checkpoint while they have not judged the events after it, and lists those once they have', async () => {
    const tenant = await svc.tenant('history-behind');
    const account = tenant.accounts.sandbox;
    const infra = svc.service.infrastructure;
    const { cpa } = await campaignsByStrategy(svc, tenant.keys.read, account);
    await proposeTarget(svc, tenant.keys.write, account, cpa.id, { target_cpa: cents(cpa.bidding_strategy.target_cpa! * 1.3), auto_apply: false });
    const projector = svc.service.projectorCopy!.projector!;
    await projector.stop();
    let restarted = false;
    try {
      const later = await proposeTarget(svc, tenant.keys.write, account, cpa.id, { target_cpa: cents(cpa.bidding_strategy.target_cpa! * 1.4), auto_apply: false });
      const checkpoint = (await readCheckpoint(infra.database.db, 'runs'))!.lastSeq;
      const behind = await api(svc, 'GET', `/api/v1/accounts/${account}/history?limit=500`, { key: tenant.keys.read });
      expect(behind.status).to.equal(200);
      const seqs = (behind.body.data as any[]).map((entry) => entry.seq as number);
      expect(seqs.length, 'the events the projections judged are listed').to.be.greaterThan(0);
      expect(Math.max(...seqs)).to.be.at.most(checkpoint);
      expect(behind.body.next_cursor, 'the walk goes on from the checkpoint').to.equal(String(checkpoint));
      expect((behind.body.data as any[]).some((entry) => entry.data?.action_id === later.id)).to.equal(false);

      await projector.start();
      restarted = true;
      await eventually(async () => {
        const next = await api(svc, 'GET', `/api/v1/accounts/${account}/history?limit=500&cursor=${behind.body.next_cursor}`, { key: tenant.keys.read });
        expect((next.body.data as any[]).some((entry) => entry.type === 'ActionProposed' && entry.data.action_id === later.id)).to.equal(true);
        expect(next.body.next_cursor).to.equal(null);
      }, 10_000);
    } finally {
      if (!restarted) await projector.start();
    }
  });
});
