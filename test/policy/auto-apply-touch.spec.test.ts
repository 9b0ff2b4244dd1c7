import { expect } from 'chai';
import type { ActionDraft } from '../../src/policy/action-draft.ts';
import { POLICY_LIMITS } from '../../src/policy/classify-action.ts';
import { autoApplyTouch, bandedChange, spendShareOf, utcDay } from '../../src/policy/policy-context.ts';

/** docs/policy.md: what an auto-applied draft must record and check on the day's quota aggregate (pure). */
const negatives = (matched: number, account: number): ActionDraft => ({
  kind: 'add_negative_keywords',
  params: { campaign_id: 'c1', keywords: [{ text: 'free', match_type: 'phrase' }] },
  based_on: { campaign_status: 'enabled', matched_cost_30d: matched, matched_conversions_30d: 0, account_cost_30d: account, blocked_keywords: [] },
});
const pause = (costs: number[], account: number): ActionDraft => ({
  kind: 'pause_keywords',
  params: { campaign_id: 'c1', keyword_ids: costs.map((_, i) => `k${i}`) },
  based_on: { campaign_status: 'enabled', account_cost_30d: account, keywords: costs.map((cost, i) => ({ keyword_id: `k${i}`, text: `t${i}`, cost_30d: cost, conversions_30d: 0 })) },
} as unknown as ActionDraft);
const budget = (from: number, to: number): ActionDraft => ({ kind: 'set_campaign_budget', params: { campaign_id: 'c1', daily_budget: to }, based_on: { campaign_status: 'enabled', daily_budget: from } });
const cpa = (from: number | null, to: number): ActionDraft => ({
  kind: 'set_target_cpa',
  params: { campaign_id: 'c1', target_cpa: to },
  based_on: { campaign_status: 'enabled', strategy_type: 'maximize_conversions', portfolio_id: null, campaigns_affected: 1, target_cpa: from },
} as unknown as ActionDraft);

describe('auto-apply touch of a draft (policy specs)', () => {
  it('a budget change touches the day band of the campaign’s daily_budget', () => {
    expect(autoApplyTouch(budget(100, 110))).to.deep.equal({
      kind: 'band',
      campaignId: 'c1',
      field: 'daily_budget',
      current: 100,
      next: 110,
      safeMax: POLICY_LIMITS.budgetChangeSafeMax,
    });
  });
  it('a target CPA change touches the target_cpa band with the target step', () => {
    expect(autoApplyTouch(cpa(20, 21))).to.deep.include({ kind: 'band', field: 'target_cpa', safeMax: POLICY_LIMITS.targetChangeSafeMax });
  });
  it('a target change without a current value touches no band (classification blocks it anyway)', () => {
    expect(bandedChange(cpa(null, 21))).to.deep.include({ current: null });
    expect(autoApplyTouch(cpa(null, 21))).to.deep.equal({ kind: 'none' });
  });
  it('negatives touch the daily spend share: matched cost over account cost', () => {
    expect(autoApplyTouch(negatives(50, 1000))).to.deep.equal({ kind: 'spend', share: 0.05, dailyCap: POLICY_LIMITS.dailyAutoApplySpendShareMax });
    // An account that shows no spend while the matched terms cost something: the whole spend, never none of it.
    expect(spendShareOf(negatives(50, 0))).to.equal(1);
    expect(spendShareOf(negatives(0, 0))).to.equal(0);
  });
  it('pauses touch the daily spend share: the keywords’ cost over account cost', () => {
    expect(spendShareOf(pause([10, 30], 400))).to.equal(0.1);
  });
  it('a budget change has no spend share, a negative no band', () => {
    expect(spendShareOf(budget(100, 110))).to.equal(null);
    expect(bandedChange(negatives(1, 100))).to.equal(null);
  });
  it('the quota day is the UTC day of the instant', () => {
    expect(utcDay(new Date('2026-11-21T23:59:59.999-02:00'))).to.equal('2026-11-22');
  });
});
