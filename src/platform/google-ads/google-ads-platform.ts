import type {
  AccountSummary,
  AdsPlatform,
  ChangeOutcome,
  Campaign,
  CampaignPerformance,
  DateRange,
  Keyword,
  NegativeKeyword,
  PlatformAccountRef,
  PlatformChange,
  SearchTerm,
  SearchTermTotal,
} from '../ads-platform.ts';
import { clipText } from '../../text/clip-text.ts';
import { AccountNotConnectedError, CampaignNotFoundError } from '../platform-errors.ts';
import { checkRange } from '../sandbox/sandbox-queries.ts';
import { conversionCount, derivedRates } from '../sandbox/sandbox-metrics.ts';
import type { PlatformChangeObservedData } from '../../events/catalogue/index.ts';
import { CHANGE_EVENT_LIMIT, CHANGE_EVENT_QUERY_FIELDS, observedChangeOf, oldestChangeTime, newestChangeTime } from './google-ads-change-events.ts';
import { changeOperations, minimumUnitMicros } from './google-ads-changes.ts';
import {
  campaignOf,
  clippedText,
  MICROS_PER_UNIT,
  keywordIdFromResourceName,
  keywordIdOf,
  keywordStatusOf,
  matchTypeOf,
  metricsOf,
  number,
  portfolioOf,
  sumMetrics,
  text,
  type GoogleCampaign,
  type PortfolioRow,
} from './google-ads-mapping.ts';
import type { GoogleAdsRow, GoogleAdsTarget, GoogleAdsTransport } from './google-ads-transport.ts';
import { GoogleAdsRequestError, platformText } from './google-ads-errors.ts';

/** Ids the adapter puts into GAQL: digits only, so no string from the model reaches a query. */
const NUMERIC_ID = /^[0-9]{1,19}$/;
const DEFAULT_TERM_LIMIT = 50;
const MAX_TERM_LIMIT = 500;

const between = (range: DateRange) => `segments.date BETWEEN '${range.from}' AND '${range.to}'`;
const METRICS = 'metrics.impressions, metrics.clicks, metrics.cost_micros, metrics.conversions, metrics.conversions_value';

/**
 * The Google Ads adapter of the platform port: reads with GAQL through googleAds:search,
 * changes through the per-service mutate endpoints (google-ads-changes.ts). Money is in
 * account currency units (micros / 1,000,000); dates are the account's reporting dates.
 */
export class GoogleAdsPlatform implements AdsPlatform {
  private readonly transport: GoogleAdsTransport;
  /** Each customer's currency, by customer id (see currencyOf). */
  private readonly currencies = new Map<string, string>();
  private readonly now: () => Date;

  constructor(
    transport: GoogleAdsTransport,
    now: () => Date = () => new Date(),
  ) {
    this.transport = transport;
    this.now = now;
  }

  async accountSummary(account: PlatformAccountRef): Promise<AccountSummary> {
    const target = this.target(account);
    const range = this.last30Days();
    const [header, totals, campaigns] = await Promise.all([
      this.transport.search(target, 'SELECT customer.id, customer.descriptive_name, customer.currency_code, customer.time_zone FROM customer'),
      this.transport.search(target, `SELECT ${METRICS} FROM customer WHERE ${between(range)}`),
      this.campaigns(target),
    ]);
    const row = header[0] ?? {};
    return {
      account_id: account.accountId,
      name: clippedText(row, 'customer.descriptiveName', 200) || account.name,
      currency: clippedText(row, 'customer.currencyCode', 3),
      time_zone: clippedText(row, 'customer.timeZone', 64),
      campaigns: campaigns.length,
      enabled_campaigns: campaigns.filter((c) => c.campaign.status === 'enabled').length,
      last_30_days: sumMetrics(totals.map(metricsOf)),
    };
  }

  async listCampaigns(account: PlatformAccountRef): Promise<Campaign[]> {
    return (await this.campaigns(this.target(account))).map((c) => c.campaign);
  }

  async getCampaign(account: PlatformAccountRef, campaignId: string): Promise<Campaign | null> {
    return (await this.findCampaign(this.target(account), campaignId))?.campaign ?? null;
  }

  async campaignPerformance(account: PlatformAccountRef, range: DateRange, campaignId?: string): Promise<CampaignPerformance[]> {
    const target = await this.openForRead(account, range, campaignId);
    const filter = campaignId ? ` AND campaign.id = ${campaignId}` : '';
    const [rows, campaigns] = await Promise.all([
      this.transport.search(target, `SELECT campaign.id, ${METRICS} FROM campaign WHERE ${between(range)} AND campaign.status != 'REMOVED'${filter}`),
      this.campaigns(target),
    ]);
    const byCampaign = new Map<string, ReturnType<typeof metricsOf>[]>();
    for (const row of rows) byCampaign.set(text(row, 'campaign.id'), [...(byCampaign.get(text(row, 'campaign.id')) ?? []), metricsOf(row)]);
    return campaigns
      .filter((c) => campaignId === undefined || c.campaign.id === campaignId)
      .map(({ campaign }) => {
        const metrics = sumMetrics(byCampaign.get(campaign.id) ?? []);
        return { campaign_id: campaign.id, campaign_name: campaign.name, ...metrics, ...derivedRates(metrics) };
      });
  }

  async listKeywords(account: PlatformAccountRef, range: DateRange, campaignId?: string): Promise<Keyword[]> {
    const target = await this.openForRead(account, range, campaignId);
    const filter = campaignId ? ` AND campaign.id = ${campaignId}` : '';
    const [attributes, metrics] = await Promise.all([
      this.transport.search(
        target,
        'SELECT campaign.id, ad_group.id, ad_group.name, ad_group_criterion.criterion_id, ad_group_criterion.keyword.text, ' +
          'ad_group_criterion.keyword.match_type, ad_group_criterion.status, ad_group_criterion.cpc_bid_micros FROM ad_group_criterion ' +
          `WHERE ad_group_criterion.type = 'KEYWORD' AND ad_group_criterion.negative = FALSE AND ad_group_criterion.status != 'REMOVED' AND campaign.status != 'REMOVED'${filter}`,
      ),
      this.transport.search(target, `SELECT ad_group.id, ad_group_criterion.criterion_id, ${METRICS} FROM keyword_view WHERE ${between(range)}${filter}`),
    ]);
    const metricsById = new Map<string, ReturnType<typeof metricsOf>[]>();
    for (const row of metrics) {
      const id = keywordIdOf(text(row, 'adGroup.id'), text(row, 'adGroupCriterion.criterionId'));
      metricsById.set(id, [...(metricsById.get(id) ?? []), metricsOf(row)]);
    }
    return attributes.map((row) => {
      const id = keywordIdOf(text(row, 'adGroup.id'), text(row, 'adGroupCriterion.criterionId'));
      const bid = number(row, 'adGroupCriterion.cpcBidMicros');
      return {
        id,
        campaign_id: text(row, 'campaign.id'),
        ad_group_id: text(row, 'adGroup.id'),
        ad_group_name: clippedText(row, 'adGroup.name', 200),
        text: clippedText(row, 'adGroupCriterion.keyword.text', 200),
        match_type: matchTypeOf(text(row, 'adGroupCriterion.keyword.matchType')),
        status: keywordStatusOf(text(row, 'adGroupCriterion.status')),
        max_cpc: bid > 0 ? Math.round(bid / 10_000) / 100 : null,
        ...sumMetrics(metricsById.get(id) ?? []),
      };
    });
  }

  async searchTerms(account: PlatformAccountRef, range: DateRange, options: { campaignId?: string; limit?: number } = {}): Promise<SearchTerm[]> {
    const target = await this.openForRead(account, range, options.campaignId);
    const limit = Math.min(Math.max(1, Math.floor(options.limit ?? DEFAULT_TERM_LIMIT)), MAX_TERM_LIMIT);
    const filter = options.campaignId ? ` AND campaign.id = ${options.campaignId}` : '';
    const rows = await this.transport.search(
      target,
      `SELECT search_term_view.search_term, campaign.id, ad_group.id, segments.keyword.ad_group_criterion, ${METRICS} ` +
        `FROM search_term_view WHERE ${between(range)}${filter} ORDER BY metrics.cost_micros DESC LIMIT ${limit}`,
    );
    return rows.map((row) => ({
      search_term: clippedText(row, 'searchTermView.searchTerm', 200),
      campaign_id: text(row, 'campaign.id'),
      ad_group_id: text(row, 'adGroup.id'),
      keyword_id: keywordIdFromResourceName(text(row, 'segments.keyword.adGroupCriterion')),
      ...metricsOf(row),
    }));
  }

  async searchTermTotals(account: PlatformAccountRef, range: DateRange, campaignId: string): Promise<SearchTermTotal[]> {
    const target = await this.openForRead(account, range, campaignId);
    const rows = await this.transport.search(
      target,
      // By ad group: a term's conversions in one and retraction in another would cancel out in one row.
      `SELECT search_term_view.search_term, ad_group.id, metrics.cost_micros, metrics.conversions FROM search_term_view WHERE ${between(range)} AND campaign.id = ${campaignId}`,
    );
    const totals = new Map<string, { cost: number; conversions: number; converting: boolean }>();
    for (const row of rows) {
      const term = clippedText(row, 'searchTermView.searchTerm', 200);
      const metrics = metricsOf(row);
      const total = totals.get(term) ?? { cost: 0, conversions: 0, converting: false };
      totals.set(term, { cost: total.cost + metrics.cost, conversions: total.conversions + metrics.conversions, converting: total.converting || metrics.conversions !== 0 });
    }
    return [...totals].map(([search_term, t]) => ({ search_term, cost: Math.round(t.cost * 100) / 100, conversions: conversionCount(t.conversions), converting: t.converting }));
  }

  async listNegativeKeywords(account: PlatformAccountRef, campaignId?: string): Promise<NegativeKeyword[]> {
    const target = this.target(account);
    if (campaignId !== undefined) await this.requireCampaign(target, campaignId);
    const filter = campaignId ? ` AND campaign.id = ${campaignId}` : '';
    const rows = await this.transport.search(
      target,
      'SELECT campaign.id, campaign_criterion.keyword.text, campaign_criterion.keyword.match_type FROM campaign_criterion ' +
        // Google answers removed criteria too unless the query leaves them out.
        `WHERE campaign_criterion.negative = TRUE AND campaign_criterion.type = 'KEYWORD' AND campaign_criterion.status != 'REMOVED'${filter}`,
    );
    return rows.map((row) => ({
      campaign_id: text(row, 'campaign.id'),
      text: clippedText(row, 'campaignCriterion.keyword.text', 200),
      match_type: matchTypeOf(text(row, 'campaignCriterion.keyword.matchType')),
    }));
  }

  /** Applies a change with partialFailure; refused operations are reported per keyword, never silently dropped. */
  async applyChange(account: PlatformAccountRef, change: PlatformChange): Promise<ChangeOutcome> {
    return this.sendChange(account, change, false);
  }

  /** The dry run: the change sent with validateOnly. @throws GoogleAdsRequestError when Google would refuse it */
  async validateChange(account: PlatformAccountRef, change: PlatformChange): Promise<void> {
    await this.sendChange(account, change, true);
  }

  /** The account currency's minimum unit, as changeOperations rounds amounts to it. */
  async moneyUnit(account: PlatformAccountRef): Promise<number> {
    return minimumUnitMicros(await this.currencyOf(this.target(account))) / MICROS_PER_UNIT;
  }

  /**
   * The customer's currency (ISO 4217). A Google Ads account's currency is fixed when it is
   * made, so it is asked once per customer, not with every proposal and change.
   */
  private async currencyOf(target: GoogleAdsTarget): Promise<string> {
    const known = this.currencies.get(target.customerId);
    if (known !== undefined) return known;
    const currency = text((await this.transport.search(target, 'SELECT customer.currency_code FROM customer'))[0] ?? {}, 'customer.currencyCode');
    if (currency !== '') this.currencies.set(target.customerId, currency);
    return currency;
  }

  /** change_event rows at or after `since` (never older than Google keeps), oldest first. */
  async platformChanges(account: PlatformAccountRef, since: string): Promise<PlatformChangeObservedData[]> {
    const target = this.target(account);
    const oldest = oldestChangeTime(this.now());
    const from = /^\d{4}-\d{2}-\d{2} \d{2}:\d{2}:\d{2}(\.\d{1,6})?$/.test(since) && since > oldest ? since : oldest;
    // Google refuses an open range (CHANGE_DATE_RANGE_INFINITE) and a query without LIMIT.
    const rows = await this.transport.search(
      target,
      `SELECT ${CHANGE_EVENT_QUERY_FIELDS} FROM change_event WHERE change_event.change_date_time >= '${from}' ` +
        `AND change_event.change_date_time <= '${newestChangeTime(this.now())}' ` +
        `ORDER BY change_event.change_date_time ASC LIMIT ${CHANGE_EVENT_LIMIT}`,
    );
    return rows.map(observedChangeOf);
  }

  private async sendChange(account: PlatformAccountRef, change: PlatformChange, validateOnly: boolean): Promise<ChangeOutcome> {
    const target = this.target(account);
    const planned = await changeOperations(
      {
        target,
        findCampaign: (id) => this.findCampaign(target, id),
        negatives: async (campaignId) => this.listNegativeKeywords(account, campaignId),
        currency: () => this.currencyOf(target),
      },
      change,
    );
    if (planned.operations.length === 0) return { failures: [], applied: planned.skipped };
    const answer = await this.transport.mutate(target, planned.service, { operations: planned.operations, partialFailure: !validateOnly, validateOnly });
    if (validateOnly) return { failures: [], applied: [] };
    const errors = answer.partialFailure?.errors ?? [];
    const count = planned.operations.length;
    const placed = (error: (typeof errors)[number]) => error.operationIndex !== null && error.operationIndex >= 0 && error.operationIndex < count;
    // A negative created meanwhile (another worker, a lost answer resent by a proxy) is what the change wanted.
    const alreadyThere = (error: (typeof errors)[number]) => planned.service === 'campaignCriteria' && placed(error) && error.errorCode === 'mutateError.RESOURCE_ALREADY_EXISTS';
    const erredOn = (index: number) => errors.filter((e) => e.operationIndex === index);
    const present = new Set(planned.subjects.map((_, index) => index).filter((index) => erredOn(index).length > 0 && erredOn(index).every(alreadyThere)));
    const refusals = errors.filter((e) => !(placed(e) && present.has(e.operationIndex!)));
    // Google may report several errors for one operation: what failed is the distinct operations they name.
    const failedIndexes = new Set(refusals.filter(placed).map((e) => e.operationIndex!));
    const unplaced = refusals.some((e) => !placed(e));
    const resourceOf = (index: number) => {
      const name = answer.results[index]?.resourceName;
      return typeof name === 'string' && name !== '' ? name : null;
    };
    // An error that names no operation fails every operation that did not come back applied.
    const failedAt = (index: number) => failedIndexes.has(index) || (unplaced && !present.has(index) && resourceOf(index) === null);
    const failures = refusals.map((error) => ({
      subject: placed(error) ? (planned.subjects[error.operationIndex!] ?? 'the change') : 'the change',
      error_code: error.errorCode,
      message: error.message,
    }));
    // Not one operation went through and nothing of the change was in place before: the change
    // failed as a whole, as a refused request would. A part already in place (a negative an
    // earlier attempt created, whose answer was lost) makes it applied in part, or a change
    // that is live would be returned to the queue as refused, again on every approval.
    if (answer.partialFailure && refusals.length > 0 && planned.skipped.length === 0 && planned.subjects.every((_, index) => failedAt(index))) {
      throw new GoogleAdsRequestError(400, refusals, answer.partialFailure.requestId);
    }
    // Under partialFailure a refused operation's result is empty: only applied ones name a resource.
    const operations = planned.subjects.flatMap((subject, index) => {
      const resourceName = resourceOf(index);
      return !failedAt(index) && resourceName !== null ? [{ subject, resource_name: platformText(resourceName).slice(0, 300) }] : [];
    });
    return { failures, applied: [...planned.skipped, ...planned.subjects.filter((_, index) => !failedAt(index))], operations };
  }

  private target(account: PlatformAccountRef): GoogleAdsTarget {
    if (account.platform !== 'google-ads' || !account.googleAds) throw new AccountNotConnectedError(account.accountId);
    return { accountId: account.accountId, customerId: account.googleAds.customer_id, loginCustomerId: account.googleAds.login_customer_id };
  }

  private async openForRead(account: PlatformAccountRef, range: DateRange, campaignId: string | undefined): Promise<GoogleAdsTarget> {
    const target = this.target(account);
    checkRange(range);
    if (campaignId !== undefined) await this.requireCampaign(target, campaignId);
    return target;
  }

  private async requireCampaign(target: GoogleAdsTarget, campaignId: string): Promise<GoogleCampaign> {
    const found = await this.findCampaign(target, campaignId);
    if (!found || found.campaign.status === 'removed') throw new CampaignNotFoundError(clipText(String(campaignId), 64));
    return found;
  }

  private async findCampaign(target: GoogleAdsTarget, campaignId: string): Promise<GoogleCampaign | null> {
    if (typeof campaignId !== 'string' || !NUMERIC_ID.test(campaignId)) return null;
    return (await this.campaigns(target)).find((c) => c.campaign.id === campaignId) ?? null;
  }

  /**
   * Every campaign not removed, with the portfolios they bid with (and each portfolio's
   * campaigns) and whether their budget is shared (and the campaigns sharing it): a change
   * to either moves every campaign on it, which the policy must know.
   */
  private async campaigns(target: GoogleAdsTarget): Promise<GoogleCampaign[]> {
    const rows = await this.transport.search(
      target,
      'SELECT campaign.resource_name, campaign.id, campaign.name, campaign.status, campaign.bidding_strategy_type, campaign.bidding_strategy, ' +
        'campaign.campaign_budget, campaign.maximize_conversions.target_cpa_micros, campaign.maximize_conversion_value.target_roas, ' +
        'campaign.target_cpa.target_cpa_micros, campaign.target_roas.target_roas, campaign_budget.id, campaign_budget.amount_micros, ' +
        'campaign_budget.explicitly_shared, campaign_budget.reference_count ' +
        "FROM campaign WHERE campaign.status != 'REMOVED' ORDER BY campaign.id",
    );
    const members = membersBy(rows, 'campaign.biddingStrategy');
    const budgetMembers = membersBy(rows, 'campaign.campaignBudget');
    const portfolios = new Map<string, PortfolioRow>();
    if (members.size > 0) {
      const strategies = await this.transport.search(
        target,
        'SELECT bidding_strategy.resource_name, bidding_strategy.id, bidding_strategy.name, bidding_strategy.type, ' +
          'bidding_strategy.target_cpa.target_cpa_micros, bidding_strategy.target_roas.target_roas FROM bidding_strategy',
      );
      for (const row of strategies) {
        const portfolio = portfolioOf(row);
        portfolios.set(portfolio.resourceName, portfolio);
      }
    }
    return rows.map((row) => campaignOf(row, portfolios, members, budgetMembers));
  }

  /** The 30 days up to yesterday (UTC), as the sandbox's summary covers. */
  private last30Days(): DateRange {
    const day = (back: number) => new Date(this.now().getTime() - back * 86_400_000).toISOString().slice(0, 10);
    return { from: day(30), to: day(1) };
  }
}

/** The campaign ids of the rows by the resource at `path` (a portfolio, a budget), for resources several campaigns share. */
function membersBy(rows: readonly GoogleAdsRow[], path: string): Map<string, string[]> {
  const members = new Map<string, string[]>();
  for (const row of rows) {
    const shared = text(row, path);
    if (shared) members.set(shared, [...(members.get(shared) ?? []), text(row, 'campaign.id')]);
  }
  return members;
}
