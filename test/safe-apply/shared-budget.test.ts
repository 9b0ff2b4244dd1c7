import { expect } from 'chai';
import { createLogger } from '../../src/log/logger.ts';
import { createWorkspace, issueKey } from '../../src/operator/operator-commands.ts';
import type { AdsPlatform, PlatformAccountRef } from '../../src/platform/ads-platform.ts';
import { createPlatform } from '../../src/platform/create-platform.ts';
import type { ActionDraftOf } from '../../src/policy/action-draft.ts';
import { ProposalService } from '../../src/policy/proposal-service.ts';
import { setCampaignBudget } from '../../src/agent/tools/propose-tools.ts';
import { targetChangeDraft } from '../../src/policy/target-change-draft.ts';
import { approveAction } from '../../commands/action/approve-action.ts';
import { ApplyWorker } from '../../src/workers/apply-worker.ts';
import { recheckAction } from '../../src/workers/apply-recheck.ts';
import { actionFold, type ActionState } from '../../commands/action/action-state.ts';
import { ApprovalsAppliedChangeLookup } from '../../projections/approvals/applied-change-lookup.ts';
import { FakeGoogleAds } from '../support/fake-google-ads/fake-google-ads-server.ts';
import type { FakeAccount } from '../support/fake-google-ads/fake-account.ts';
import { connectFakeAccount, googleAdsEnv } from '../support/google-ads.ts';
import { startTestService, type TestService } from '../support/test-service.ts';
import { api, cents, waitForStatus } from './helpers.ts';

const CUSTOMER = '1234567890';

/**
 * docs/policy.md, "Shared budgets": a budget change is written to the campaign's budget, and a
 * shared budget moves every campaign on it, while the day band, the one-setting-per-day rule
 * and the learning period count per campaign. So a change on a shared budget is never
 * auto-applied: it waits for a person, and the apply worker returns one whose budget became
 * shared after the proposal. Against the local fake of the Google Ads REST API.
 */
describe('safe-apply: shared campaign budgets (Google Ads)', function () {
  this.timeout(90_000);
  const fake = new FakeGoogleAds({ managerId: '1112223333' });
  let svc: TestService;
  let platform: AdsPlatform;
  let proposals: ProposalService;
  let worker: ApplyWorker | undefined;
  let workspaceId: string;
  let accountId: string;
  let ref: PlatformAccountRef;
  let keys: { read: string; write: string };
  let customer: FakeAccount;

  before(async () => {
    await fake.start();
    // No apply worker in the service: the tests start one when they want changes to go live.
    svc = await startTestService('sa-shared-budget', { ROLES: 'http,projectors', ...googleAdsEnv(fake) });
    const infra = svc.service.infrastructure;
    workspaceId = (await createWorkspace(infra, 'shared budgets')).value.id;
    keys = { read: (await issueKey(infra, workspaceId, 'read')).value.key, write: (await issueKey(infra, workspaceId, 'write')).value.id };
    ({ accountId, ref } = await connectFakeAccount(infra, fake, workspaceId, { loginCustomerId: '111-222-3333' }));
    customer = fake.accounts.get(CUSTOMER)!;
    platform = createPlatform(infra.database.db, svc.config);
    proposals = new ProposalService(infra.commands, new ApprovalsAppliedChangeLookup(infra.database.db), { platform });
  });
  afterEach(async () => {
    await worker?.stop();
    worker = undefined;
  });
  after(async () => {
    await svc?.stop();
    await fake.stop();
  });

  const budgetOf = (budgetId: string) => customer.budgets.get(budgetId)!.amountMicros / 1e6;
  /** Budget writes that went live (a proposal's dry run is sent with validateOnly and changes nothing). */
  const budgetWrites = () => fake.mutates('campaignBudgets').filter((r) => (r.body as { validateOnly?: boolean }).validateOnly !== true);
  const startWorker = async () => {
    worker = new ApplyWorker({ infrastructure: svc.service.infrastructure, platform, logger: createLogger('silent') });
    await worker.start();
  };

  /** A +`step` budget change with auto-apply, drafted as the agent's set_campaign_budget tool does (it does not read the budget's sharing). */
  async function raiseBudget(campaignId: string, step: number) {
    const campaign = (await platform.getCampaign(ref, campaignId))!;
    const draft: ActionDraftOf<'set_campaign_budget'> = {
      kind: 'set_campaign_budget',
      params: { campaign_id: campaign.id, daily_budget: cents(campaign.daily_budget * (1 + step)) },
      based_on: { campaign_status: campaign.status, daily_budget: campaign.daily_budget },
    };
    return proposals.propose({
      workspaceId,
      accountId,
      runId: null,
      draft,
      summary: `Change the daily budget of "${campaign.name}"`,
      reason: 'budget-limited',
      autoApply: true,
      meta: { actor: { kind: 'api_key', id: keys.write }, correlationId: 'shared-budget' },
    });
  }

  it('a currency without minor units: a target CPA of 27.5 yen is proposed and classified as the 28 Google will apply (+12 %, review), not +10 % safe', async () => {
    customer.currencyCode = 'JPY';
    try {
      // A platform of its own: an adapter remembers a customer's currency (it never changes on Google Ads).
      const yen = createPlatform(svc.service.infrastructure.database.db, svc.config);
      const boots = (await yen.getCampaign(ref, '111'))!;
      expect(boots.bidding_strategy.target_cpa).to.equal(25);
      const change = targetChangeDraft(boots, { field: 'target_cpa', value: 27.5 });
      if (!change.ok) throw new Error('campaign 111 takes no target CPA');
      const action = await new ProposalService(svc.service.infrastructure.commands, new ApprovalsAppliedChangeLookup(svc.service.infrastructure.database.db), { platform: yen }).propose({
        workspaceId,
        accountId,
        runId: null,
        draft: change.draft,
        summary: change.summary,
        reason: 'a tenth more',
        autoApply: true,
        meta: { actor: { kind: 'api_key', id: keys.write }, correlationId: 'shared-budget' },
      });
      const listed = await waitForStatus(svc, keys.read, accountId, action.id, 'queued');
      expect(listed.params).to.deep.include({ target_cpa: 28 });
      expect(action.summary).to.equal('Change the target CPA of "Hiking boots - Search" from 25 to 28');
      expect(action).to.include({ risk_tier: 'review', disposition: 'queued' });
      expect(action.policy_reasons.join(' | ')).to.include('target CPA change of 12.0%');
    } finally {
      customer.currencyCode = 'EUR';
    }
  });

  it('two campaigns on one shared budget: each +20 % step waits for review with the reason, and the budget does not move', async () => {
    // Given campaigns 111 and 666 draw on budget 501 (Google lets only a shared budget do that).
    customer.campaigns.get('666')!.budgetId = '501';
    try {
      const listed = await api(svc, 'GET', `/api/v1/accounts/${accountId}/campaigns`, { key: keys.read });
      expect(listed.status, listed.text).to.equal(200);
      const shown = new Map((listed.body.data as { id: string; shared_budget: unknown }[]).map((c) => [c.id, c.shared_budget]));
      expect(shown.get('111')).to.deep.equal({ id: '501', campaign_ids: ['111', '666'] });
      expect(shown.get('222')).to.equal(null);
      await startWorker();

      // When a "safe" +20 % step is proposed with auto-apply on each of them, the same UTC day,
      const first = await raiseBudget('111', 0.2);
      const second = await raiseBudget('666', 0.2);

      // Then neither is auto-applied: both wait in the queue, saying why.
      for (const action of [first, second]) {
        expect(action).to.include({ risk_tier: 'review', disposition: 'queued' });
        expect(action.policy_reasons.join(' | ')).to.include("the campaign's budget 501 is a shared budget (campaigns 111, 666): the change moves every campaign on it");
        const queued = await waitForStatus(svc, keys.read, accountId, action.id, 'queued');
        expect(queued.risk_tier).to.equal('review');
        expect(queued.policy_reasons.join(' | ')).to.include('is a shared budget');
      }
      // And nothing changed on Google Ads.
      await new Promise((resolve) => setTimeout(resolve, 500));
      expect(budgetWrites()).to.deep.equal([]);
      expect(budgetOf('501')).to.equal(50);
    } finally {
      customer.campaigns.get('666')!.budgetId = '506';
    }
  });

  it("the agent's budget tool reads the account's campaigns once for the policy, and the shared budget it read still puts the change in review", async () => {
    customer.campaigns.get('666')!.budgetId = '501';
    try {
      // Every campaign of the account and its portfolios: what one getCampaign costs on Google Ads.
      const campaignListReads = () => fake.apiRequests().filter((r) => JSON.stringify(r.body).includes("FROM campaign WHERE campaign.status != 'REMOVED' ORDER BY campaign.id")).length;
      const before = campaignListReads();
      const signal = new AbortController().signal;
      const { action } = (await setCampaignBudget.run(
        { campaign_id: '666', daily_budget: 60, reason: 'budget-limited' },
        {
          platform,
          account: ref,
          today: new Date(),
          signal,
          // As the run executor does: the campaign the tool read goes with its draft.
          propose: (draft, summary, reason, campaign) =>
            proposals.propose({ workspaceId, accountId, runId: null, draft, summary, reason, autoApply: true, meta: { actor: { kind: 'api_key', id: keys.write }, correlationId: 'one-read' }, ...(campaign ? { campaign } : {}) }),
        },
      )) as { action: { risk_tier: string; disposition: string; policy_reasons: string[] } };
      // The tool's own read, and the dry run's (validateOnly needs the budget's resource name);
      // the policy takes the tool's campaign instead of a third read.
      expect(campaignListReads() - before, 'campaign list reads for one budget proposal').to.equal(2);
      expect(action).to.include({ risk_tier: 'review', disposition: 'queued' });
      expect(action.policy_reasons.join(' | ')).to.include("the campaign's budget 501 is a shared budget (campaigns 111, 666)");

      // A proposal without the campaign (or with another one) reads it, as before.
      const again = campaignListReads();
      await raiseBudget('111', 0.1);
      expect(campaignListReads() - again, 'the test helper, the policy and the dry run').to.equal(3);
    } finally {
      customer.campaigns.get('666')!.budgetId = '506';
    }
  });

  it('a budget that became shared after an auto-applied proposal: the apply worker returns the change, and the budget does not move', async () => {
    // Given a +10 % step on campaign 222's own budget 502, auto-applied while no worker runs,
    const action = await raiseBudget('222', 0.1);
    expect(action).to.include({ risk_tier: 'safe', disposition: 'auto_applied' });
    // When campaign 666 joins budget 502 (now a shared budget) before the change goes live,
    customer.campaigns.get('666')!.budgetId = '502';
    try {
      await startWorker();

      // Then the worker's re-check sends it back to the queue with the reason,
      const returned = await waitForStatus(svc, keys.read, accountId, action.id, 'returned', 30_000);
      expect(returned.status_reason).to.include("the campaign's budget became shared budget 502 (campaigns 222, 666) since the proposal");
      // and nothing changed on Google Ads.
      expect(budgetWrites()).to.deep.equal([]);
      expect(budgetOf('502')).to.equal(80);
    } finally {
      customer.campaigns.get('666')!.budgetId = '506';
    }
  });

  it('learning period through a shared budget: after an approved change of budget 501 through campaign 111, a target change of campaign 666 on it is review', async () => {
    customer.campaigns.get('666')!.budgetId = '501';
    try {
      const budgetChange = await raiseBudget('111', 0.1);
      expect(budgetChange).to.include({ risk_tier: 'review', disposition: 'queued' });
      await approveAction(svc.service.infrastructure.commands, {
        workspaceId,
        accountId,
        actionId: budgetChange.id,
        note: 'both campaigns need it',
        meta: { actor: { kind: 'operator', id: 'approver' }, correlationId: 'shared-budget' },
      });
      await startWorker();
      await waitForStatus(svc, keys.read, accountId, budgetChange.id, 'applied', 30_000);

      const bags = (await platform.getCampaign(ref, '666'))!;
      const change = targetChangeDraft(bags, { field: 'target_cpa', value: cents(bags.bidding_strategy.target_cpa! * 1.05) });
      if (!change.ok) throw new Error('campaign 666 takes no target CPA');
      const target = await proposals.propose({
        workspaceId,
        accountId,
        runId: null,
        draft: change.draft,
        summary: change.summary,
        reason: 'learning period check',
        autoApply: true,
        meta: { actor: { kind: 'api_key', id: keys.write }, correlationId: 'shared-budget' },
      });
      expect(target, target.policy_reasons.join(' | ')).to.include({ risk_tier: 'review', disposition: 'queued' });
      expect(target.policy_reasons.join(' | ')).to.include(`learning period: this service changed shared budget 501, which the campaign draws on`).and.include(`(action ${budgetChange.id})`);
    } finally {
      customer.campaigns.get('666')!.budgetId = '506';
    }
  });

  it('an approved change on a shared budget: applied as approved, returned when more campaigns joined the budget since', async () => {
    // Given a person approved a +10 % step on budget 501 while campaigns 111 and 666 shared it,
    customer.campaigns.get('666')!.budgetId = '501';
    try {
      const basedOn = { campaign_status: 'enabled', daily_budget: 50, shared_budget: { id: '501', campaign_ids: ['111', '666'] } };
      const approved: ActionState = {
        ...actionFold.initialState(),
        exists: true,
        kind: 'set_campaign_budget',
        riskTier: 'review',
        status: 'approved',
        params: { campaign_id: '111', daily_budget: 55 },
        basedOn,
      };
      // Then the re-check lets it through while the budget is as the approver saw it,
      expect(await recheckAction(platform, ref, approved)).to.deep.equal({ ok: true, change: { kind: 'set_campaign_budget', campaign_id: '111', daily_budget: 55 } });
      // but not once campaign 222 joined budget 501 too, nor for a proposal that saw a budget of the campaign's own.
      customer.campaigns.get('222')!.budgetId = '501';
      expect(await recheckAction(platform, ref, approved)).to.deep.equal({ ok: false, reason: 'campaigns 222 joined the shared budget 501 since the proposal: the change would move them too' });
      const ownWhenProposed = { ...approved, basedOn: { ...basedOn, shared_budget: null } };
      expect(await recheckAction(platform, ref, ownWhenProposed)).to.deep.include({ ok: false });
    } finally {
      customer.campaigns.get('666')!.budgetId = '506';
      customer.campaigns.get('222')!.budgetId = '502';
    }
  });
});
