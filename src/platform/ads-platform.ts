import type { GoogleAdsAccountLink, PlatformChangeObservedData, PlatformKind } from '../events/catalogue/index.ts';

/**
 * The ads platform port. Two adapters: the sandbox (generated accounts kept in
 * Postgres, the embedded default) and Google Ads (src/platform/google-ads/, its REST API);
 * create-platform.ts routes each call by the account's platform. Money is in account currency
 * units (e.g. 12.5 = 12.50 EUR); rates are fractions (0.034 = 3.4 %).
 */
/**
 * `other`: a strategy the service does not steer (Google Ads' Maximize clicks, Target
 * impression share, ...); it takes no target and is shown as it is rather than misnamed.
 */
export const BIDDING_STRATEGY_TYPES = ['maximize_conversions', 'maximize_conversion_value', 'manual_cpc', 'other'] as const;
export type BiddingStrategyType = (typeof BIDDING_STRATEGY_TYPES)[number];

export const MATCH_TYPES = ['exact', 'phrase', 'broad'] as const;

/**
 * A negative keyword as the platforms compare them: trimmed, single-spaced, lower-cased
 * ("Free  Shipping" and "free shipping" are one negative).
 */
export function normaliseNegativeKeyword(text: string): string {
  return text.trim().replace(/\s+/g, ' ').toLowerCase();
}
export type MatchType = (typeof MATCH_TYPES)[number];

export interface BiddingStrategy {
  readonly type: BiddingStrategyType;
  /** Set for maximize_conversions with a target CPA. */
  readonly target_cpa: number | null;
  /** Percent (150 = 1.5x); set for maximize_conversion_value with a target ROAS. */
  readonly target_roas_pct: number | null;
  /** A shared (portfolio) strategy: changing its target moves every campaign on it. */
  readonly portfolio: { readonly id: string; readonly name: string; readonly campaign_ids: readonly string[] } | null;
}

/**
 * A budget several campaigns can draw on (Google Ads' explicitly shared budgets): changing its
 * amount moves every campaign on it, whichever campaign the change names.
 */
export interface SharedBudget {
  readonly id: string;
  /** The campaigns (not removed) that draw on it, this one included. */
  readonly campaign_ids: readonly string[];
}

export interface Campaign {
  readonly id: string;
  readonly name: string;
  /**
   * `unknown`: the platform gave a status this service does not know (Google's UNKNOWN, a status
   * newer than the API version spoken); the campaign may be serving, so it is never shown paused.
   */
  readonly status: 'enabled' | 'paused' | 'removed' | 'unknown';
  /** The amount of the campaign's budget: its own, or the shared budget's. */
  readonly daily_budget: number;
  /** The shared budget the campaign draws on; null when its budget is its own. */
  readonly shared_budget: SharedBudget | null;
  readonly bidding_strategy: BiddingStrategy;
}

export interface Metrics {
  readonly impressions: number;
  readonly clicks: number;
  readonly cost: number;
  readonly conversions: number;
  readonly conversion_value: number;
}

export interface AccountSummary {
  readonly account_id: string;
  readonly name: string;
  readonly currency: string;
  readonly time_zone: string;
  readonly campaigns: number;
  readonly enabled_campaigns: number;
  /** Totals over the last 30 days. */
  readonly last_30_days: Metrics;
}

export interface DateRange {
  /** Inclusive ISO dates (YYYY-MM-DD). */
  readonly from: string;
  readonly to: string;
}

export interface CampaignPerformance extends Metrics {
  readonly campaign_id: string;
  readonly campaign_name: string;
  readonly ctr: number;
  readonly cpc: number | null;
  readonly cpa: number | null;
  readonly roas: number | null;
}

export interface Keyword extends Metrics {
  readonly id: string;
  readonly campaign_id: string;
  readonly ad_group_id: string;
  readonly ad_group_name: string;
  readonly text: string;
  readonly match_type: MatchType;
  /** `unknown`: the platform gave a status this service does not know; it may be serving. */
  readonly status: 'enabled' | 'paused' | 'unknown';
  readonly max_cpc: number | null;
}

export interface SearchTerm extends Metrics {
  readonly search_term: string;
  readonly campaign_id: string;
  readonly ad_group_id: string;
  /** Keyword that matched the search term. */
  readonly keyword_id: string;
}

/** One search term's 30-day cost and conversions in a campaign, summed over its ad groups and keywords. */
export interface SearchTermTotal {
  readonly search_term: string;
  readonly cost: number;
  readonly conversions: number;
  /** Whether any of its rows (ad group, keyword) had conversions other than 0: their sum can cancel out. */
  readonly converting: boolean;
}

export interface NegativeKeyword {
  readonly campaign_id: string;
  readonly text: string;
  readonly match_type: MatchType;
}

export interface PlatformAccountRef {
  readonly accountId: string;
  readonly name: string;
  readonly platform: PlatformKind;
  readonly sandboxSeed: number | null;
  /** The Google Ads customer of a google-ads account (from its AccountCreated event). */
  readonly googleAds?: GoogleAdsAccountLink | null;
}

/** Changes the apply worker makes. Each is idempotent: applying it twice leaves the same state. */
export type PlatformChange =
  | { readonly kind: 'add_negative_keywords'; readonly campaign_id: string; readonly keywords: readonly { text: string; match_type: MatchType }[] }
  | { readonly kind: 'pause_keywords'; readonly keyword_ids: readonly string[] }
  | { readonly kind: 'set_campaign_budget'; readonly campaign_id: string; readonly daily_budget: number }
  | { readonly kind: 'set_target_cpa'; readonly campaign_id: string; readonly target_cpa: number }
  | { readonly kind: 'set_target_roas'; readonly campaign_id: string; readonly target_roas_pct: number };

export interface AdsPlatform {
  accountSummary(account: PlatformAccountRef): Promise<AccountSummary>;
  listCampaigns(account: PlatformAccountRef): Promise<Campaign[]>;
  /** Null when the campaign does not exist in the account. */
  getCampaign(account: PlatformAccountRef, campaignId: string): Promise<Campaign | null>;
  campaignPerformance(account: PlatformAccountRef, range: DateRange, campaignId?: string): Promise<CampaignPerformance[]>;
  listKeywords(account: PlatformAccountRef, range: DateRange, campaignId?: string): Promise<Keyword[]>;
  /** Sorted by cost, descending; at most `limit` rows. */
  searchTerms(account: PlatformAccountRef, range: DateRange, options?: { campaignId?: string; limit?: number }): Promise<SearchTerm[]>;
  /**
   * Every search term of a campaign over the range, without a row limit: what the policy
   * needs to know the full share of spend a negative keyword would block.
   */
  searchTermTotals(account: PlatformAccountRef, range: DateRange, campaignId: string): Promise<SearchTermTotal[]>;
  listNegativeKeywords(account: PlatformAccountRef, campaignId?: string): Promise<NegativeKeyword[]>;
  /**
   * Applies a change. An adapter whose platform applies parts of a change on their own
   * (Google Ads' partialFailure) returns which parts went through and which were refused;
   * a change refused as a whole throws.
   */
  applyChange(account: PlatformAccountRef, change: PlatformChange): Promise<ChangeOutcome | void>;
  /**
   * The platform's dry run (Google Ads' validateOnly), made when a change is proposed; throws
   * the platform's refusal. Adapters without one (the sandbox) leave it out.
   */
  validateChange?(account: PlatformAccountRef, change: PlatformChange): Promise<void>;
  /**
   * The smallest amount of the account's currency a budget or target takes (1 for a currency
   * without minor units, such as JPY): amounts are proposed and classified as the platform will
   * apply them. Adapters that take cents (the sandbox) leave it out.
   */
  moneyUnit?(account: PlatformAccountRef): Promise<number>;
  /**
   * Changes the platform reports for the account at or after `since` (the platform's own
   * time format), oldest first, made by anyone. Adapters without a change log leave it out.
   */
  platformChanges?(account: PlatformAccountRef, since: string): Promise<PlatformChangeObservedData[]>;
}

/** What an applied change did, part by part: refused operations are listed per keyword (or field). */
export interface ChangeOutcome {
  readonly applied: readonly string[];
  /** Each operation the platform applied, with the resource name it answered (Google Ads mutate results). */
  readonly operations?: readonly { readonly subject: string; readonly resource_name: string }[];
  readonly failures: readonly { readonly subject: string; readonly error_code: string; readonly message: string }[];
}
