import { expect } from 'chai';
import { ProposalService } from '../../src/policy/proposal-service.ts';
import { SandboxPlatform } from '../../src/platform/sandbox/sandbox-platform.ts';
import { ApprovalsAppliedChangeLookup } from '../../projections/approvals/applied-change-lookup.ts';
import { startRun, waitForTerminalRun } from '../support/runs.ts';
import { startTestService, type TestService, type TestTenant } from '../support/test-service.ts';
import { api, approvalOf, approvalsPath, campaignById, campaignsByStrategy, cents, expectProblem, listCampaigns, platformAccount, proposeTarget, waitForStatus } from './helpers.ts';

const WASTE_BRIEF = 'Find wasted spend on search terms without conversions and add negative keywords.';

type Keyword = { text: string; match_type: string };

/**
 * docs/api.md, "Edit, then approve": an approver changes a queued action in the approve request;
 * the policy classifies the edited version again, both versions are recorded, and the apply
 * worker applies exactly the edited version (read back from the sandbox platform itself).
 */
describe('safe-apply: edit, then approve', function () {
  this.timeout(90_000);
  let svc: TestService;
  let tenant: TestTenant;
  let account: string;
  let platform: SandboxPlatform;
  /** Queued negative-keyword actions of a real run, each with at least two keywords. */
  let negatives: any[];

  const approve = (actionId: string, body: unknown, key = tenant.keys.write) =>
    api(svc, 'POST', `${approvalsPath(account)}/${actionId}/approve`, { key, body });
  const negativesOn = async (campaignId: string) =>
    (await platform.listNegativeKeywords(await platformAccount(svc, tenant.workspaceId, account), campaignId)).map((k) => `${k.text}|${k.match_type}`);

  /** A budget proposal through the service's own proposal path (the agent's budget tool does the same). */
  const proposeBudget = async (campaignId: string, factor: number) => {
    const { infrastructure } = svc.service;
    const proposals = new ProposalService(infrastructure.commands, new ApprovalsAppliedChangeLookup(infrastructure.database.db), { platform });
    const campaign = await campaignById(svc, tenant.keys.read, account, campaignId);
    const next = cents(campaign.daily_budget * factor);
    return proposals.propose({
      workspaceId: tenant.workspaceId,
      accountId: account,
      runId: null,
      draft: { kind: 'set_campaign_budget', params: { campaign_id: campaign.id, daily_budget: next }, based_on: { campaign_status: campaign.status, daily_budget: campaign.daily_budget } },
      summary: `Change the daily budget of "${campaign.name}" from ${campaign.daily_budget} to ${next}`,
      reason: 'test',
      autoApply: false,
      meta: { actor: { kind: 'api_key', id: tenant.keyIds.admin }, correlationId: 'edit-test' },
    });
  };

  before(async () => {
    svc = await startTestService('sa-edit');
    tenant = await svc.tenant('edit');
    account = tenant.accounts.sandbox;
    platform = new SandboxPlatform(svc.service.infrastructure.database.db);
    const runId = await startRun(svc, tenant.keys.write, account, WASTE_BRIEF);
    const run = await waitForTerminalRun(svc, tenant.keys.read, runId, 30_000);
    expect(run.status, JSON.stringify(run.error)).to.equal('succeeded');
    const ids = (run.result.actions as { id: string }[]).map((a) => a.id);
    const actions = await Promise.all(ids.map((id) => approvalOf(svc, tenant.keys.read, account, id)));
    negatives = actions.filter((a) => a.kind === 'add_negative_keywords' && a.status === 'queued' && a.params.keywords.length >= 2);
    expect(negatives.length, 'the waste run proposes negative keyword actions with two keywords or more').to.be.at.least(3);
  });

  after(async () => {
    await svc?.stop();
  });

  it('applies exactly the edited negative keyword list: a keyword dropped, another re-matched', async () => {
    const action = negatives[0];
    const proposed = action.params.keywords as Keyword[];
    const campaignId = action.params.campaign_id as string;
    const kept: Keyword[] = proposed.slice(1).map((k, i) => (i === 0 ? { text: k.text, match_type: k.match_type === 'exact' ? 'phrase' : 'exact' } : k));
    const before = await negativesOn(campaignId);

    const approved = await approve(action.id, { note: 'dropped one', edit: { keywords: kept } });
    expect(approved.status, approved.text).to.equal(200);
    expect(approved.body.status).to.be.oneOf(['approved', 'applying', 'applied']);
    expect(approved.body.params).to.deep.equal({ campaign_id: campaignId, keywords: kept });
    expect(approved.body.summary).to.include(`${kept[0]!.text} (${kept[0]!.match_type})`);
    expect(approved.body.edited.by).to.deep.equal({ kind: 'api_key', id: tenant.keyIds.write });
    expect(approved.body.edited.original.params).to.deep.equal(action.params);
    expect(approved.body.edited.original.summary).to.equal(action.summary);
    expect(approved.body.policy_reasons.join(' ')).to.include('edited by an approver');

    await waitForStatus(svc, tenant.keys.read, account, action.id, 'applied');
    const added = (await negativesOn(campaignId)).filter((k) => !before.includes(k));
    expect(added).to.have.members(kept.map((k) => `${k.text}|${k.match_type}`));
    expect(added).to.have.length(kept.length);
    const dropped = proposed[0]!;
    expect(await negativesOn(campaignId)).to.not.include(`${dropped.text}|${dropped.match_type}`);
  });

  it('records ActionEdited with both versions in the history, before ActionApproved', async () => {
    const action = negatives[0];
    const history = await api(svc, 'GET', `/api/v1/accounts/${account}/history?limit=500`, { key: tenant.keys.read });
    expect(history.status, history.text).to.equal(200);
    const ofAction = (history.body.data as any[]).filter((e) => e.aggregate?.id === action.id).map((e) => e);
    const types = ofAction.map((e) => e.type);
    expect(types.indexOf('ActionEdited')).to.be.above(-1);
    expect(types.indexOf('ActionEdited')).to.be.below(types.indexOf('ActionApproved'));
    const edited = ofAction.find((e) => e.type === 'ActionEdited');
    expect(edited.data.before.params).to.deep.equal(action.params);
    expect(edited.data.after.params.keywords).to.have.length(action.params.keywords.length - 1);
    expect(edited.actor).to.deep.equal({ kind: 'api_key', id: tenant.keyIds.write });
  });

  it('refuses an edit that adds a keyword (422, saying what to send instead) and records nothing', async () => {
    const action = negatives[1];
    const edit = { keywords: [...action.params.keywords, { text: 'injected', match_type: 'broad' }] };
    const refused = await approve(action.id, { edit });
    expectProblem(refused, 422, 'validation-error');
    const message = JSON.stringify(refused.body);
    expect(message).to.include('injected').and.to.include('never add one').and.to.include('drop proposed keywords or change their match type');
    expect((await approvalOf(svc, tenant.keys.read, account, action.id)).status).to.equal('queued');
    expect((await approvalOf(svc, tenant.keys.read, account, action.id)).edited).to.equal(null);
  });

  it('refuses an edit of an action that is no longer queued (409)', async () => {
    const action = negatives[2];
    expect((await approve(action.id, {})).status).to.equal(200);
    const refused = await approve(action.id, { edit: { keywords: action.params.keywords.slice(1) } });
    expectProblem(refused, 409, 'action-not-in-queue');
  });

  it('refuses edits of the wrong shape with plain words (422)', async () => {
    const action = negatives[1];
    for (const edit of [{}, { daily_budget: 10 }, { keywords: [{ text: 'x' }] }, { keywords: action.params.keywords, daily_budget: 3 }, { nope: 1 }]) {
      const refused = await approve(action.id, { edit });
      expectProblem(refused, 422, 'validation-error');
      expect(refused.body.errors.length, JSON.stringify(edit)).to.be.above(0);
    }
    expect((await approvalOf(svc, tenant.keys.read, account, action.id)).status).to.equal('queued');
  });

  it('classifies an edited budget again: a riskier value is recorded as review, one the policy blocks is refused, and the edited value is applied', async () => {
    const enabled = (await listCampaigns(svc, tenant.keys.read, account)).find((c) => c.status === 'enabled')!;
    const small = await proposeBudget(enabled.id, 1.1);
    const other = await proposeBudget(enabled.id, 1.05);
    expect(small.risk_tier).to.equal('safe');
    expect(small.disposition).to.equal('queued');

    const blocked = await approve(other.id, { edit: { daily_budget: cents(enabled.daily_budget * 3) } });
    expectProblem(blocked, 422, 'validation-error');
    expect(JSON.stringify(blocked.body)).to.include('blocked by policy');
    expect((await approvalOf(svc, tenant.keys.read, account, other.id)).status).to.equal('queued');

    const riskier = cents(enabled.daily_budget * 1.5);
    const approved = await approve(small.id, { edit: { daily_budget: riskier } });
    expect(approved.status, approved.text).to.equal(200);
    expect(approved.body.risk_tier).to.equal('review');
    // The apply worker may already have claimed it by the time the response is read.
    expect(approved.body.status).to.be.oneOf(['approved', 'applying', 'applied']);
    expect(approved.body.policy_reasons.join(' ')).to.include('exceeds the safe');
    expect(approved.body.edited.original).to.include({ risk_tier: 'safe' });
    expect(approved.body.edited.original.params.daily_budget).to.equal(cents(enabled.daily_budget * 1.1));

    await waitForStatus(svc, tenant.keys.read, account, small.id, 'applied');
    expect((await campaignById(svc, tenant.keys.read, account, enabled.id)).daily_budget).to.equal(riskier);
  });

  it('applies an edited target CPA, kept to cents, and of an edit racing a plain approval exactly one wins', async () => {
    const { cpa } = await campaignsByStrategy(svc, tenant.keys.read, tenant.accounts.sandbox2);
    const current = cpa.bidding_strategy.target_cpa!;
    const propose = () => proposeTarget(svc, tenant.keys.write, tenant.accounts.sandbox2, cpa.id, { target_cpa: cents(current * 1.05) });
    const [first, second] = [await propose(), await propose()];
    const approveOn = (actionId: string, body: unknown) => api(svc, 'POST', `${approvalsPath(tenant.accounts.sandbox2)}/${actionId}/approve`, { key: tenant.keys.write, body });

    const raced = await Promise.all([approveOn(second.id, { edit: { target_cpa: cents(current * 1.02) } }), approveOn(second.id, {})]);
    expect(raced.map((r) => r.status).sort()).to.deep.equal([200, 409]);
    // Applied first, so the next edit is measured against the target it left.
    await waitForStatus(svc, tenant.keys.read, tenant.accounts.sandbox2, second.id, 'applied');

    const edited = await approveOn(first.id, { edit: { target_cpa: current * 1.08 + 0.004 } });
    expect(edited.status, edited.text).to.equal(200);
    expect(edited.body.params.target_cpa).to.equal(cents(current * 1.08 + 0.004));
    expect(edited.body.edited.original.params.target_cpa).to.equal(cents(current * 1.05));
    await waitForStatus(svc, tenant.keys.read, tenant.accounts.sandbox2, first.id, 'applied');
  });
});
