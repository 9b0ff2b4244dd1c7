import { expect } from 'chai';
import type { BiddingStrategy, Campaign } from '../../src/platform/ads-platform.ts';
import { targetChangeDraft } from '../../src/policy/target-change-draft.ts';

/** docs/api.md "Campaign target" and the agent's set_target_* tools: one draft for both (pure). */
const campaign = (strategy: Partial<BiddingStrategy>): Campaign => ({
  id: 'c1',
  name: 'Brand',
  status: 'enabled',
  daily_budget: 50,
  shared_budget: null,
  bidding_strategy: { type: 'maximize_conversions', target_cpa: 20, target_roas_pct: null, portfolio: null, ...strategy },
});
const cpaCampaign = campaign({});
const roasCampaign = campaign({ type: 'maximize_conversion_value', target_cpa: null, target_roas_pct: 300 });

describe('target change draft (policy specs)', () => {
  it('a target CPA on a maximize-conversions campaign: rounded to cents, based on the current target', () => {
    expect(targetChangeDraft(cpaCampaign, { field: 'target_cpa', value: 21.456 })).to.deep.equal({
      ok: true,
      draft: {
        kind: 'set_target_cpa',
        params: { campaign_id: 'c1', target_cpa: 21.46 },
        based_on: { campaign_status: 'enabled', strategy_type: 'maximize_conversions', portfolio_id: null, campaigns_affected: 1, target_cpa: 20 },
      },
      summary: 'Change the target CPA of "Brand" from 20 to 21.46',
    });
  });
  it('a target ROAS on a maximize-conversion-value campaign: rounded to tenths of a percent', () => {
    const change = targetChangeDraft(roasCampaign, { field: 'target_roas_pct', value: 310.04 });
    expect(change).to.deep.include({ ok: true, summary: 'Change the target ROAS of "Brand" from 300% to 310%' });
    expect(change.ok && change.draft.params).to.deep.equal({ campaign_id: 'c1', target_roas_pct: 310 });
  });
  it('a portfolio strategy: the basis counts every campaign on it', () => {
    const change = targetChangeDraft(campaign({ portfolio: { id: 'p1', name: 'P', campaign_ids: ['c1', 'c2', 'c3'] } }), { field: 'target_cpa', value: 21 });
    expect(change.ok && change.draft.based_on).to.deep.include({ portfolio_id: 'p1', campaigns_affected: 3 });
  });
  it('refuses a target the strategy does not have, naming the field', () => {
    expect(targetChangeDraft(roasCampaign, { field: 'target_cpa', value: 21 })).to.deep.equal({ ok: false, field: 'target_cpa' });
    expect(targetChangeDraft(cpaCampaign, { field: 'target_roas_pct', value: 300 })).to.deep.equal({ ok: false, field: 'target_roas_pct' });
    expect(targetChangeDraft(campaign({ target_cpa: null }), { field: 'target_cpa', value: 21 })).to.deep.equal({ ok: false, field: 'target_cpa' });
    expect(targetChangeDraft(campaign({ type: 'manual_cpc' as BiddingStrategy['type'], target_cpa: null }), { field: 'target_cpa', value: 21 })).to.include({ ok: false });
  });
});
