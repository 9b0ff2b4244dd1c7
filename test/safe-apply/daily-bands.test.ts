import { expect } from 'chai';
import { ValidationError } from '../../src/errors/common-errors.ts';
import type { Campaign } from '../../src/platform/ads-platform.ts';
import type { ActionDraft } from '../../src/policy/action-draft.ts';
import { negativeKeywordBasis } from '../../src/policy/negative-keyword-basis.ts';
import { utcDay } from '../../src/policy/policy-context.ts';
import type { ActionRepresentation } from '../../src/policy/proposal-service.ts';
import { last30Days } from '../../src/agent/tools/date-range.ts';
import { clockedProposals, type CampaignFixture } from './clocked-proposals.ts';
import { api, approvalsPath, cents, waitForStatus } from './helpers.ts';
import { loadAction, loadQuota } from '../../commands/queries.ts';
import { v7 as uuidv7 } from 'uuid';
import { accountDecider } from '../../commands/account/account-decider.ts';
import type { Commands } from '../../commands/command-bus.ts';
import { ProposalService } from '../../src/policy/proposal-service.ts';
import { ApprovalsAppliedChangeLookup } from '../../projections/approvals/applied-change-lookup.ts';

const DAY_MS = 86_400_000;

/**
 * docs/policy.md, "Bands that hold for a day", "Learning period" and "Daily spend-share cap":
 * proposals go through a ProposalService whose clock the test moves, against real NATS
 * (the day's quota aggregate) and Postgres (sandbox platform, approvals read model).
 */
describe('safe-apply: bands that hold for a day, learning period, daily spend-share cap', function () {
  this.timeout(60_000);
  const clock = clockedProposals('sa-bands', 'daily-bands');
  type Fixture = CampaignFixture;
  const fixture = (name: string) => clock.fixture(name);
  const propose = (f: Fixture, draft: ActionDraft, autoApply?: boolean) => clock.propose(f, draft, autoApply);
  const liveCampaign = (f: Fixture) => clock.live(f);
  const startApplyWorker = (concurrency?: number) => clock.startApplyWorker(concurrency === undefined ? {} : { concurrency });
  const targetDraft = (campaign: Campaign, next: number, current = campaign.bidding_strategy.target_cpa!): ActionDraft => ({
    kind: 'set_target_cpa',
    params: { campaign_id: campaign.id, target_cpa: next },
    based_on: { campaign_status: campaign.status, strategy_type: campaign.bidding_strategy.type, portfolio_id: null, campaigns_affected: 1, target_cpa: current },
  });
  const budgetDraft = (campaign: Campaign, current: number, next: number): ActionDraft => ({
    kind: 'set_campaign_budget',
    params: { campaign_id: campaign.id, daily_budget: next },
    based_on: { campaign_status: campaign.status, daily_budget: current },
  });
  const quotaOf = async (f: Fixture, day: string) => {
    const { aggregates } = clock.svc.service.infrastructure;
    return (await loadQuota(aggregates, f.tenant.workspaceId, f.tenant.accounts.sandbox, day)).state;
  };
  const reasons = (action: ActionRepresentation) => action.policy_reasons.join(' | ');

  it('two consecutive +8 % target changes on one day: the first auto_applied, the second not; the next UTC day safe again', async () => {
    const f = await fixture('bands-target');
    const start = f.cpa.bidding_strategy.target_cpa!;
    const first = await propose(f, targetDraft(f.cpa, cents(start * 1.08)));
    expect(first.risk_tier).to.equal('safe');
    expect(first.disposition, reasons(first)).to.equal('auto_applied');

    // The first change is live on the platform (the apply worker made the call and has not
    // recorded ActionApplied yet, so the learning period cannot see it): the day band must.
    await clock.platform.applyChange(f.account, { kind: 'set_target_cpa', campaign_id: f.cpa.id, target_cpa: cents(start * 1.08) });
    const live = (await liveCampaign(f)).bidding_strategy.target_cpa!;
    expect(live).to.equal(cents(start * 1.08));

    const second = await propose(f, targetDraft(await liveCampaign(f), cents(live * 1.08)));
    expect(second.risk_tier).to.equal('review');
    expect(second.disposition).to.equal('queued');
    expect(reasons(second)).to.include('target CPA change of 8.0% is within the safe ±10.0%');
    expect(reasons(second)).to.include(`measured from today's first target CPA ${start} (UTC day)`);
    const day1 = await quotaOf(f, utcDay(new Date(clock.at)));
    expect(day1.actionIds).to.deep.equal([first.id]);
    expect(Object.values(day1.bands)).to.deep.equal([{ baseline: start, value: cents(start * 1.08) }]);

    // The next UTC day starts a new band, from the value live then.
    clock.at += DAY_MS;
    const nextDay = await propose(f, targetDraft(await liveCampaign(f), cents(live * 1.08)));
    expect(nextDay.risk_tier, reasons(nextDay)).to.equal('safe');
    expect(nextDay.disposition).to.equal('auto_applied');
    expect(Object.values((await quotaOf(f, utcDay(new Date(clock.at)))).bands)).to.deep.equal([{ baseline: live, value: cents(live * 1.08) }]);
  });

  it('budget: +5 % steps from different observed values, 10 concurrent: one baseline, and only steps inside ±20 % of it are auto_applied', async () => {
    const f = await fixture('bands-budget');
    const base = f.cpa.daily_budget;
    // As if each proposer saw the budget after k earlier steps went live.
    const drafts = Array.from({ length: 10 }, (_, k) => {
      const seen = cents(base * 1.05 ** k);
      return budgetDraft(f.cpa, seen, cents(seen * 1.05));
    });
    const results = await Promise.all(drafts.map((draft) => propose(f, draft)));
    for (const result of results) expect(result.risk_tier).to.not.equal('blocked');

    const quota = await quotaOf(f, utcDay(new Date(clock.at)));
    const bands = Object.values(quota.bands);
    expect(bands).to.have.length(1);
    const { baseline } = bands[0]!;
    // Whichever proposal won the race recorded the baseline; every later one was measured from it.
    const inBand = drafts.filter((d) => Math.abs(((d.params as { daily_budget: number }).daily_budget - baseline) / baseline) <= 0.2 + 1e-9);
    const auto = results.filter((r) => r.disposition === 'auto_applied');
    expect(auto).to.have.length(inBand.length);
    expect(quota.actionIds).to.have.members(auto.map((a) => a.id));
    const autoValues = auto.map((a) => (drafts[results.indexOf(a)]!.params as { daily_budget: number }).daily_budget);
    for (const value of autoValues) expect(Math.abs(value - baseline) / baseline).to.be.at.most(0.2 + 1e-9);
    for (const refused of results.filter((r) => r.disposition !== 'auto_applied')) {
      expect(refused.risk_tier).to.equal('review');
      expect(reasons(refused)).to.match(/first (value|daily_budget|budget)/);
    }
  });

  it('budget, sequential small steps that go live: they stop at the band (4 of +5 % would be +21.6 %)', async () => {
    const f = await fixture('bands-steps');
    const base = f.cpa.daily_budget;
    const outcomes: string[] = [];
    for (let step = 0; step < 5; step++) {
      const seen = (await liveCampaign(f)).daily_budget;
      const action = await propose(f, budgetDraft(f.cpa, seen, cents(seen * 1.05)));
      outcomes.push(action.disposition);
      // Made live at once (no ActionApplied recorded: only the day band holds them).
      if (action.disposition === 'auto_applied') await clock.platform.applyChange(f.account, { kind: 'set_campaign_budget', campaign_id: f.cpa.id, daily_budget: cents(seen * 1.05) });
    }
    expect(outcomes).to.deep.equal(['auto_applied', 'auto_applied', 'auto_applied', 'queued', 'queued']);
    expect((await liveCampaign(f)).daily_budget / base).to.be.at.most(1.2);
  });

  it('learning period: a budget or target change within 7 days of an applied one is review with the reason; after 7 days safe again', async () => {
    const f = await fixture('bands-learning');
    await startApplyWorker();
    const start = f.cpa.bidding_strategy.target_cpa!;
    const first = await propose(f, targetDraft(f.cpa, cents(start * 1.05)));
    expect(first.disposition).to.equal('auto_applied');
    await waitForStatus(clock.svc, f.tenant.keys.read, f.tenant.accounts.sandbox, first.id, 'applied');

    clock.at += 2 * DAY_MS;
    const budget = await propose(f, budgetDraft(await liveCampaign(f), f.cpa.daily_budget, cents(f.cpa.daily_budget * 1.05)));
    expect(budget.risk_tier).to.equal('review');
    expect(budget.disposition).to.equal('queued');
    expect(reasons(budget)).to.include(`learning period: this service changed the campaign's target CPA`);
    expect(reasons(budget)).to.include(`(action ${first.id})`);
    const target = await propose(f, targetDraft(await liveCampaign(f), cents(start * 1.05 * 1.02)));
    expect(target.risk_tier).to.equal('review');

    clock.at += 6 * DAY_MS; // 8 days after the applied change
    const later = await propose(f, budgetDraft(await liveCampaign(f), f.cpa.daily_budget, cents(f.cpa.daily_budget * 1.05)));
    expect(later.risk_tier, reasons(later)).to.equal('safe');
    expect(later.disposition).to.equal('auto_applied');
  });

  it('learning period through a portfolio: after an approved target change of a portfolio strategy, a budget change of another campaign on it is review', async () => {
    const f = await fixture('bands-portfolio');
    await startApplyWorker();
    const all = await clock.platform.listCampaigns(f.account);
    const a = all.find((c) => c.status === 'enabled' && c.bidding_strategy.portfolio !== null && c.bidding_strategy.target_cpa !== null)!;
    const portfolio = a.bidding_strategy.portfolio!;
    const b = all.find((c) => c.id !== a.id && c.status === 'enabled' && portfolio.campaign_ids.includes(c.id))!;
    expect(b, 'a second enabled campaign on the portfolio').to.not.equal(undefined);
    const start = a.bidding_strategy.target_cpa!;
    const portfolioChange = await propose(
      f,
      {
        kind: 'set_target_cpa',
        params: { campaign_id: a.id, target_cpa: cents(start * 1.3) },
        based_on: { campaign_status: a.status, strategy_type: a.bidding_strategy.type, portfolio_id: portfolio.id, campaigns_affected: portfolio.campaign_ids.length, target_cpa: start },
      },
      false,
    );
    const approved = await api(clock.svc, 'POST', `${approvalsPath(f.tenant.accounts.sandbox)}/${portfolioChange.id}/approve`, { key: f.tenant.keys.admin });
    expect(approved.status).to.equal(200);
    await waitForStatus(clock.svc, f.tenant.keys.read, f.tenant.accounts.sandbox, portfolioChange.id, 'applied');

    clock.at += DAY_MS;
    const bNow = (await clock.platform.getCampaign(f.account, b.id))!;
    const budget = await propose(f, budgetDraft(bNow, bNow.daily_budget, cents(bNow.daily_budget * 1.1)));
    expect(budget.risk_tier, reasons(budget)).to.equal('review');
    expect(budget.disposition).to.equal('queued');
    expect(reasons(budget)).to.include(`learning period: this service changed the target CPA of portfolio strategy ${portfolio.id}, which the campaign bids on`);
    expect(reasons(budget)).to.include(`(action ${portfolioChange.id})`);
    // A campaign of the account that is not on the portfolio is not held by it.
    const other = all.find((c) => c.status === 'enabled' && c.bidding_strategy.portfolio === null && c.id !== a.id)!;
    const unrelated = await propose(f, budgetDraft(other, other.daily_budget, cents(other.daily_budget * 1.1)));
    expect(reasons(unrelated)).to.not.include('learning period');
  });

  it('a run whose time runs out while its auto-apply slot is reserved: the slot belongs to a recorded action, never to none', async () => {
    const f = await fixture('bands-slot-stop');
    const infra = clock.svc.service.infrastructure;
    const runId = uuidv7();
    const workerId = 'w-slot';
    const meta = { actor: { kind: 'worker' as const, id: workerId }, correlationId: runId };
    const ids = { workspaceId: f.tenant.workspaceId, accountId: f.tenant.accounts.sandbox };
    await infra.commands.handle(accountDecider, { type: 'StartRun', ...ids, runId, brief: 'b', autoApply: true, keyId: f.tenant.keyIds.write, scope: 'write', meta });
    await infra.commands.handle(accountDecider, { type: 'ClaimRun', ...ids, runId, workerId, agent: { kind: 'rules', model: 'x' }, meta });
    const timeUp = new AbortController();
    // The wall clock fires while the reservation's append is in flight.
    const commands = new Proxy(infra.commands, {
      get(target, property, receiver) {
        const value = Reflect.get(target, property, receiver);
        if (property !== 'handle') return value;
        return async (...args: Parameters<Commands['handle']>) => {
          const result = await (value as Commands['handle']).apply(target, args);
          if ((args[1] as { type: string }).type === 'ReserveAutoApplySlot') timeUp.abort();
          return result;
        };
      },
    }) as Commands;
    const proposals = new ProposalService(commands, new ApprovalsAppliedChangeLookup(infra.database.db), { platform: clock.platform, clock: () => new Date(clock.at) });
    const actionId = uuidv7();
    const action = await proposals.propose({
      ...ids,
      runId,
      run: { keyId: f.tenant.keyIds.write, workerId, signal: timeUp.signal },
      actionId,
      draft: budgetDraft(f.cpa, f.cpa.daily_budget, cents(f.cpa.daily_budget * 1.05)),
      summary: 'budget +5 %',
      reason: 'r',
      autoApply: true,
      meta,
    });
    expect(action.disposition).to.equal('auto_applied');
    expect((await quotaOf(f, utcDay(new Date(clock.at)))).actionIds).to.deep.equal([actionId]);
    expect((await loadAction(infra.aggregates, ids.workspaceId, ids.accountId, actionId)).state.exists).to.equal(true);
  });

  it('negatives and pauses: of 10 concurrent auto-applied negatives touching 3 % of spend each, exactly 3 fit the daily 10 % cap', async () => {
    const f = await fixture('bands-spend');
    const draft = (i: number): ActionDraft => ({
      kind: 'add_negative_keywords',
      params: { campaign_id: f.cpa.id, keywords: [{ text: `zzqx${i}`, match_type: 'phrase' }] },
      based_on: { campaign_status: 'enabled', matched_cost_30d: 300, matched_conversions_30d: 0, account_cost_30d: 10_000, blocked_keywords: [] },
    });
    const results = await Promise.all(Array.from({ length: 10 }, (_, i) => propose(f, draft(i))));
    for (const result of results) expect(result.risk_tier).to.equal('safe');
    expect(results.filter((r) => r.disposition === 'auto_applied')).to.have.length(3);
    const queued = results.filter((r) => r.disposition === 'queued');
    expect(queued).to.have.length(7);
    for (const result of queued) expect(reasons(result)).to.include('would exceed the daily cap of 10.0%');
    expect((await quotaOf(f, utcDay(new Date(clock.at)))).spendShare).to.be.closeTo(0.09, 1e-9);
  });

  it('re-classification at apply time: a matched search term converted since the proposal → returned with the reason', async () => {
    const f = await fixture('bands-reclassify');
    const keywords = [{ text: 'zzqx tent', match_type: 'phrase' as const }];
    const basis = await negativeKeywordBasis(clock.platform, f.account, f.cpa, keywords, last30Days(new Date()));
    expect(basis.matched_conversions_30d).to.equal(0);
    const action = await propose(f, { kind: 'add_negative_keywords', params: { campaign_id: f.cpa.id, keywords }, based_on: basis });
    expect(action.disposition, reasons(action)).to.equal('auto_applied');

    // Before the worker runs, a search term the negative would block converts.
    const keyword = (await clock.platform.listKeywords(f.account, last30Days(new Date()), f.cpa.id))[0]!;
    await clock.svc.service.infrastructure.database.db
      .insertInto('sandbox_search_term_daily')
      .values({
        account_id: f.tenant.accounts.sandbox,
        day: last30Days(new Date()).to,
        search_term: 'zzqx tent sale',
        campaign_id: f.cpa.id,
        ad_group_id: keyword.ad_group_id,
        keyword_id: keyword.id,
        impressions: 40,
        clicks: 4,
        cost: '12.00',
        conversions: '2',
        conversion_value: '90.00',
      } as never)
      .execute();

    await startApplyWorker();
    const returned = await waitForStatus(clock.svc, f.tenant.keys.read, f.tenant.accounts.sandbox, action.id, 'returned');
    expect(returned.status_reason).to.include('no longer safe at apply time (review)');
    expect(returned.status_reason).to.include('1 matching search term(s) had conversions in 30 days (net 2)');
    expect((await clock.platform.listNegativeKeywords(f.account, f.cpa.id)).map((n) => n.text)).to.not.include('zzqx tent');
  });

  it('re-classification at apply time: a change to the campaign that went live first puts the auto-applied one in its learning period → returned', async () => {
    const f = await fixture('bands-apply-learning');
    // B: a +30 % budget change (review) that a person approves; not live yet (no worker).
    const budget = await propose(f, budgetDraft(f.cpa, f.cpa.daily_budget, cents(f.cpa.daily_budget * 1.3)), false);
    expect(budget.disposition).to.equal('queued');
    const approved = await api(clock.svc, 'POST', `${approvalsPath(f.tenant.accounts.sandbox)}/${budget.id}/approve`, { key: f.tenant.keys.admin, body: {} });
    expect(approved.status, approved.text).to.equal(200);
    // A: a +5 % target change, safe and auto-applied: nothing was applied to the campaign yet.
    const target = await propose(f, targetDraft(f.cpa, cents(f.cpa.bidding_strategy.target_cpa! * 1.05)));
    expect(target.disposition, reasons(target)).to.equal('auto_applied');

    // One message at a time, in stream order: B goes live first, then A is classified again.
    await startApplyWorker(1);
    await waitForStatus(clock.svc, f.tenant.keys.read, f.tenant.accounts.sandbox, budget.id, 'applied');
    const returned = await waitForStatus(clock.svc, f.tenant.keys.read, f.tenant.accounts.sandbox, target.id, 'returned');
    expect(returned.status_reason).to.include('no longer safe at apply time (review)');
    expect(returned.status_reason).to.include(`learning period: this service changed the campaign's budget`);
    expect(returned.status_reason).to.include(`(action ${budget.id})`);
    expect((await liveCampaign(f)).bidding_strategy.target_cpa).to.equal(f.cpa.bidding_strategy.target_cpa);
  });

  it('a proposal that cannot be recorded is refused before it takes an auto-apply slot', async () => {
    const f = await fixture('bands-validation');
    let refused: unknown;
    try {
      await clock.proposals.propose({
        workspaceId: f.tenant.workspaceId,
        accountId: f.tenant.accounts.sandbox,
        runId: null,
        draft: targetDraft(f.cpa, cents(f.cpa.bidding_strategy.target_cpa! * 1.02)),
        summary: 'too long a reason',
        reason: 'x'.repeat(2001),
        autoApply: true,
        meta: { actor: { kind: 'api_key', id: f.tenant.keyIds.write }, correlationId: 'daily-bands' },
      });
    } catch (error) {
      refused = error;
    }
    expect(refused).to.be.instanceOf(ValidationError);
    expect((refused as ValidationError).kind).to.equal('validation');
    expect((await quotaOf(f, utcDay(new Date(clock.at)))).actionIds).to.deep.equal([]);
  });
});
