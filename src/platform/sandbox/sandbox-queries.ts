import { sql, type Kysely, type RawBuilder } from 'kysely';
import type { Database } from '../../db/schema.ts';
import type {
  AccountSummary,
  BiddingStrategyType,
  Campaign,
  CampaignPerformance,
  DateRange,
  Keyword,
  NegativeKeyword,
  SearchTerm,
  SearchTermTotal,
} from '../ads-platform.ts';
import { CampaignNotFoundError } from '../platform-errors.ts';
import { InvalidDateRangeError } from './sandbox-errors.ts';
import { DAYS_OF_DATA } from './generated-account.ts';
import { derivedRates, num, numOrNull, toMetrics } from './sandbox-metrics.ts';
import { addDays, type SandboxAccount } from './sandbox-store.ts';

/**
 * Read side of the sandbox platform. Every metric is summed from search_term_daily, the
 * one fact table, so account, campaign, keyword and search-term totals always agree.
 */
type Db = Kysely<Database>;

export const DEFAULT_SEARCH_TERM_LIMIT = 50;
export const MAX_SEARCH_TERM_LIMIT = 500;
const ISO_DATE = /^\d{4}-\d{2}-\d{2}$/;

/** A bound ISO date compared with a date column (the column's TS select type is Date). */
const dateParam = (isoDate: string): RawBuilder<Date> => sql<Date>`${isoDate}::date`;

/** Sums of the metric columns of search_term_daily aliased `s`; 0 (not null) when nothing matched. */
const METRIC_SUMS = [
  sql<string>`coalesce(sum(s.impressions), 0)`.as('impressions'),
  sql<string>`coalesce(sum(s.clicks), 0)`.as('clicks'),
  sql<string>`coalesce(sum(s.cost), 0)`.as('cost'),
  sql<string>`coalesce(sum(s.conversions), 0)`.as('conversions'),
  sql<string>`coalesce(sum(s.conversion_value), 0)`.as('conversion_value'),
] as const;
const COST_SUM = sql`coalesce(sum(s.cost), 0)`;

/** Rejects malformed or reversed ranges before they reach SQL as a cast error. */
export function checkRange(range: DateRange): void {
  for (const value of [range.from, range.to]) {
    if (typeof value !== 'string' || !ISO_DATE.test(value) || Number.isNaN(Date.parse(value))) {
      throw new InvalidDateRangeError(`'${String(value)}' is not a date (YYYY-MM-DD)`);
    }
  }
  if (range.from > range.to) throw new InvalidDateRangeError(`the range starts (${range.from}) after it ends (${range.to})`);
}

/** Throws CampaignNotFoundError unless the campaign exists in the account. */
export async function assertCampaign(db: Db, accountId: string, campaignId: string): Promise<void> {
  const row = await db
    .selectFrom('sandbox_campaigns')
    .select('id')
    .where('account_id', '=', accountId)
    .where('id', '=', campaignId)
    .executeTakeFirst();
  if (!row) throw new CampaignNotFoundError(campaignId);
}

/** Counts and totals over the 30 days ending at the account's last day of data. */
export async function accountSummary(db: Db, account: SandboxAccount): Promise<AccountSummary> {
  const counts = await db
    .selectFrom('sandbox_campaigns')
    .select([sql<string>`count(*)`.as('campaigns'), sql<string>`count(*) filter (where status = 'enabled')`.as('enabled')])
    .where('account_id', '=', account.accountId)
    .executeTakeFirstOrThrow();
  const totals = await db
    .selectFrom('sandbox_search_term_daily as s')
    .select(METRIC_SUMS)
    .where('s.account_id', '=', account.accountId)
    .where('s.day', '>=', dateParam(addDays(account.anchorDate, -(DAYS_OF_DATA - 1))))
    .where('s.day', '<=', dateParam(account.anchorDate))
    .executeTakeFirstOrThrow();
  return {
    account_id: account.accountId,
    name: account.name,
    currency: account.currency,
    time_zone: account.timeZone,
    campaigns: num(counts.campaigns),
    enabled_campaigns: num(counts.enabled),
    last_30_days: toMetrics(totals),
  };
}

/**
 * A sandbox campaign: every one has a budget of its own (the sandbox has no shared budgets),
 * so a budget change moves that campaign only.
 */
export type SandboxCampaign = Campaign & { readonly shared_budget: null };

/** Campaigns by name, each with its own or its portfolio's strategy. */
export async function listCampaigns(db: Db, accountId: string): Promise<SandboxCampaign[]> {
  const rows = await db
    .selectFrom('sandbox_campaigns as c')
    .leftJoin('sandbox_portfolios as p', (join) => join.onRef('p.account_id', '=', 'c.account_id').onRef('p.id', '=', 'c.portfolio_id'))
    .select([
      'c.id',
      'c.name',
      'c.status',
      'c.daily_budget',
      'c.strategy_type',
      'c.target_cpa',
      'c.target_roas_pct',
      'c.portfolio_id',
      'p.name as portfolio_name',
      'p.strategy_type as portfolio_strategy_type',
      'p.target_cpa as portfolio_target_cpa',
      'p.target_roas_pct as portfolio_target_roas_pct',
    ])
    .where('c.account_id', '=', accountId)
    .orderBy('c.name')
    .orderBy('c.id')
    .execute();
  const members = new Map<string, string[]>();
  for (const row of rows) if (row.portfolio_id) members.set(row.portfolio_id, [...(members.get(row.portfolio_id) ?? []), row.id]);
  return rows.map((row): SandboxCampaign => {
    const portfolio = row.portfolio_id;
    return {
      id: row.id,
      name: row.name,
      status: row.status,
      daily_budget: num(row.daily_budget),
      shared_budget: null,
      bidding_strategy: {
        // The check constraint guarantees exactly one of the two is set.
        type: (portfolio ? row.portfolio_strategy_type : row.strategy_type) as BiddingStrategyType,
        target_cpa: numOrNull(portfolio ? row.portfolio_target_cpa : row.target_cpa),
        target_roas_pct: numOrNull(portfolio ? row.portfolio_target_roas_pct : row.target_roas_pct),
        portfolio: portfolio
          ? { id: portfolio, name: row.portfolio_name ?? portfolio, campaign_ids: [...(members.get(portfolio) ?? [])].sort() }
          : null,
      },
    };
  });
}

/** Per-campaign totals over the inclusive range, most expensive first; campaigns without traffic show zeros. */
export async function campaignPerformance(db: Db, accountId: string, range: DateRange, campaignId?: string): Promise<CampaignPerformance[]> {
  const rows = await db
    .selectFrom('sandbox_campaigns as c')
    .leftJoin('sandbox_search_term_daily as s', (join) =>
      join
        .onRef('s.account_id', '=', 'c.account_id')
        .onRef('s.campaign_id', '=', 'c.id')
        .on('s.day', '>=', dateParam(range.from))
        .on('s.day', '<=', dateParam(range.to)),
    )
    .select(['c.id', 'c.name', ...METRIC_SUMS])
    .where('c.account_id', '=', accountId)
    .$if(campaignId !== undefined, (qb) => qb.where('c.id', '=', campaignId as string))
    .groupBy(['c.id', 'c.name'])
    .orderBy(COST_SUM, 'desc')
    .orderBy('c.name')
    .execute();
  return rows.map((row) => {
    const metrics = toMetrics(row);
    return { campaign_id: row.id, campaign_name: row.name, ...metrics, ...derivedRates(metrics) };
  });
}

/** Every keyword (paused ones too) with the traffic it matched over the range, most expensive first. */
export async function listKeywords(db: Db, accountId: string, range: DateRange, campaignId?: string): Promise<Keyword[]> {
  const rows = await db
    .selectFrom('sandbox_keywords as k')
    .innerJoin('sandbox_ad_groups as g', (join) => join.onRef('g.account_id', '=', 'k.account_id').onRef('g.id', '=', 'k.ad_group_id'))
    .leftJoin('sandbox_search_term_daily as s', (join) =>
      join
        .onRef('s.account_id', '=', 'k.account_id')
        .onRef('s.keyword_id', '=', 'k.id')
        .on('s.day', '>=', dateParam(range.from))
        .on('s.day', '<=', dateParam(range.to)),
    )
    .select(['k.id', 'k.campaign_id', 'k.ad_group_id', 'g.name as ad_group_name', 'k.text', 'k.match_type', 'k.status', 'k.max_cpc', ...METRIC_SUMS])
    .where('k.account_id', '=', accountId)
    .$if(campaignId !== undefined, (qb) => qb.where('k.campaign_id', '=', campaignId as string))
    .groupBy(['k.id', 'k.campaign_id', 'k.ad_group_id', 'g.name', 'k.text', 'k.match_type', 'k.status', 'k.max_cpc'])
    .orderBy(COST_SUM, 'desc')
    .orderBy('k.id')
    .execute();
  return rows.map((row) => ({
    id: row.id,
    campaign_id: row.campaign_id,
    ad_group_id: row.ad_group_id,
    ad_group_name: row.ad_group_name,
    text: row.text,
    match_type: row.match_type,
    status: row.status,
    max_cpc: numOrNull(row.max_cpc),
    ...toMetrics(row),
  }));
}

/** Search terms summed per (term, campaign, ad group, keyword) over the range, by cost descending. */
export async function searchTerms(db: Db, accountId: string, range: DateRange, options: { campaignId?: string; limit?: number }): Promise<SearchTerm[]> {
  const rows = await db
    .selectFrom('sandbox_search_term_daily as s')
    .select(['s.search_term', 's.campaign_id', 's.ad_group_id', 's.keyword_id', ...METRIC_SUMS])
    .where('s.account_id', '=', accountId)
    .where('s.day', '>=', dateParam(range.from))
    .where('s.day', '<=', dateParam(range.to))
    .$if(options.campaignId !== undefined, (qb) => qb.where('s.campaign_id', '=', options.campaignId as string))
    .groupBy(['s.search_term', 's.campaign_id', 's.ad_group_id', 's.keyword_id'])
    // Ties broken by name, so equal-cost terms come back in a stable order.
    .orderBy(COST_SUM, 'desc')
    .orderBy('s.search_term')
    .orderBy('s.ad_group_id')
    .limit(clampLimit(options.limit))
    .execute();
  return rows.map((row) => ({
    search_term: row.search_term,
    campaign_id: row.campaign_id,
    ad_group_id: row.ad_group_id,
    keyword_id: row.keyword_id,
    ...toMetrics(row),
  }));
}

/** Every search term of a campaign, summed per term, no limit (the policy's spend share must see all of them). */
export async function searchTermTotals(db: Db, accountId: string, range: DateRange, campaignId: string): Promise<SearchTermTotal[]> {
  const rows = await db
    .selectFrom('sandbox_search_term_daily as s')
    .select([
      's.search_term',
      sql<string>`coalesce(sum(s.cost), 0)`.as('cost'),
      sql<string>`coalesce(sum(s.conversions), 0)`.as('conversions'),
      sql<boolean>`coalesce(bool_or(s.conversions <> 0), false)`.as('converting'),
    ])
    .where('s.account_id', '=', accountId)
    .where('s.campaign_id', '=', campaignId)
    .where('s.day', '>=', dateParam(range.from))
    .where('s.day', '<=', dateParam(range.to))
    .groupBy('s.search_term')
    .orderBy('s.search_term')
    .execute();
  return rows.map((row) => ({ search_term: row.search_term, cost: num(row.cost), conversions: num(row.conversions), converting: row.converting }));
}

/** The limit the port allows: default 50, at least 1, at most 500. */
export function clampLimit(limit: number | undefined): number {
  if (limit === undefined || !Number.isFinite(limit)) return DEFAULT_SEARCH_TERM_LIMIT;
  return Math.min(MAX_SEARCH_TERM_LIMIT, Math.max(1, Math.floor(limit)));
}

export async function listNegativeKeywords(db: Db, accountId: string, campaignId?: string): Promise<NegativeKeyword[]> {
  const rows = await db
    .selectFrom('sandbox_negative_keywords')
    .select(['campaign_id', 'text', 'match_type'])
    .where('account_id', '=', accountId)
    .$if(campaignId !== undefined, (qb) => qb.where('campaign_id', '=', campaignId as string))
    .orderBy('campaign_id')
    .orderBy('text')
    .orderBy('match_type')
    .execute();
  return rows.map((row) => ({ campaign_id: row.campaign_id, text: row.text, match_type: row.match_type }));
}
