import type { AdsPlatform, Campaign, DateRange, MatchType, PlatformAccountRef } from '../platform/ads-platform.ts';
import { negativeBlocks } from '../platform/keyword-match.ts';
import { conversionCount } from '../platform/sandbox/sandbox-metrics.ts';
import type { ActionDraftOf } from './action-draft.ts';

const money = (value: number) => Math.round(value * 100) / 100;

/**
 * What adding these negatives to a campaign would touch, read from the platform: the cost
 * and conversions of EVERY search term of the campaign they would block (not a top-N
 * page, which would understate the share of spend), how many of those terms converted, the
 * account's spend, and the campaign's own keywords they would block (all but paused ones). The proposal and the apply-time
 * re-classification both use it, so both measure the same thing.
 */
export async function negativeKeywordBasis(
  platform: AdsPlatform,
  account: PlatformAccountRef,
  campaign: Pick<Campaign, 'id' | 'status'>,
  keywords: readonly { text: string; match_type: MatchType }[],
  range: DateRange,
): Promise<ActionDraftOf<'add_negative_keywords'>['based_on']> {
  const [terms, own, summary] = await Promise.all([
    platform.searchTermTotals(account, range, campaign.id),
    platform.listKeywords(account, range, campaign.id),
    platform.accountSummary(account),
  ]);
  const matched = terms.filter((t) => keywords.some((k) => negativeBlocks(k, t.search_term)));
  // A keyword of unknown status may be serving: only a paused one is left out.
  const blockedKeywords = own.filter((k) => k.status !== 'paused' && keywords.some((n) => negativeBlocks(n, k.text))).map((k) => k.text);
  return {
    campaign_status: campaign.status,
    matched_cost_30d: money(matched.reduce((s, t) => s + t.cost, 0)),
    matched_conversions_30d: conversionCount(matched.reduce((s, t) => s + t.conversions, 0)),
    // Counted term by term (and a term by its rows): one's conversions and another's retraction would cancel in the sum.
    converting_terms_30d: matched.filter((t) => t.converting).length,
    account_cost_30d: summary.last_30_days.cost,
    blocked_keywords: [...new Set(blockedKeywords)],
  };
}
