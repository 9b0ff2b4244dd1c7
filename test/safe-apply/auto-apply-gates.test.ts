import { expect } from 'chai';
import { createLogger } from '../../src/log/logger.ts';
import { SandboxPlatform } from '../../src/platform/sandbox/sandbox-platform.ts';
import { ApplyWorker } from '../../src/workers/apply-worker.ts';
import { startTestService, type TestService, type TestTenant } from '../support/test-service.ts';
import {
  api,
  campaignById,
  campaignsByStrategy,
  cents,
  expectProblem,
  listAllApprovals,
  platformAccount,
  proposeTarget,
  targetPath,
  waitForStatus,
} from './helpers.ts';

/**
 * docs/policy.md, "The gates of auto-apply": each gate alone keeps an action out of
 * auto-apply. The service runs without the apply-worker role, so targets only move when a
 * test starts an ApplyWorker itself; that lets the cap and re-check tests control exactly
 * what the platform looks like when the worker runs.
 */
describe('safe-apply: auto-apply gates', function () {
  this.timeout(60_000);
  let svc: TestService;
  let platform: SandboxPlatform;
  const workers: ApplyWorker[] = [];

  before(async () => {
    svc = await startTestService('sa-gates', { ROLES: 'http,projectors' });
    platform = new SandboxPlatform(svc.service.infrastructure.database.db);
  });

  after(async () => {
    for (const worker of workers.splice(0)) await worker.stop();
    await svc?.stop();
  });

  async function startApplyWorker(): Promise<ApplyWorker> {
    const worker = new ApplyWorker({ infrastructure: svc.service.infrastructure, platform, logger: createLogger('silent') });
    await worker.start();
    workers.push(worker);
    return worker;
  }

  async function stopApplyWorker(worker: ApplyWorker): Promise<void> {
    workers.splice(workers.indexOf(worker), 1);
    await worker.stop();
  }

  const killSwitch = (tenant: TestTenant, verb: 'engage' | 'release', key = tenant.keys.admin) =>
    api(svc, 'POST', `/api/v1/workspace/kill-switch/${verb}`, { key, body: { reason: `test ${verb}` } });

  const reasonsOf = (action: any) => (action.policy_reasons as string[]).join(' | ');

  it('(a) baseline: a safe change with auto_apply is auto_applied, and the apply worker makes it live', async () => {
    const tenant = await svc.tenant('gates-a');
    const account = tenant.accounts.sandbox;
    const { cpa } = await campaignsByStrategy(svc, tenant.keys.read, account);
    const next = cents(cpa.bidding_strategy.target_cpa! * 1.08);
    const action = await proposeTarget(svc, tenant.keys.write, account, cpa.id, { target_cpa: next, auto_apply: true });
    expect(action.risk_tier).to.equal('safe');
    expect(action.disposition).to.equal('auto_applied');
    expect(action.status).to.equal('auto_applied');
    expect(reasonsOf(action)).to.match(/auto-apply slot 1 of 20/);
    // Not live until the worker applied it.
    expect((await campaignById(svc, tenant.keys.read, account, cpa.id)).bidding_strategy.target_cpa).to.equal(cpa.bidding_strategy.target_cpa);

    const worker = await startApplyWorker();
    try {
      await waitForStatus(svc, tenant.keys.read, account, action.id, 'applied');
      const live = await campaignById(svc, tenant.keys.read, account, cpa.id);
      expect(live.bidding_strategy.target_cpa).to.equal(next);
    } finally {
      await stopApplyWorker(worker);
    }
  });

  it('(b) kill switch: admin only; engaged, a safe auto_apply change is queued with the reason; released, auto-applied again', async () => {
    const tenant = await svc.tenant('gates-b');
    const account = tenant.accounts.sandbox;
    const { cpa } = await campaignsByStrategy(svc, tenant.keys.read, account);
    const safeTarget = (factor: number) => ({ target_cpa: cents(cpa.bidding_strategy.target_cpa! * factor), auto_apply: true });

    expectProblem(await killSwitch(tenant, 'engage', tenant.keys.write), 403, 'insufficient-scope');
    expectProblem(await killSwitch(tenant, 'engage', tenant.keys.read), 403, 'insufficient-scope');
    const stillReleased = await api(svc, 'GET', '/api/v1/workspace/kill-switch', { key: tenant.keys.admin });
    expect(stillReleased.body.engaged).to.equal(false);

    const engaged = await killSwitch(tenant, 'engage');
    expect(engaged.status, engaged.text).to.equal(200);
    expect(engaged.body).to.include({ object: 'kill_switch', engaged: true, workspace_id: tenant.workspaceId });
    const shown = await api(svc, 'GET', '/api/v1/workspace/kill-switch', { key: tenant.keys.admin });
    expect(shown.body.engaged).to.equal(true);

    const whileEngaged = await proposeTarget(svc, tenant.keys.write, account, cpa.id, safeTarget(1.05));
    expect(whileEngaged.risk_tier).to.equal('safe');
    expect(whileEngaged.disposition).to.equal('queued');
    expect(reasonsOf(whileEngaged)).to.match(/kill switch/i);

    // The kill switch of one workspace does not touch another.
    const bystander = await svc.tenant('gates-b2');
    const { cpa: theirCpa } = await campaignsByStrategy(svc, bystander.keys.read, bystander.accounts.sandbox);
    const theirs = await proposeTarget(svc, bystander.keys.write, bystander.accounts.sandbox, theirCpa.id, {
      target_cpa: cents(theirCpa.bidding_strategy.target_cpa! * 1.05),
      auto_apply: true,
    });
    expect(theirs.disposition).to.equal('auto_applied');

    expectProblem(await killSwitch(tenant, 'release', tenant.keys.write), 403, 'insufficient-scope');
    const released = await killSwitch(tenant, 'release');
    expect(released.status, released.text).to.equal(200);
    expect(released.body.engaged).to.equal(false);
    const afterRelease = await proposeTarget(svc, tenant.keys.write, account, cpa.id, safeTarget(1.04));
    expect(afterRelease.disposition).to.equal('auto_applied');
  });

  it('(c) review tier: a 30 % change with auto_apply is queued', async () => {
    const tenant = await svc.tenant('gates-c');
    const account = tenant.accounts.sandbox;
    const { cpa, roas } = await campaignsByStrategy(svc, tenant.keys.read, account);
    const cpaAction = await proposeTarget(svc, tenant.keys.write, account, cpa.id, {
      target_cpa: cents(cpa.bidding_strategy.target_cpa! * 1.3),
      auto_apply: true,
    });
    expect(cpaAction.risk_tier).to.equal('review');
    expect(cpaAction.disposition).to.equal('queued');
    expect(reasonsOf(cpaAction)).to.match(/risk tier review/);
    const roasAction = await proposeTarget(svc, tenant.keys.write, account, roas.id, {
      target_roas_pct: Math.round(roas.bidding_strategy.target_roas_pct! * 0.7 * 10) / 10,
      auto_apply: true,
    });
    expect(roasAction.risk_tier).to.equal('review');
    expect(roasAction.disposition).to.equal('queued');
    // And beyond ±50 % it is blocked, never queued.
    const blocked = await proposeTarget(svc, tenant.keys.write, account, cpa.id, {
      target_cpa: cents(cpa.bidding_strategy.target_cpa! * 1.6),
      auto_apply: true,
    });
    expect(blocked.risk_tier).to.equal('blocked');
    expect(blocked.disposition).to.equal('blocked');
  });

  it('(e) re-check: the target changed on the platform after the proposal → returned with the reason', async () => {
    const tenant = await svc.tenant('gates-e');
    const account = tenant.accounts.sandbox;
    const { cpa } = await campaignsByStrategy(svc, tenant.keys.read, account);
    const before = cpa.bidding_strategy.target_cpa!;
    const proposed = cents(before * 1.05);
    const action = await proposeTarget(svc, tenant.keys.write, account, cpa.id, { target_cpa: proposed, auto_apply: true });
    expect(action.disposition).to.equal('auto_applied');

    // Someone changes the target directly on the platform before the worker runs.
    const elsewhere = cents(before * 0.8);
    const ref = await platformAccount(svc, tenant.workspaceId, account);
    expect(ref.sandboxSeed).to.be.a('number');
    await platform.applyChange(ref, { kind: 'set_target_cpa', campaign_id: cpa.id, target_cpa: elsewhere });
    expect((await campaignById(svc, tenant.keys.read, account, cpa.id)).bidding_strategy.target_cpa).to.equal(elsewhere);

    const worker = await startApplyWorker();
    try {
      const returned = await waitForStatus(svc, tenant.keys.read, account, action.id, 'returned');
      expect(returned.status_reason).to.match(/target changed/);
      expect(returned.status_reason).to.contain(String(before));
      expect(returned.status_reason).to.contain(String(elsewhere));
      // The worker did not overwrite the platform's value.
      expect((await campaignById(svc, tenant.keys.read, account, cpa.id)).bidding_strategy.target_cpa).to.equal(elsewhere);
    } finally {
      await stopApplyWorker(worker);
    }
  });

  it('(f) kill switch engaged after an auto-applied proposal, before the worker runs → returned; a person can still approve it', async () => {
    const tenant = await svc.tenant('gates-f');
    const account = tenant.accounts.sandbox;
    const { cpa } = await campaignsByStrategy(svc, tenant.keys.read, account);
    const next = cents(cpa.bidding_strategy.target_cpa! * 0.95);
    const action = await proposeTarget(svc, tenant.keys.write, account, cpa.id, { target_cpa: next, auto_apply: true });
    expect(action.disposition).to.equal('auto_applied');
    expect((await killSwitch(tenant, 'engage')).status).to.equal(200);

    const worker = await startApplyWorker();
    try {
      const returned = await waitForStatus(svc, tenant.keys.read, account, action.id, 'returned');
      expect(returned.status_reason).to.match(/kill switch/i);
      expect((await campaignById(svc, tenant.keys.read, account, cpa.id)).bidding_strategy.target_cpa).to.equal(cpa.bidding_strategy.target_cpa);

      // "Actions a person approved are still applied" (docs/api.md, Kill switch).
      const approved = await api(svc, 'POST', `/api/v1/accounts/${account}/approvals/${action.id}/approve`, { key: tenant.keys.write, body: {} });
      expect(approved.status, approved.text).to.equal(200);
      await waitForStatus(svc, tenant.keys.read, account, action.id, 'applied');
      expect((await campaignById(svc, tenant.keys.read, account, cpa.id)).bidding_strategy.target_cpa).to.equal(next);
    } finally {
      await stopApplyWorker(worker);
    }
  });

  it('(d) cap: of 100 concurrent safe auto_apply proposals on one account, exactly 20 are auto_applied and 80 queued', async () => {
    const tenant = await svc.tenant('gates-d');
    const account = tenant.accounts.sandbox;
    const { cpa, roas } = await campaignsByStrategy(svc, tenant.keys.read, account);
    const cpaNow = cpa.bidding_strategy.target_cpa!;
    const roasNow = roas.bidding_strategy.target_roas_pct!;
    // Every one a safe change (≤ ±5 %) relative to the unchanged current targets.
    const factors = [0.95, 0.97, 0.99, 1.01, 1.03, 1.05];
    const requests = Array.from({ length: 100 }, (_, i) => {
      const factor = factors[i % factors.length]!;
      const [campaignId, body] =
        i % 2 === 0
          ? [cpa.id, { target_cpa: cents(cpaNow * factor) }]
          : [roas.id, { target_roas_pct: Math.round(roasNow * factor * 10) / 10 }];
      return api(svc, 'POST', targetPath(account, campaignId), {
        key: tenant.keys.write,
        body: { ...body, auto_apply: true, reason: `cap test ${i}` },
      });
    });
    const results = await Promise.all(requests);
    for (const result of results) expect(result.status, result.text).to.equal(200);
    for (const result of results) expect(result.body.risk_tier, result.text).to.equal('safe');
    const dispositions = results.map((r) => r.body.disposition as string);
    expect(dispositions.filter((d) => d === 'auto_applied')).to.have.length(20);
    expect(dispositions.filter((d) => d === 'queued')).to.have.length(80);
    for (const result of results.filter((r) => r.body.disposition === 'queued')) {
      expect(reasonsOf(result.body)).to.match(/daily auto-apply cap of 20/);
    }
    // Slots 1..20 each handed out exactly once.
    const slots = results
      .filter((r) => r.body.disposition === 'auto_applied')
      .map((r) => Number(/auto-apply slot (\d+) of 20/.exec(reasonsOf(r.body))?.[1]))
      .sort((a, b) => a - b);
    expect(slots).to.deep.equal(Array.from({ length: 20 }, (_, i) => i + 1));

    // The approvals view agrees, and the targets did not move (no apply worker).
    const listed = await listAllApprovals(svc, tenant.keys.read, account);
    expect(listed).to.have.length(100);
    expect(listed.filter((a) => a.status === 'auto_applied')).to.have.length(20);
    expect(listed.filter((a) => a.status === 'queued')).to.have.length(80);
    expect((await campaignById(svc, tenant.keys.read, account, cpa.id)).bidding_strategy.target_cpa).to.equal(cpaNow);

    // Only queued (or returned) actions can be approved or rejected: not an auto_applied one.
    const anAutoApplied = listed.find((a) => a.status === 'auto_applied');
    const approveIt = await api(svc, 'POST', `/api/v1/accounts/${account}/approvals/${anAutoApplied.id}/approve`, { key: tenant.keys.write, body: {} });
    expectProblem(approveIt, 409, 'action-not-in-queue');
    expect(approveIt.body.action_status).to.equal('auto_applied');
    const rejectIt = await api(svc, 'POST', `/api/v1/accounts/${account}/approvals/${anAutoApplied.id}/reject`, { key: tenant.keys.write, body: { reason: 'no' } });
    expectProblem(rejectIt, 409, 'action-not-in-queue');

    // The cap is per account: the workspace's other account still has its 20 slots.
    const { cpa: otherCpa } = await campaignsByStrategy(svc, tenant.keys.read, tenant.accounts.sandbox2);
    const onOther = await proposeTarget(svc, tenant.keys.write, tenant.accounts.sandbox2, otherCpa.id, {
      target_cpa: cents(otherCpa.bidding_strategy.target_cpa! * 1.02),
      auto_apply: true,
    });
    expect(onOther.disposition).to.equal('auto_applied');
    // And the 101st on the capped account is queued too.
    const extra = await proposeTarget(svc, tenant.keys.write, account, cpa.id, { target_cpa: cents(cpaNow * 1.02), auto_apply: true });
    expect(extra.disposition).to.equal('queued');
    expect(reasonsOf(extra)).to.match(/daily auto-apply cap of 20/);
  });

  it('(d2) a slot is not given back when the apply worker returns the action (the cap counts decisions)', async () => {
    const tenant = await svc.tenant('gates-d2');
    const account = tenant.accounts.sandbox;
    const { cpa } = await campaignsByStrategy(svc, tenant.keys.read, account);
    const cpaNow = cpa.bidding_strategy.target_cpa!;
    const autoApplied = [];
    for (let i = 0; i < 20; i++) {
      const action = await proposeTarget(svc, tenant.keys.write, account, cpa.id, { target_cpa: cents(cpaNow * (1 + (i % 5) / 100)), auto_apply: true });
      expect(action.disposition, `proposal ${i}`).to.equal('auto_applied');
      autoApplied.push(action);
    }
    // Engaged before the worker sees them: all 20 go back to the queue.
    expect((await killSwitch(tenant, 'engage')).status).to.equal(200);
    const worker = await startApplyWorker();
    try {
      for (const action of autoApplied) await waitForStatus(svc, tenant.keys.read, account, action.id, 'returned');
    } finally {
      await stopApplyWorker(worker);
    }
    expect((await killSwitch(tenant, 'release')).status).to.equal(200);
    const after = await proposeTarget(svc, tenant.keys.write, account, cpa.id, { target_cpa: cents(cpaNow * 1.01), auto_apply: true });
    expect(after.risk_tier).to.equal('safe');
    expect(after.disposition).to.equal('queued');
    expect(reasonsOf(after)).to.match(/daily auto-apply cap of 20/);
  });

  it('lets any key read the kill switch, and only admin keys engage or release it', async () => {
    const tenant = await svc.tenant('gates-ks-read');
    for (const key of [tenant.keys.read, tenant.keys.write, tenant.keys.admin]) {
      const response = await api(svc, 'GET', '/api/v1/workspace/kill-switch', { key });
      expect(response.status).to.equal(200);
    }
    for (const key of [tenant.keys.read, tenant.keys.write]) {
      expectProblem(await api(svc, 'POST', '/api/v1/workspace/kill-switch/engage', { key }), 403, 'insufficient-scope');
      expectProblem(await api(svc, 'POST', '/api/v1/workspace/kill-switch/release', { key }), 403, 'insufficient-scope');
    }
  });
});
