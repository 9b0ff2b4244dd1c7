import type { ActionState } from '../../commands/action/action-state.ts';
import { normaliseNegativeKeyword, type AdsPlatform, type PlatformAccountRef, type PlatformChange, type SharedBudget } from '../platform/ads-platform.ts';

export type Recheck = { readonly ok: true; readonly change: PlatformChange } | { readonly ok: false; readonly reason: string };

/**
 * The date range of a keyword read made for the keywords' existence and status, not their
 * metrics: one recent day. Google Ads keeps metrics by day for 37 months only and refuses a
 * range that starts earlier (DateRangeError REQUESTED_DATE_GRANULARITY_NOT_SUPPORTED), so an
 * old "empty" day would fail every re-check of a pause. Yesterday in UTC is a past day in
 * every account time zone.
 */
function attributesOnlyRange(now = new Date()): { from: string; to: string } {
  const day = new Date(now.getTime() - 86_400_000).toISOString().slice(0, 10);
  return { from: day, to: day };
}

const same = (a: unknown, b: unknown) => typeof a === 'number' && typeof b === 'number' ? Math.abs(a - b) < 0.005 : a === b;

/**
 * Why a budget change would now move campaigns the proposal did not count, or null: the
 * campaign's budget became shared (or another shared one), or more campaigns joined it. A
 * basis without `shared_budget` (proposed before it was recorded) counts as a budget of its own.
 */
function budgetSharingChange(campaignId: string, live: SharedBudget | null, recorded: SharedBudget | null | undefined): string | null {
  if (live === null) return null;
  if (recorded?.id !== live.id) {
    return `the campaign's budget became shared budget ${live.id} (campaigns ${live.campaign_ids.join(', ')}) since the proposal: the change would move every campaign on it`;
  }
  const joined = live.campaign_ids.filter((id) => id !== campaignId && !recorded.campaign_ids.includes(id));
  return joined.length > 0 ? `campaigns ${joined.join(', ')} joined the shared budget ${live.id} since the proposal: the change would move them too` : null;
}

/**
 * The apply worker's re-check: is the platform still as it was when the action was
 * proposed? A value already equal to the proposal's counts as unchanged (a retry after a
 * crash between the platform call and ActionApplied).
 */
export async function recheckAction(platform: AdsPlatform, account: PlatformAccountRef, action: ActionState): Promise<Recheck> {
  const params = action.params as Record<string, any>;
  const basis = action.basedOn as Record<string, any>;
  const campaignChecked = async (campaignId: string) => {
    const campaign = await platform.getCampaign(account, campaignId);
    if (!campaign || campaign.status === 'removed') return { campaign: null, reason: `campaign ${campaignId} no longer exists` };
    if (campaign.status === 'unknown') return { campaign: null, reason: `campaign ${campaignId} is in a status this service does not know, not shown as active` };
    if (campaign.status !== 'enabled') return { campaign: null, reason: `campaign ${campaignId} is ${campaign.status}, not active` };
    return { campaign, reason: '' };
  };

  switch (action.kind) {
    case 'add_negative_keywords': {
      const { campaign, reason } = await campaignChecked(params.campaign_id);
      if (!campaign) return { ok: false, reason };
      return { ok: true, change: { kind: 'add_negative_keywords', campaign_id: params.campaign_id, keywords: params.keywords } };
    }
    case 'pause_keywords': {
      const keywords = await platform.listKeywords(account, attributesOnlyRange());
      for (const id of params.keyword_ids as string[]) {
        if (!keywords.some((k) => k.id === id)) return { ok: false, reason: `keyword ${id} no longer exists` };
      }
      return { ok: true, change: { kind: 'pause_keywords', keyword_ids: params.keyword_ids } };
    }
    case 'set_campaign_budget': {
      const { campaign, reason } = await campaignChecked(params.campaign_id);
      if (!campaign) return { ok: false, reason };
      if (!same(campaign.daily_budget, basis.daily_budget) && !same(campaign.daily_budget, params.daily_budget)) {
        return { ok: false, reason: `the daily budget changed since the proposal (was ${basis.daily_budget}, now ${campaign.daily_budget})` };
      }
      const sharing = budgetSharingChange(campaign.id, campaign.shared_budget, basis.shared_budget);
      if (sharing) return { ok: false, reason: sharing };
      return { ok: true, change: { kind: 'set_campaign_budget', campaign_id: campaign.id, daily_budget: params.daily_budget } };
    }
    case 'set_target_cpa':
    case 'set_target_roas': {
      const { campaign, reason } = await campaignChecked(params.campaign_id);
      if (!campaign) return { ok: false, reason };
      const strategy = campaign.bidding_strategy;
      if (strategy.type !== basis.strategy_type) {
        return { ok: false, reason: `the bidding strategy changed since the proposal (was ${basis.strategy_type}, now ${strategy.type})` };
      }
      if ((strategy.portfolio?.id ?? null) !== basis.portfolio_id) return { ok: false, reason: 'the campaign moved to or from a portfolio strategy since the proposal' };
      const [current, before, wanted] =
        action.kind === 'set_target_cpa'
          ? [strategy.target_cpa, basis.target_cpa, params.target_cpa]
          : [strategy.target_roas_pct, basis.target_roas_pct, params.target_roas_pct];
      if (!same(current, before) && !same(current, wanted)) {
        return { ok: false, reason: `the target changed since the proposal (was ${before}, now ${current})` };
      }
      return action.kind === 'set_target_cpa'
        ? { ok: true, change: { kind: 'set_target_cpa', campaign_id: campaign.id, target_cpa: wanted } }
        : { ok: true, change: { kind: 'set_target_roas', campaign_id: campaign.id, target_roas_pct: wanted } };
    }
    default:
      return { ok: false, reason: `unknown action kind ${String(action.kind)}` };
  }
}

/**
 * Whether the platform already shows the action's change in full: the budget or target at the
 * proposed value, every negative keyword in place, every keyword paused. For a takeover of an
 * attempt whose worker died after its platform call and before recording it: such an action is
 * applied, not to be returned to the queue (the kill switch's return would record a live change
 * as not applied, and no learning period would count it). Compared as the platform stores them
 * (negatives case-insensitive and single-spaced, amounts to half a cent).
 */
export async function changeAlreadyLive(platform: AdsPlatform, account: PlatformAccountRef, action: ActionState): Promise<boolean> {
  const params = action.params as Record<string, any>;
  switch (action.kind) {
    case 'set_campaign_budget': {
      const campaign = await platform.getCampaign(account, params.campaign_id);
      return campaign !== null && same(campaign.daily_budget, params.daily_budget);
    }
    case 'set_target_cpa':
    case 'set_target_roas': {
      const campaign = await platform.getCampaign(account, params.campaign_id);
      if (!campaign) return false;
      return action.kind === 'set_target_cpa'
        ? same(campaign.bidding_strategy.target_cpa, params.target_cpa)
        : same(campaign.bidding_strategy.target_roas_pct, params.target_roas_pct);
    }
    case 'add_negative_keywords': {
      const present = new Set((await platform.listNegativeKeywords(account, params.campaign_id)).map((n) => `${n.match_type}:${normaliseNegativeKeyword(n.text)}`));
      const wanted = params.keywords as { text: string; match_type: string }[];
      return wanted.length > 0 && wanted.every((k) => present.has(`${k.match_type}:${normaliseNegativeKeyword(String(k.text))}`));
    }
    case 'pause_keywords': {
      const ids = params.keyword_ids as string[];
      const keywords = await platform.listKeywords(account, attributesOnlyRange());
      return ids.length > 0 && ids.every((id) => keywords.some((k) => k.id === id && k.status === 'paused'));
    }
    default:
      return false;
  }
}
