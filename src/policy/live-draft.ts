import type { ActionState } from '../../commands/action/action-state.ts';
import { last30Days } from '../agent/tools/date-range.ts';
import type { AdsPlatform, Campaign, MatchType, PlatformAccountRef } from '../platform/ads-platform.ts';
import { budgetBasisOf, targetBasisOf, type ActionDraft } from './action-draft.ts';
import { negativeKeywordBasis } from './negative-keyword-basis.ts';
import { tiesOf, type KnownTies } from './policy-context.ts';

/**
 * The draft of a recorded action rebuilt from the platform's live values: the same change
 * (`params`), measured against what the account looks like now. The apply worker classifies
 * it again before an auto-applied action goes live. Null when a campaign or keyword the
 * action needs is gone (the apply re-check reports that). With it, the campaign's portfolio and
 * shared budget as they are now (the learning period counts changes made through them).
 */
export async function liveDraft(platform: AdsPlatform, account: PlatformAccountRef, action: ActionState, now: Date): Promise<{ draft: ActionDraft; ties: KnownTies } | null> {
  let ties: KnownTies = {};
  const campaignOf = async (id: string): Promise<Campaign | null> => {
    const campaign = await platform.getCampaign(account, id);
    if (campaign) ties = tiesOf(campaign);
    return campaign;
  };
  const draft = await draftOf(platform, account, action, now, campaignOf);
  return draft ? { draft, ties } : null;
}

async function draftOf(
  platform: AdsPlatform,
  account: PlatformAccountRef,
  action: ActionState,
  now: Date,
  campaignOf: (id: string) => Promise<Campaign | null>,
): Promise<ActionDraft | null> {
  const params = action.params as Record<string, any>;
  const range = last30Days(now);
  switch (action.kind) {
    case 'add_negative_keywords': {
      const campaign = await campaignOf(params.campaign_id);
      if (!campaign) return null;
      const keywords = params.keywords as { text: string; match_type: MatchType }[];
      return { kind: 'add_negative_keywords', params: { campaign_id: campaign.id, keywords }, based_on: await negativeKeywordBasis(platform, account, campaign, keywords, range) };
    }
    case 'pause_keywords': {
      const ids = params.keyword_ids as string[];
      const [all, summary] = await Promise.all([platform.listKeywords(account, range), platform.accountSummary(account)]);
      const chosen = all.filter((k) => ids.includes(k.id));
      // Against the distinct ids: an action recorded with a repeated id still names only keywords that exist.
      if (chosen.length !== new Set(ids).size) return null;
      return {
        kind: 'pause_keywords',
        params: { keyword_ids: ids },
        based_on: {
          keywords: chosen.map((k) => ({ id: k.id, text: k.text, status: k.status, cost_30d: k.cost, conversions_30d: k.conversions })),
          account_cost_30d: summary.last_30_days.cost,
        },
      };
    }
    case 'set_campaign_budget': {
      const campaign = await campaignOf(params.campaign_id);
      if (!campaign) return null;
      return { kind: 'set_campaign_budget', params: { campaign_id: campaign.id, daily_budget: params.daily_budget }, based_on: budgetBasisOf(campaign) };
    }
    case 'set_target_cpa':
    case 'set_target_roas': {
      const campaign = await campaignOf(params.campaign_id);
      if (!campaign) return null;
      const strategy = campaign.bidding_strategy;
      const basis = targetBasisOf(campaign);
      return action.kind === 'set_target_cpa'
        ? { kind: 'set_target_cpa', params: { campaign_id: campaign.id, target_cpa: params.target_cpa }, based_on: { ...basis, target_cpa: strategy.target_cpa } }
        : { kind: 'set_target_roas', params: { campaign_id: campaign.id, target_roas_pct: params.target_roas_pct }, based_on: { ...basis, target_roas_pct: strategy.target_roas_pct } };
    }
    default:
      return null;
  }
}
