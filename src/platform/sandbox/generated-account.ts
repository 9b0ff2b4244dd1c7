import type { BiddingStrategyType, MatchType } from '../ads-platform.ts';

/**
 * The plain-data result of generating a sandbox account from its seed, before it is
 * stored. Days are relative (`day_index` 0 is the first of the 30 days, 29 the anchor
 * day), so the generated data depends on the seed alone, not on the date it is made.
 */
export const DAYS_OF_DATA = 30;

export interface GeneratedPortfolio {
  readonly id: string;
  readonly name: string;
  readonly strategy_type: BiddingStrategyType;
  readonly target_cpa: number | null;
  readonly target_roas_pct: number | null;
}

export interface GeneratedCampaign {
  readonly id: string;
  readonly name: string;
  readonly status: 'enabled' | 'paused';
  readonly daily_budget: number;
  /** Null when on a portfolio. */
  readonly strategy_type: BiddingStrategyType | null;
  readonly target_cpa: number | null;
  readonly target_roas_pct: number | null;
  readonly portfolio_id: string | null;
}

export interface GeneratedAdGroup {
  readonly id: string;
  readonly campaign_id: string;
  readonly name: string;
  readonly status: 'enabled' | 'paused';
}

export interface GeneratedKeyword {
  readonly id: string;
  readonly campaign_id: string;
  readonly ad_group_id: string;
  readonly text: string;
  readonly match_type: MatchType;
  readonly status: 'enabled' | 'paused';
  readonly max_cpc: number | null;
}

export interface GeneratedSearchTermDay {
  readonly day_index: number;
  readonly search_term: string;
  readonly campaign_id: string;
  readonly ad_group_id: string;
  readonly keyword_id: string;
  readonly impressions: number;
  readonly clicks: number;
  readonly cost: number;
  readonly conversions: number;
  readonly conversion_value: number;
}

export interface GeneratedNegativeKeyword {
  readonly campaign_id: string;
  readonly text: string;
  readonly match_type: MatchType;
}

export interface GeneratedAccount {
  readonly seed: number;
  readonly theme: string;
  readonly portfolios: readonly GeneratedPortfolio[];
  readonly campaigns: readonly GeneratedCampaign[];
  readonly adGroups: readonly GeneratedAdGroup[];
  readonly keywords: readonly GeneratedKeyword[];
  readonly searchTermDays: readonly GeneratedSearchTermDay[];
  readonly negativeKeywords: readonly GeneratedNegativeKeyword[];
}
