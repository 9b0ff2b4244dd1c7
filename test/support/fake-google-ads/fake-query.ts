import type { FakeAccount, FakeBudget, FakeCampaign, FakeSearchTermDay } from './fake-account.ts';
import { GaqlError, parseGaql, type Condition, type GaqlQuery, type Literal } from './gaql.ts';

/**
 * Runs a GAQL query over the seeded account and answers GoogleAdsRow JSON as the REST API
 * does: nested camelCase objects holding only the selected fields, int64 values as
 * strings, enums as their names. Metrics are summed over every segment not selected
 * (segments.date filters the rows without splitting them unless it is selected).
 */
type FlatRow = Record<string, string | number | boolean | Record<string, unknown> | undefined>;

const METRICS = ['metrics.impressions', 'metrics.clicks', 'metrics.cost_micros', 'metrics.conversions', 'metrics.conversions_value'];
const INT64 = /(^|\.)(id|criterion_id|impressions|clicks|reference_count)$|_micros$/;

const CUSTOMER = ['customer.resource_name', 'customer.id', 'customer.descriptive_name', 'customer.currency_code', 'customer.time_zone'];
const CAMPAIGN = [
  'campaign.resource_name',
  'campaign.id',
  'campaign.name',
  'campaign.status',
  'campaign.bidding_strategy_type',
  'campaign.bidding_strategy',
  'campaign.campaign_budget',
  'campaign.maximize_conversions.target_cpa_micros',
  'campaign.maximize_conversion_value.target_roas',
  'campaign.target_cpa.target_cpa_micros',
  'campaign.target_roas.target_roas',
];
const BUDGET = ['campaign_budget.resource_name', 'campaign_budget.id', 'campaign_budget.amount_micros', 'campaign_budget.explicitly_shared', 'campaign_budget.reference_count'];
const AD_GROUP = ['ad_group.resource_name', 'ad_group.id', 'ad_group.name'];
const CRITERION = [
  'ad_group_criterion.resource_name',
  'ad_group_criterion.criterion_id',
  'ad_group_criterion.keyword.text',
  'ad_group_criterion.keyword.match_type',
  'ad_group_criterion.status',
  'ad_group_criterion.negative',
  'ad_group_criterion.type',
  'ad_group_criterion.cpc_bid_micros',
];
const PORTFOLIO = [
  'bidding_strategy.resource_name',
  'bidding_strategy.id',
  'bidding_strategy.name',
  'bidding_strategy.type',
  'bidding_strategy.target_cpa.target_cpa_micros',
  'bidding_strategy.target_roas.target_roas',
];
const CAMPAIGN_CRITERION = [
  'campaign_criterion.resource_name',
  'campaign_criterion.criterion_id',
  'campaign_criterion.negative',
  'campaign_criterion.status',
  'campaign_criterion.type',
  'campaign_criterion.keyword.text',
  'campaign_criterion.keyword.match_type',
];
const CHANGE_EVENT = [
  'change_event.resource_name',
  'change_event.change_date_time',
  'change_event.change_resource_type',
  'change_event.change_resource_name',
  'change_event.client_type',
  'change_event.user_email',
  'change_event.resource_change_operation',
  'change_event.changed_fields',
  'change_event.old_resource',
  'change_event.new_resource',
  'change_event.campaign',
];

/** Fields each FROM resource can select, and whether it carries metrics. */
const RESOURCES: Record<string, { fields: readonly string[]; metrics: boolean }> = {
  customer: { fields: [...CUSTOMER, ...METRICS, 'segments.date'], metrics: true },
  campaign: { fields: [...CAMPAIGN, ...BUDGET, ...CUSTOMER, ...METRICS, 'segments.date'], metrics: true },
  campaign_budget: { fields: [...BUDGET], metrics: false },
  bidding_strategy: { fields: [...PORTFOLIO], metrics: false },
  ad_group_criterion: { fields: [...CRITERION, ...AD_GROUP, ...CAMPAIGN], metrics: false },
  keyword_view: { fields: ['keyword_view.resource_name', ...CRITERION, ...AD_GROUP, ...CAMPAIGN, ...METRICS, 'segments.date'], metrics: true },
  search_term_view: {
    fields: ['search_term_view.resource_name', 'search_term_view.search_term', 'segments.keyword.ad_group_criterion', ...AD_GROUP, ...CAMPAIGN, ...METRICS, 'segments.date'],
    metrics: true,
  },
  campaign_criterion: { fields: [...CAMPAIGN_CRITERION, ...CAMPAIGN], metrics: false },
  change_event: { fields: CHANGE_EVENT, metrics: false },
};

/** `now` reads "yyyy-MM-dd HH:mm:ss.SSSSSS", as change_event.change_date_time does. */
export function runQuery(account: FakeAccount, text: string, now: string): { results: Record<string, unknown>[]; fieldMask: string } {
  const today = now.slice(0, 10);
  const query = parseGaql(text);
  const resource = RESOURCES[query.from];
  if (!resource) throw new GaqlError('INVALID_RESOURCE_NAME', `Error in FROM clause: invalid resource name ${query.from}.`);
  for (const field of [...query.select, ...query.where.map((c) => c.field), ...query.orderBy.map((o) => o.field)]) {
    if (!resource.fields.includes(field)) throw new GaqlError('UNRECOGNIZED_FIELD', `Error in query: unrecognized field in the query: '${field}'.`);
  }
  if (query.from === 'change_event') checkChangeEventQuery(query, now);
  checkDailyGranularity(query, today);
  const usesMetrics = resource.metrics && [...query.select, ...query.where.map((c) => c.field)].some((f) => f.startsWith('metrics.') || f.startsWith('segments.'));
  let rows = flatRows(account, query.from, usesMetrics);
  const isAfterAggregation = (c: Condition) => c.field.startsWith('metrics.');
  rows = rows.filter((row) => query.where.filter((c) => !isAfterAggregation(c)).every((c) => holds(row, c, today)));
  if (usesMetrics) rows = aggregate(rows, query.select.filter((f) => !f.startsWith('metrics.')));
  rows = rows.filter((row) => query.where.filter(isAfterAggregation).every((c) => holds(row, c, today)));
  rows = sortRows(rows, query);
  if (query.limit !== null) rows = rows.slice(0, query.limit);
  return { results: rows.map((row) => toJson(row, query.select)), fieldMask: query.select.map(camelPath).join(',') };
}

const DAY_MS = 86_400_000;

/** Google keeps metrics by day (segments.date) for this many months (DateRangeError). */
const DAILY_METRICS_MONTHS = 37;

/**
 * Google's rule for segments.date: metrics by day are kept for the last 37 months, and a
 * query whose date range starts before that is refused with DateRangeError
 * REQUESTED_DATE_GRANULARITY_NOT_SUPPORTED (answered here whether or not the date is selected:
 * code that works against this stricter reading works against either).
 */
function checkDailyGranularity(query: ReturnType<typeof parseGaql>, today: string): void {
  const earliest = new Date(`${today}T00:00:00Z`);
  earliest.setUTCMonth(earliest.getUTCMonth() - DAILY_METRICS_MONTHS);
  const earliestDay = earliest.toISOString().slice(0, 10);
  for (const c of query.where.filter((w) => w.field === 'segments.date')) {
    const start = c.op === 'BETWEEN' ? String(c.low) : c.op === '=' || c.op === '>' || c.op === '>=' ? String(c.value) : null;
    if (start !== null && start < earliestDay) {
      throw new GaqlError(
        'REQUESTED_DATE_GRANULARITY_NOT_SUPPORTED',
        'The requested time granularity is not supported for the date range in the query. Metrics with daily, hourly, or weekly segmentation are only available for the last 37 months.',
        'dateRangeError',
      );
    }
  }
}

/**
 * Google's rules for change_event (ChangeEventError): a LIMIT of at most 10,000, and
 * change_date_time bounded on both sides, starting no more than 30 days ago, not ending
 * before it starts.
 */
function checkChangeEventQuery(query: ReturnType<typeof parseGaql>, now: string): void {
  const fail = (code: string, message: string) => new GaqlError(code, message, 'changeEventError');
  if (query.limit === null) throw fail('LIMIT_NOT_SPECIFIED', 'A LIMIT must be specified for change_event queries.');
  if (query.limit > 10_000) throw fail('INVALID_LIMIT_CLAUSE', 'The LIMIT of a change_event query must be at most 10000.');
  let start: string | null = null;
  let end: string | null = null;
  for (const c of query.where.filter((w) => w.field === 'change_event.change_date_time')) {
    if (c.op === '>' || c.op === '>=') start = String(c.value);
    else if (c.op === '<' || c.op === '<=') end = String(c.value);
    else if (c.op === 'BETWEEN') [start, end] = [String(c.low), String(c.high)];
    else if (c.op === 'DURING') [start, end] = [now, now];
  }
  if (start === null || end === null) throw fail('CHANGE_DATE_RANGE_INFINITE', 'The change_date_time range must be bounded on both sides.');
  const startMs = Date.parse(`${start.replace(' ', 'T').slice(0, 23)}Z`);
  const endMs = Date.parse(`${end.replace(' ', 'T').slice(0, 23)}Z`);
  const nowMs = Date.parse(`${now.replace(' ', 'T').slice(0, 23)}Z`);
  if (Number.isNaN(startMs) || Number.isNaN(endMs)) throw new GaqlError('INVALID_VALUE_WITH_OPERATOR', 'Error in query: invalid date.');
  if (startMs < nowMs - 30 * DAY_MS) throw fail('START_DATE_TOO_OLD', 'The start date must be within the last 30 days.');
  if (endMs < startMs) throw fail('CHANGE_DATE_RANGE_NEGATIVE', 'The end of the change_date_time range must not be before its start.');
}

function resourceNames(account: FakeAccount) {
  const c = `customers/${account.customerId}`;
  return {
    customer: c,
    campaign: (id: string) => `${c}/campaigns/${id}`,
    budget: (id: string) => `${c}/campaignBudgets/${id}`,
    adGroup: (id: string) => `${c}/adGroups/${id}`,
    criterion: (adGroupId: string, id: string) => `${c}/adGroupCriteria/${adGroupId}~${id}`,
    portfolio: (id: string) => `${c}/biddingStrategies/${id}`,
  };
}

function customerFields(account: FakeAccount): FlatRow {
  return {
    'customer.resource_name': `customers/${account.customerId}`,
    'customer.id': Number(account.customerId),
    'customer.descriptive_name': account.descriptiveName,
    'customer.currency_code': account.currencyCode,
    'customer.time_zone': account.timeZone,
  };
}

function campaignFields(account: FakeAccount, campaign: FakeCampaign): FlatRow {
  const names = resourceNames(account);
  const budget = account.budgets.get(campaign.budgetId);
  return {
    'campaign.resource_name': names.campaign(campaign.id),
    'campaign.id': Number(campaign.id),
    'campaign.name': campaign.name,
    'campaign.status': campaign.status,
    'campaign.bidding_strategy_type': campaign.biddingStrategyType,
    'campaign.bidding_strategy': campaign.biddingStrategyId ? names.portfolio(campaign.biddingStrategyId) : undefined,
    'campaign.campaign_budget': names.budget(campaign.budgetId),
    'campaign.maximize_conversions.target_cpa_micros': campaign.maximizeConversions?.targetCpaMicros,
    'campaign.maximize_conversion_value.target_roas': campaign.maximizeConversionValue?.targetRoas,
    'campaign.target_cpa.target_cpa_micros': campaign.targetCpa?.targetCpaMicros,
    'campaign.target_roas.target_roas': campaign.targetRoas?.targetRoas,
    'campaign_budget.resource_name': names.budget(campaign.budgetId),
    'campaign_budget.id': Number(campaign.budgetId),
    ...(budget ? budgetFields(account, budget) : {}),
  };
}

/**
 * A budget as Google answers it. Only an explicitly shared budget can serve more than one
 * campaign (Google refuses to attach a second one to a budget of its own), so a budget that
 * fake campaigns share is answered as explicitly shared; reference_count counts the campaigns
 * (not removed) on it.
 */
function budgetFields(account: FakeAccount, budget: FakeBudget): FlatRow {
  const referenceCount = [...account.campaigns.values()].filter((c) => c.budgetId === budget.id && c.status !== 'REMOVED').length;
  return {
    'campaign_budget.resource_name': resourceNames(account).budget(budget.id),
    'campaign_budget.id': Number(budget.id),
    'campaign_budget.amount_micros': budget.amountMicros,
    'campaign_budget.explicitly_shared': budget.explicitlyShared ?? referenceCount > 1,
    'campaign_budget.reference_count': referenceCount,
  };
}

function metricFields(day: FakeSearchTermDay): FlatRow {
  return {
    'segments.date': day.date,
    'metrics.impressions': day.impressions,
    'metrics.clicks': day.clicks,
    'metrics.cost_micros': day.costMicros,
    'metrics.conversions': day.conversions,
    'metrics.conversions_value': day.conversionsValue,
  };
}

function flatRows(account: FakeAccount, from: string, withMetrics: boolean): FlatRow[] {
  const names = resourceNames(account);
  const campaignOfAdGroup = (adGroupId: string) => account.campaigns.get(account.adGroups.get(adGroupId)!.campaignId)!;
  const adGroupFields = (adGroupId: string): FlatRow => {
    const group = account.adGroups.get(adGroupId)!;
    return { 'ad_group.resource_name': names.adGroup(group.id), 'ad_group.id': Number(group.id), 'ad_group.name': group.name };
  };
  const criterionFields = (criterionId: string): FlatRow => {
    const k = account.keywords.get(criterionId)!;
    return {
      'ad_group_criterion.resource_name': names.criterion(k.adGroupId, k.criterionId),
      'ad_group_criterion.criterion_id': Number(k.criterionId),
      'ad_group_criterion.keyword.text': k.text,
      'ad_group_criterion.keyword.match_type': k.matchType,
      'ad_group_criterion.status': k.status,
      'ad_group_criterion.negative': false,
      'ad_group_criterion.type': 'KEYWORD',
      'ad_group_criterion.cpc_bid_micros': k.cpcBidMicros,
    };
  };
  switch (from) {
    case 'customer':
      return withMetrics ? account.searchTerms.map((day) => ({ ...customerFields(account), ...metricFields(day) })) : [customerFields(account)];
    case 'campaign':
      if (!withMetrics) return [...account.campaigns.values()].map((c) => ({ ...customerFields(account), ...campaignFields(account, c) }));
      return account.searchTerms.map((day) => ({ ...customerFields(account), ...campaignFields(account, campaignOfAdGroup(day.adGroupId)), ...metricFields(day) }));
    case 'campaign_budget':
      return [...account.budgets.values()].map((b) => budgetFields(account, b));
    case 'bidding_strategy':
      return [...account.portfolios.values()].map((p) => ({
        'bidding_strategy.resource_name': names.portfolio(p.id),
        'bidding_strategy.id': Number(p.id),
        'bidding_strategy.name': p.name,
        'bidding_strategy.type': p.type,
        'bidding_strategy.target_cpa.target_cpa_micros': p.targetCpa?.targetCpaMicros,
        'bidding_strategy.target_roas.target_roas': p.targetRoas?.targetRoas,
      }));
    case 'ad_group_criterion':
      return [...account.keywords.values()].map((k) => ({ ...criterionFields(k.criterionId), ...adGroupFields(k.adGroupId), ...campaignFields(account, campaignOfAdGroup(k.adGroupId)) }));
    case 'keyword_view':
      return account.searchTerms.map((day) => ({
        'keyword_view.resource_name': `customers/${account.customerId}/keywordViews/${day.adGroupId}~${day.criterionId}`,
        ...criterionFields(day.criterionId),
        ...adGroupFields(day.adGroupId),
        ...campaignFields(account, campaignOfAdGroup(day.adGroupId)),
        ...metricFields(day),
      }));
    case 'search_term_view':
      return account.searchTerms.map((day) => ({
        'search_term_view.resource_name': `customers/${account.customerId}/searchTermViews/${campaignOfAdGroup(day.adGroupId).id}~${day.adGroupId}~${Buffer.from(day.searchTerm).toString('base64url')}`,
        'search_term_view.search_term': day.searchTerm,
        'segments.keyword.ad_group_criterion': names.criterion(day.adGroupId, day.criterionId),
        ...adGroupFields(day.adGroupId),
        ...campaignFields(account, campaignOfAdGroup(day.adGroupId)),
        ...metricFields(day),
      }));
    case 'campaign_criterion':
      return account.negatives.map((n) => ({
        'campaign_criterion.resource_name': `customers/${account.customerId}/campaignCriteria/${n.campaignId}~${n.criterionId}`,
        'campaign_criterion.criterion_id': Number(n.criterionId),
        'campaign_criterion.negative': true,
        'campaign_criterion.status': n.status ?? 'ENABLED',
        'campaign_criterion.type': 'KEYWORD',
        'campaign_criterion.keyword.text': n.text,
        'campaign_criterion.keyword.match_type': n.matchType,
        ...campaignFields(account, account.campaigns.get(n.campaignId)!),
      }));
    case 'change_event':
      return account.changeEvents.map((e, index) => ({
        'change_event.resource_name': `customers/${account.customerId}/changeEvents/${Date.parse(e.changeDateTime.replace(' ', 'T') + 'Z') * 1000}~${index}~0`,
        'change_event.change_date_time': e.changeDateTime,
        'change_event.change_resource_type': e.changeResourceType,
        'change_event.change_resource_name': e.changeResourceName,
        'change_event.client_type': e.clientType,
        'change_event.user_email': e.userEmail,
        'change_event.resource_change_operation': e.resourceChangeOperation,
        'change_event.changed_fields': e.changedFields,
        'change_event.old_resource': e.oldResource,
        'change_event.new_resource': e.newResource,
        'change_event.campaign': e.campaign,
      }));
    default:
      return [];
  }
}

function aggregate(rows: FlatRow[], keyFields: readonly string[]): FlatRow[] {
  const groups = new Map<string, FlatRow>();
  for (const row of rows) {
    const key = JSON.stringify(keyFields.map((f) => row[f]));
    const group = groups.get(key);
    if (!group) {
      groups.set(key, { ...row });
      continue;
    }
    for (const metric of METRICS) group[metric] = Number(group[metric] ?? 0) + Number(row[metric] ?? 0);
  }
  return [...groups.values()];
}

const DURING_DAYS: Record<string, number> = { LAST_7_DAYS: 7, LAST_14_DAYS: 14, LAST_30_DAYS: 30 };

function holds(row: FlatRow, condition: Condition, today: string): boolean {
  const value = row[condition.field];
  // Booleans compare with the TRUE / FALSE literals, case-insensitively.
  const comparable = (v: unknown): string | number => (typeof v === 'number' ? v : typeof v === 'boolean' ? String(v).toUpperCase() : String(v ?? ''));
  const compare = (a: unknown, b: Literal) => {
    const left = comparable(a);
    const right = typeof left === 'number' ? Number(b) : typeof value === 'boolean' ? String(b).toUpperCase() : String(b);
    return left < right ? -1 : left > right ? 1 : 0;
  };
  switch (condition.op) {
    case '=':
      return compare(value, condition.value) === 0;
    case '!=':
      return compare(value, condition.value) !== 0;
    case '>':
      return compare(value, condition.value) > 0;
    case '>=':
      return compare(value, condition.value) >= 0;
    case '<':
      return compare(value, condition.value) < 0;
    case '<=':
      return compare(value, condition.value) <= 0;
    case 'IN':
      return condition.values.some((v) => compare(value, v) === 0);
    case 'NOT IN':
      return !condition.values.some((v) => compare(value, v) === 0);
    case 'BETWEEN':
      return compare(value, condition.low) >= 0 && compare(value, condition.high) <= 0;
    case 'LIKE':
    case 'NOT LIKE': {
      const pattern = new RegExp(`^${String(condition.value).replace(/[.*+?^${}()|[\]\\]/g, '\\$&').replace(/%/g, '.*')}$`, 'i');
      return pattern.test(String(value ?? '')) === (condition.op === 'LIKE');
    }
    case 'IS NULL':
      return value === undefined;
    case 'IS NOT NULL':
      return value !== undefined;
    case 'DURING': {
      const days = DURING_DAYS[condition.range];
      if (!days) throw new GaqlError('INVALID_VALUE_WITH_DURING_OPERATOR', `Error in query: invalid DURING range ${condition.range}.`);
      const end = new Date(`${today}T00:00:00Z`);
      const start = new Date(end.getTime() - days * 86_400_000).toISOString().slice(0, 10);
      const date = String(value ?? '');
      return date >= start && date < today;
    }
  }
}

function sortRows(rows: FlatRow[], query: GaqlQuery): FlatRow[] {
  if (query.orderBy.length === 0) return rows;
  return [...rows].sort((a, b) => {
    for (const { field, descending } of query.orderBy) {
      const x = a[field];
      const y = b[field];
      if (x === y) continue;
      const order = (x ?? '') < (y ?? '') ? -1 : 1;
      return descending ? -order : order;
    }
    return 0;
  });
}

function camelPath(path: string): string {
  return path
    .split('.')
    .map((part) => part.replace(/_([a-z])/g, (_, c: string) => c.toUpperCase()))
    .join('.');
}

function toJson(row: FlatRow, select: readonly string[]): Record<string, unknown> {
  const out: Record<string, unknown> = {};
  for (const field of select) {
    const value = row[field];
    if (value === undefined) continue;
    const parts = camelPath(field).split('.');
    let target = out;
    for (const part of parts.slice(0, -1)) target = (target[part] ??= {}) as Record<string, unknown>;
    target[parts.at(-1)!] = typeof value === 'number' && INT64.test(field) ? String(Math.round(value)) : value;
  }
  return out;
}
