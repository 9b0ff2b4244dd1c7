import type { ColumnType } from 'kysely';
import type { BiddingStrategyType, MatchType } from '../ads-platform.ts';

/**
 * Kysely row types of the sandbox platform's tables (migration 002). Every table is
 * keyed by account first: ids are unique per account only, because two accounts may
 * share a seed and so generate the same ids.
 *
 * Postgres returns `numeric` as a string (it can exceed a JS number); the read side
 * converts, so the select type here says string.
 */
type Numeric = ColumnType<string, number | string, number | string>;
type NullableNumeric = ColumnType<string | null, number | string | null, number | string | null>;

export interface SandboxAccountsTable {
  account_id: string;
  seed: number;
  name: string;
  /** Vocabulary the account was generated from (outdoor, florist, ...). */
  theme: string;
  currency: string;
  time_zone: string;
  generated_at: ColumnType<Date, string | undefined, never>;
  /** Last day of data: yesterday (UTC) when the account was generated. */
  anchor_date: ColumnType<Date, string, never>;
}

export interface SandboxPortfoliosTable {
  account_id: string;
  id: string;
  name: string;
  strategy_type: BiddingStrategyType;
  target_cpa: NullableNumeric;
  target_roas_pct: NullableNumeric;
}

export interface SandboxCampaignsTable {
  account_id: string;
  id: string;
  name: string;
  status: 'enabled' | 'paused' | 'removed';
  daily_budget: Numeric;
  /** Null when the campaign is on a portfolio: the portfolio's strategy applies. */
  strategy_type: BiddingStrategyType | null;
  target_cpa: NullableNumeric;
  target_roas_pct: NullableNumeric;
  portfolio_id: string | null;
}

export interface SandboxAdGroupsTable {
  account_id: string;
  id: string;
  campaign_id: string;
  name: string;
  status: 'enabled' | 'paused';
}

export interface SandboxKeywordsTable {
  account_id: string;
  id: string;
  campaign_id: string;
  ad_group_id: string;
  text: string;
  match_type: MatchType;
  status: 'enabled' | 'paused';
  /** Set for keywords in manual CPC campaigns only. */
  max_cpc: NullableNumeric;
}

export interface SandboxSearchTermDailyTable {
  account_id: string;
  day: ColumnType<Date, string, never>;
  search_term: string;
  campaign_id: string;
  ad_group_id: string;
  keyword_id: string;
  impressions: number;
  clicks: number;
  cost: Numeric;
  conversions: Numeric;
  conversion_value: Numeric;
}

export interface SandboxNegativeKeywordsTable {
  account_id: string;
  campaign_id: string;
  text: string;
  match_type: MatchType;
  created_at: ColumnType<Date, string | undefined, never>;
}
