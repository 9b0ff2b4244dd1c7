import { expect } from 'chai';
import type { SharedBudget } from '../../src/platform/ads-platform.ts';
import type { ActionDraft } from '../../src/policy/action-draft.ts';
import { classifyAction } from '../../src/policy/classify-action.ts';

const tier = (draft: ActionDraft) => classifyAction(draft).risk_tier;

const negatives = (count: number, basis: Partial<Extract<ActionDraft, { kind: 'add_negative_keywords' }>['based_on']> = {}): ActionDraft => ({
  kind: 'add_negative_keywords',
  params: { campaign_id: 'c', keywords: Array.from({ length: count }, (_, i) => ({ text: `w${i}`, match_type: 'phrase' as const })) },
  based_on: { campaign_status: 'enabled', matched_cost_30d: 50, matched_conversions_30d: 0, account_cost_30d: 10_000, blocked_keywords: [], ...basis },
});
const budget = (from: number, to: number, shared: SharedBudget | null = null): ActionDraft => ({
  kind: 'set_campaign_budget',
  params: { campaign_id: 'c', daily_budget: to },
  based_on: { campaign_status: 'enabled', daily_budget: from, shared_budget: shared },
});
const cpa = (from: number, to: number, portfolio: string | null = null): ActionDraft => ({
  kind: 'set_target_cpa',
  params: { campaign_id: 'c', target_cpa: to },
  based_on: { campaign_status: 'enabled', strategy_type: 'maximize_conversions', portfolio_id: portfolio, campaigns_affected: portfolio ? 2 : 1, target_cpa: from },
});

describe('safe-apply policy classification', () => {
  it('negative keywords: safe when small, non-converting, a small share of spend and blocking no own keyword', () => {
    expect(tier(negatives(10))).to.equal('safe');
    expect(tier(negatives(11))).to.equal('review');
    expect(tier(negatives(51))).to.equal('blocked');
    expect(tier(negatives(3, { matched_conversions_30d: 1 }))).to.equal('review');
    expect(tier(negatives(3, { matched_cost_30d: 1001 }))).to.equal('review');
    expect(tier(negatives(3, { matched_cost_30d: 1000 }))).to.equal('safe');
    const own = classifyAction(negatives(3, { blocked_keywords: ['trail running shoes'] }));
    expect(own.risk_tier).to.equal('review');
    expect(own.policy_reasons.join(' ')).to.include("campaign's own keyword(s): trail running shoes");
    expect(tier(negatives(3, { campaign_status: 'removed' }))).to.equal('blocked');
  });

  it('conversions below zero (retracted) are not "no conversions": negatives and pauses with them are review', () => {
    expect(tier(negatives(1, { matched_conversions_30d: -1 }))).to.equal('review');
    const pause = (conversions: number[]): ActionDraft => ({
      kind: 'pause_keywords',
      params: { keyword_ids: conversions.map((_, i) => `k${i}`) },
      based_on: { account_cost_30d: 10_000, keywords: conversions.map((c, i) => ({ id: `k${i}`, text: `w${i}`, status: 'enabled', cost_30d: 10, conversions_30d: c })) },
    });
    expect(tier(pause([0, 0]))).to.equal('safe');
    // One keyword's retraction must not cancel another's conversion.
    expect(tier(pause([1, -1]))).to.equal('review');
  });

  it('negative keywords on an account that shows no spend while the matched terms cost something: review, as the whole spend (never 0 %)', () => {
    const inconsistent = classifyAction(negatives(1, { matched_cost_30d: 30, account_cost_30d: 0 }));
    expect(inconsistent.risk_tier).to.equal('review');
    expect(inconsistent.policy_reasons.join(' ')).to.include('100.0%');
    expect(tier(negatives(1, { matched_cost_30d: 30, account_cost_30d: -999 }))).to.equal('review');
    // Nothing spent anywhere: nothing to measure against, and nothing blocked.
    expect(tier(negatives(1, { matched_cost_30d: 0, account_cost_30d: 0 }))).to.equal('safe');
  });

  it('negative keywords without any letter or digit are review, never safe (their blocked spend cannot be measured)', () => {
    const wordless: ActionDraft = {
      kind: 'add_negative_keywords',
      params: { campaign_id: 'c', keywords: [{ text: 'tent', match_type: 'phrase' }, { text: '🔥!!', match_type: 'broad' }] },
      based_on: { campaign_status: 'enabled', matched_cost_30d: 0, matched_conversions_30d: 0, account_cost_30d: 10_000, blocked_keywords: [] },
    };
    const result = classifyAction(wordless);
    expect(result.risk_tier).to.equal('review');
    expect(result.policy_reasons.join(' ')).to.include('no letters or digits');
    // Any script counts as words.
    const cyrillic: ActionDraft = { ...wordless, params: { campaign_id: 'c', keywords: [{ text: 'бесплатно', match_type: 'phrase' }] } };
    expect(tier(cyrillic)).to.equal('safe');
  });

  it('a step of exactly the limit is within it, where floating point computes it a hair above (1 → 1.1 is 0.10000000000000009)', () => {
    expect(tier(cpa(1, 1.1))).to.equal('safe');
    expect(tier(cpa(0.7, 0.77))).to.equal('safe');
    expect(tier(budget(0.85, 1.02))).to.equal('safe');
    expect(tier(budget(0.35, 0.42))).to.equal('safe');
    // A cent past the limit is still past it.
    expect(tier(cpa(1, 1.11))).to.equal('review');
    expect(tier(budget(0.85, 1.03))).to.equal('review');
  });

  it('budgets: safe within ±20 %, review within ±100 %, blocked beyond or not positive', () => {
    expect(tier(budget(100, 120))).to.equal('safe');
    expect(tier(budget(100, 80))).to.equal('safe');
    expect(tier(budget(100, 121))).to.equal('review');
    expect(tier(budget(100, 200))).to.equal('review');
    expect(tier(budget(100, 201))).to.equal('blocked');
    expect(tier(budget(100, 0))).to.equal('blocked');
    expect(tier(budget(100, 100_000))).to.equal('blocked');
  });

  it('targets: safe within ±10 % off a portfolio, review within ±50 % or on a portfolio, blocked beyond', () => {
    expect(tier(cpa(20, 22))).to.equal('safe');
    expect(tier(cpa(20, 18))).to.equal('safe');
    expect(tier(cpa(20, 22.5))).to.equal('review');
    expect(tier(cpa(20, 30))).to.equal('review');
    expect(tier(cpa(20, 30.2))).to.equal('blocked');
    expect(tier(cpa(20, 21, 'p1'))).to.equal('review');
    expect(classifyAction(cpa(20, 21, 'p1')).policy_reasons.join(' ')).to.include('moves 2 campaigns');
  });

  it('budgets on a shared budget: never safe, whatever the step (it moves every campaign on it); still blocked beyond ±100 %', () => {
    const shared = { id: '501', campaign_ids: ['c', 'd'] };
    const small = classifyAction(budget(100, 105, shared));
    expect(small.risk_tier).to.equal('review');
    expect(small.policy_reasons).to.deep.equal([
      'budget change of 5.0% is within the safe ±20.0%',
      "the campaign's budget 501 is a shared budget (campaigns c, d): the change moves every campaign on it, and the day band and learning period count per campaign",
    ]);
    expect(tier(budget(100, 150, shared))).to.equal('review');
    expect(tier(budget(100, 201, shared))).to.equal('blocked');
  });

  it('budgets whose sharing was not read from the platform: review, never taken for the campaign’s own', () => {
    const unread: ActionDraft = { kind: 'set_campaign_budget', params: { campaign_id: 'c', daily_budget: 105 }, based_on: { campaign_status: 'enabled', daily_budget: 100 } };
    const result = classifyAction(unread);
    expect(result.risk_tier).to.equal('review');
    expect(result.policy_reasons.join(' ')).to.include("whether the campaign's budget is shared with other campaigns was not read from the platform");
  });

  it('budgets and targets are measured from the day baseline too: a day of small steps cannot compound', () => {
    const noHistory = { dayBaseline: null, recentChange: null };
    // +8 % from 108 is fine on its own, but 116.64 is +16.6 % from the day's first value 100.
    const second = classifyAction(cpa(108, 116.64), { ...noHistory, dayBaseline: 100 });
    expect(second.risk_tier).to.equal('review');
    expect(second.policy_reasons.join(' ')).to.include("measured from today's first target CPA 100 (UTC day), the change is 16.6%");
    expect(tier(cpa(108, 104))).to.equal('safe');
    expect(classifyAction(cpa(108, 104), { ...noHistory, dayBaseline: 100 }).risk_tier).to.equal('safe');
    expect(classifyAction(budget(115, 120), { ...noHistory, dayBaseline: 100 }).risk_tier).to.equal('safe');
    expect(classifyAction(budget(115, 121), { ...noHistory, dayBaseline: 100 }).risk_tier).to.equal('review');
  });

  it('learning period: no budget or target change is safe after an applied one within 7 days', () => {
    const recentChange = { actionId: 'a0', kind: 'set_campaign_budget' as const, appliedAt: '2026-11-20T10:00:00.000Z' };
    for (const draft of [budget(100, 105), cpa(20, 21)]) {
      const result = classifyAction(draft, { dayBaseline: null, recentChange });
      expect(result.risk_tier).to.equal('review');
      expect(result.policy_reasons.join(' ')).to.include("learning period: this service changed the campaign's budget at 2026-11-20T10:00:00.000Z (action a0)");
    }
    // It does not make a blocked change any less blocked, and does not touch negatives.
    expect(classifyAction(budget(100, 300), { dayBaseline: null, recentChange }).risk_tier).to.equal('blocked');
    expect(classifyAction(negatives(3), { dayBaseline: null, recentChange }).risk_tier).to.equal('safe');
  });

  it('always says why', () => {
    for (const draft of [negatives(3), negatives(60), budget(100, 150), cpa(20, 21, 'p')]) {
      expect(classifyAction(draft).policy_reasons.length).to.be.greaterThan(0);
    }
  });
});
