import { expect } from 'chai';
import { randomUUID } from 'node:crypto';
import { startTestService, type TestService, type TestTenant } from '../support/test-service.ts';
import {
  PUBLIC_BASE_URL,
  api,
  approvalOf,
  campaignById,
  campaignsByStrategy,
  cents,
  expectProblem,
  problemShape,
  targetPath,
  type CampaignsByStrategy,
} from './helpers.ts';

/** POST /api/v1/accounts/{projectId}/campaigns/{campaignId}/target (docs/api.md, "Campaign target"). */
describe('safe-apply: campaign target endpoint', function () {
  this.timeout(30_000);
  let svc: TestService;
  let tenant: TestTenant;
  let other: TestTenant;
  let campaigns: CampaignsByStrategy;
  let account: string;

  before(async () => {
    // No apply worker: proposals never move the targets, so every relative change below stays as computed.
    svc = await startTestService('sa-target', { ROLES: 'http,projectors' });
    [tenant, other] = await Promise.all([svc.tenant('target-a'), svc.tenant('target-b')]);
    account = tenant.accounts.sandbox;
    campaigns = await campaignsByStrategy(svc, tenant.keys.read, account);
  });

  after(async () => {
    await svc?.stop();
  });

  const post = (campaignId: string, body: unknown, key = tenant.keys.write, accountId = account) =>
    api(svc, 'POST', targetPath(accountId, campaignId), { key, body });

  function expectAction(body: any) {
    expect(body.object).to.equal('action');
    expect(body.id).to.match(/^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/);
    expect(body.summary).to.be.a('string').and.not.equal('');
    expect(body.risk_tier).to.be.oneOf(['safe', 'review', 'blocked']);
    expect(body.disposition).to.be.oneOf(['queued', 'auto_applied', 'blocked']);
    expect(body.policy_reasons).to.be.an('array').that.is.not.empty;
    expect(body.approvals_url).to.equal(`${PUBLIC_BASE_URL}/console/accounts/${account}/approvals`);
    expect(new URL(body.approvals_url).protocol).to.equal('http:');
    expect(body.status).to.be.a('string');
  }

  describe('accepted proposals', () => {
    it('proposes a new target CPA on a maximize_conversions campaign with a target CPA (200, the action)', async () => {
      const current = campaigns.cpa.bidding_strategy.target_cpa!;
      const next = cents(current * 1.05);
      const result = await post(campaigns.cpa.id, { target_cpa: next, reason: 'CPA trending under target' });
      expect(result.status, result.text).to.equal(200);
      expectAction(result.body);
      expect(result.body.kind).to.equal('set_target_cpa');
      expect(result.body.risk_tier).to.equal('safe');
      expect(result.body.disposition).to.equal('queued');
      expect(result.body.status).to.equal('queued');
      expect(result.body.summary).to.contain(String(next));
      // The action exists in the approvals view with the same identity and a queued status.
      const listed = await approvalOf(svc, tenant.keys.read, account, result.body.id);
      expect(listed).to.include({ kind: 'set_target_cpa', status: 'queued', risk_tier: 'safe' });
      expect(listed.params).to.deep.equal({ campaign_id: campaigns.cpa.id, target_cpa: next });
    });

    it('proposes a new target ROAS on a maximize_conversion_value campaign with a target ROAS (200, the action)', async () => {
      const current = campaigns.roas.bidding_strategy.target_roas_pct!;
      const next = Math.round(current * 0.95 * 10) / 10;
      const result = await post(campaigns.roas.id, { target_roas_pct: next, reason: 'ROAS comfortably above target' });
      expect(result.status, result.text).to.equal(200);
      expectAction(result.body);
      expect(result.body.kind).to.equal('set_target_roas');
      expect(result.body.risk_tier).to.equal('safe');
      expect(result.body.status).to.equal('queued');
      const listed = await approvalOf(svc, tenant.keys.read, account, result.body.id);
      expect(listed.params).to.deep.equal({ campaign_id: campaigns.roas.id, target_roas_pct: next });
    });

    it('queues a safe (≤ 10 %) change when auto_apply is false, saying auto-apply was not requested', async () => {
      const next = cents(campaigns.cpa.bidding_strategy.target_cpa! * 1.02);
      const result = await post(campaigns.cpa.id, { target_cpa: next, reason: 'small nudge', auto_apply: false });
      expect(result.status, result.text).to.equal(200);
      expect(result.body.risk_tier).to.equal('safe');
      expect(result.body.disposition).to.equal('queued');
      expect(result.body.status).to.equal('queued');
      expect(result.body.policy_reasons.join(' | ')).to.match(/auto_apply was not requested/);
    });

    it('flags a portfolio campaign as review, with a reason naming the portfolio, and never auto-applies it', async () => {
      const strategy = campaigns.portfolio.bidding_strategy;
      const next = cents(strategy.target_cpa! * 1.03); // within ±10 %: only the portfolio keeps it out of "safe"
      const result = await post(campaigns.portfolio.id, { target_cpa: next, reason: 'portfolio nudge', auto_apply: true });
      expect(result.status, result.text).to.equal(200);
      expectAction(result.body);
      expect(result.body.risk_tier).to.equal('review');
      expect(result.body.disposition).to.equal('queued');
      expect(result.body.disposition).to.not.equal('auto_applied');
      const reasons = (result.body.policy_reasons as string[]).join(' | ');
      expect(reasons).to.match(/portfolio/i);
      expect(reasons).to.contain(strategy.portfolio!.id);
      expect(reasons).to.contain(`${strategy.portfolio!.campaign_ids.length} campaigns`);
      const listed = await approvalOf(svc, tenant.keys.read, account, result.body.id);
      expect(listed.status).to.equal('queued');
    });
  });

  describe('strategy mismatch (409 strategy-mismatch)', () => {
    it('refuses target_roas_pct on a target-CPA campaign, naming its strategy and the field it takes', async () => {
      const result = await post(campaigns.cpa.id, { target_roas_pct: 300, reason: 'wrong field' });
      expectProblem(result, 409, 'strategy-mismatch');
      expect(result.body.bidding_strategy).to.equal('maximize_conversions');
      expect(result.body.expected_field).to.equal('target_cpa');
      expect(result.body.detail).to.contain('maximize_conversions');
    });

    it('refuses target_cpa on a target-ROAS campaign, naming its strategy and the field it takes', async () => {
      const result = await post(campaigns.roas.id, { target_cpa: 20, reason: 'wrong field' });
      expectProblem(result, 409, 'strategy-mismatch');
      expect(result.body.bidding_strategy).to.equal('maximize_conversion_value');
      expect(result.body.expected_field).to.equal('target_roas_pct');
      expect(result.body.detail).to.contain('maximize_conversion_value');
    });

    for (const field of ['target_cpa', 'target_roas_pct'] as const) {
      it(`refuses ${field} on a manual_cpc campaign: it takes neither field`, async () => {
        const result = await post(campaigns.manual.id, { [field]: 50, reason: 'manual campaign' });
        expectProblem(result, 409, 'strategy-mismatch');
        expect(result.body.bidding_strategy).to.equal('manual_cpc');
        expect(result.body).to.have.property('expected_field', null);
        expect(result.body.detail).to.contain('manual_cpc');
      });
    }

    it('refuses target_cpa on a maximize_conversions campaign that has no target CPA', async function () {
      if (!campaigns.noTarget) this.skip();
      const result = await post(campaigns.noTarget!.id, { target_cpa: 30, reason: 'no target to change' });
      expectProblem(result, 409, 'strategy-mismatch');
      expect(result.body.bidding_strategy).to.equal('maximize_conversions');
      expect(result.body).to.have.property('expected_field', null);
    });

    it('records no action for a refused request', async () => {
      const before = await api(svc, 'GET', `/api/v1/accounts/${account}/approvals?limit=200`, { key: tenant.keys.read });
      await post(campaigns.manual.id, { target_cpa: 50, reason: 'refused' });
      await post(campaigns.cpa.id, { target_roas_pct: 50, reason: 'refused' });
      const after = await api(svc, 'GET', `/api/v1/accounts/${account}/approvals?limit=200`, { key: tenant.keys.read });
      expect(after.body.data.length).to.equal(before.body.data.length);
    });
  });

  describe('validation (422)', () => {
    it('refuses both target_cpa and target_roas_pct', async () => {
      expectProblem(await post(campaigns.cpa.id, { target_cpa: 20, target_roas_pct: 300, reason: 'both' }), 422, 'validation-error');
    });

    it('refuses neither target_cpa nor target_roas_pct', async () => {
      expectProblem(await post(campaigns.cpa.id, { reason: 'neither' }), 422, 'validation-error');
    });

    it('refuses a missing reason', async () => {
      const result = await post(campaigns.cpa.id, { target_cpa: cents(campaigns.cpa.bidding_strategy.target_cpa! * 1.01) });
      expectProblem(result, 422, 'validation-error');
      expect(result.body.errors).to.be.an('array').that.is.not.empty;
    });

    it('refuses a target that would round to 0 (target_cpa 0.001, target_roas_pct 0.01), naming the field, and records no action', async () => {
      const before = await api(svc, 'GET', `/api/v1/accounts/${account}/approvals?limit=200`, { key: tenant.keys.read });
      for (const [campaign, body, pointer] of [
        [campaigns.cpa.id, { target_cpa: 0.001, reason: 'tiny' }, '/target_cpa'],
        [campaigns.roas.id, { target_roas_pct: 0.01, reason: 'tiny' }, '/target_roas_pct'],
      ] as const) {
        const result = await post(campaign, body);
        expectProblem(result, 422, 'validation-error');
        expect(result.body.errors.map((e: { pointer: string }) => e.pointer)).to.include(pointer);
      }
      const after = await api(svc, 'GET', `/api/v1/accounts/${account}/approvals?limit=200`, { key: tenant.keys.read });
      expect(after.body.data.length).to.equal(before.body.data.length);
    });

    for (const reason of ['', '   ', '\t\n']) {
      it(`refuses a blank reason ${JSON.stringify(reason)}`, async () => {
        const result = await post(campaigns.cpa.id, { target_cpa: cents(campaigns.cpa.bidding_strategy.target_cpa! * 1.01), reason });
        expectProblem(result, 422, 'validation-error');
      });
    }
  });

  describe('not found, not connected, not allowed', () => {
    it('answers 404 campaign-not-found for a campaign the account does not have', async () => {
      const result = await post('99999999999', { target_cpa: 20, reason: 'nobody' });
      expectProblem(result, 404, 'campaign-not-found');
    });

    it("answers 404 campaign-not-found for a campaign of the workspace's other account", async () => {
      const theirs = await campaignsByStrategy(svc, tenant.keys.read, tenant.accounts.sandbox2);
      if (theirs.cpa.id === campaigns.cpa.id) return; // same seed: ids coincide, nothing to tell apart
      const result = await post(theirs.cpa.id, { target_cpa: theirs.cpa.bidding_strategy.target_cpa!, reason: 'wrong account' });
      expectProblem(result, 404, 'campaign-not-found');
    });

    it('answers 409 account-not-connected for an account without a platform', async () => {
      const result = await post('12345', { target_cpa: 20, reason: 'offline' }, tenant.keys.write, tenant.accounts.disconnected);
      expectProblem(result, 409, 'account-not-connected');
    });

    it('answers 403 insufficient-scope to a read key, and records nothing', async () => {
      const before = await api(svc, 'GET', `/api/v1/accounts/${account}/approvals?limit=200`, { key: tenant.keys.read });
      const next = cents(campaigns.cpa.bidding_strategy.target_cpa! * 1.01);
      const result = await post(campaigns.cpa.id, { target_cpa: next, reason: 'read key' }, tenant.keys.read);
      expectProblem(result, 403, 'insufficient-scope');
      const after = await api(svc, 'GET', `/api/v1/accounts/${account}/approvals?limit=200`, { key: tenant.keys.read });
      expect(after.body.data.length).to.equal(before.body.data.length);
    });

    it('accepts an admin key (admin ≥ write)', async () => {
      const next = cents(campaigns.cpa.bidding_strategy.target_cpa! * 0.99);
      const result = await post(campaigns.cpa.id, { target_cpa: next, reason: 'admin key' }, tenant.keys.admin);
      expect(result.status, result.text).to.equal(200);
    });

    it("answers another workspace's account exactly like a nonexistent one (404 account-not-found)", async () => {
      const theirAccount = other.accounts.sandbox;
      const theirCampaigns = await campaignsByStrategy(svc, other.keys.read, theirAccount);
      const body = { target_cpa: theirCampaigns.cpa.bidding_strategy.target_cpa!, reason: 'cross-tenant' };
      const foreign = await post(theirCampaigns.cpa.id, body, tenant.keys.write, theirAccount);
      const missingId = randomUUID();
      const missing = await post(theirCampaigns.cpa.id, body, tenant.keys.write, missingId);
      expectProblem(foreign, 404, 'account-not-found');
      expectProblem(missing, 404, 'account-not-found');
      expect(problemShape(foreign.body, [theirAccount])).to.deep.equal(problemShape(missing.body, [missingId]));
      // And nothing was proposed on their account.
      const theirs = await api(svc, 'GET', `/api/v1/accounts/${theirAccount}/approvals`, { key: other.keys.read });
      expect(theirs.body.data).to.have.length(0);
    });

    it('answers 401 without a key', async () => {
      const result = await api(svc, 'POST', targetPath(account, campaigns.cpa.id), { body: { target_cpa: 20, reason: 'x' } });
      expectProblem(result, 401, 'unauthorized');
    });
  });

  it('leaves the campaign target unchanged (a proposal is not a change)', async () => {
    const now = await campaignById(svc, tenant.keys.read, account, campaigns.cpa.id);
    expect(now.bidding_strategy.target_cpa).to.equal(campaigns.cpa.bidding_strategy.target_cpa);
  });
});
