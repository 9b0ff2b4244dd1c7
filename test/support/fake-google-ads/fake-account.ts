/**
 * The seeded Google Ads customer the fake serves: the resources the adapter reads, in the
 * API's own terms (micros, enum names, numeric ids), and 30 days of search-term rows that
 * hold wasted spend (no conversion) beside converting terms.
 */
export interface FakeCampaign {
  id: string;
  name: string;
  /** UNKNOWN: what Google answers for a status newer than the API version asked. */
  status: 'ENABLED' | 'PAUSED' | 'REMOVED' | 'UNKNOWN';
  budgetId: string;
  biddingStrategyType: string;
  /** Portfolio (shared) strategy id, when the campaign bids with one. */
  biddingStrategyId?: string;
  maximizeConversions?: { targetCpaMicros?: number };
  maximizeConversionValue?: { targetRoas?: number };
  targetCpa?: { targetCpaMicros?: number };
  targetRoas?: { targetRoas?: number };
}

export interface FakeBudget {
  id: string;
  amountMicros: number;
  /** A shared budget in Google Ads; unset, a budget is shared when more than one campaign uses it (only a shared one can be). */
  explicitlyShared?: boolean;
}

export interface FakePortfolio {
  id: string;
  name: string;
  type: string;
  targetCpa?: { targetCpaMicros?: number };
  targetRoas?: { targetRoas?: number };
}

export interface FakeKeyword {
  criterionId: string;
  adGroupId: string;
  text: string;
  matchType: 'EXACT' | 'PHRASE' | 'BROAD';
  /** UNKNOWN: what Google answers for a status newer than the API version asked. */
  status: 'ENABLED' | 'PAUSED' | 'REMOVED' | 'UNKNOWN';
  cpcBidMicros?: number;
}

export interface FakeSearchTermDay {
  date: string;
  searchTerm: string;
  adGroupId: string;
  criterionId: string;
  impressions: number;
  clicks: number;
  costMicros: number;
  conversions: number;
  conversionsValue: number;
}

export interface FakeNegative {
  criterionId: string;
  campaignId: string;
  text: string;
  matchType: 'EXACT' | 'PHRASE' | 'BROAD';
  /** Google keeps a removed criterion (status REMOVED) and answers it to any query that does not filter it out. Unset: ENABLED. */
  status?: 'ENABLED' | 'REMOVED';
}

export interface FakeChangeEvent {
  changeDateTime: string;
  changeResourceType: string;
  changeResourceName: string;
  clientType: string;
  userEmail: string;
  resourceChangeOperation: 'CREATE' | 'UPDATE' | 'REMOVE';
  changedFields: string;
  oldResource: Record<string, unknown>;
  newResource: Record<string, unknown>;
  campaign: string;
}

export interface FakeAccount {
  customerId: string;
  descriptiveName: string;
  currencyCode: string;
  timeZone: string;
  budgets: Map<string, FakeBudget>;
  portfolios: Map<string, FakePortfolio>;
  campaigns: Map<string, FakeCampaign>;
  adGroups: Map<string, { id: string; campaignId: string; name: string }>;
  keywords: Map<string, FakeKeyword>;
  searchTerms: FakeSearchTermDay[];
  negatives: FakeNegative[];
  changeEvents: FakeChangeEvent[];
}

const MICROS = 1_000_000;

/** A term's daily figures, repeated over each of the last `days` days (yesterday backwards). */
interface TermSpec {
  term: string;
  adGroupId: string;
  criterionId: string;
  clicks: number;
  cost: number;
  conversions: number;
  value?: number;
  days?: number;
}

/** Terms that converted (must never be blocked) and terms that only spent. */
export const CONVERTING_TERMS = ['hiking boots', 'waterproof hiking boots', 'camping tent', 'family camping tent', 'acme outdoor', 'sleeping bag'] as const;
export const WASTED_TERMS = ['free hiking boots', 'hiking boots repair', 'boot repair shop', 'hiking boots jobs', 'tent rental', 'tent rental prices', 'diy tent plans'] as const;

const TERMS: TermSpec[] = [
  { term: 'hiking boots', adGroupId: '1111', criterionId: '11111', clicks: 12, cost: 18, conversions: 1, value: 120 },
  { term: 'waterproof hiking boots', adGroupId: '1111', criterionId: '11112', clicks: 6, cost: 9, conversions: 0.5, value: 60 },
  { term: 'free hiking boots', adGroupId: '1111', criterionId: '11111', clicks: 1, cost: 1.5, conversions: 0 },
  { term: 'hiking boots repair', adGroupId: '1111', criterionId: '11111', clicks: 1, cost: 0.9, conversions: 0 },
  { term: 'boot repair shop', adGroupId: '1111', criterionId: '11111', clicks: 1, cost: 0.8, conversions: 0, days: 20 },
  { term: 'hiking boots jobs', adGroupId: '1111', criterionId: '11111', clicks: 1, cost: 1.1, conversions: 0 },
  { term: 'camping tent', adGroupId: '2221', criterionId: '22211', clicks: 10, cost: 15, conversions: 1, value: 300 },
  { term: 'family camping tent', adGroupId: '2221', criterionId: '22211', clicks: 4, cost: 7, conversions: 0.5, value: 200 },
  { term: 'tent rental', adGroupId: '2221', criterionId: '22211', clicks: 1, cost: 1.2, conversions: 0 },
  { term: 'tent rental prices', adGroupId: '2221', criterionId: '22211', clicks: 1, cost: 0.7, conversions: 0, days: 15 },
  { term: 'diy tent plans', adGroupId: '2221', criterionId: '22211', clicks: 1, cost: 0.9, conversions: 0 },
  { term: 'acme outdoor', adGroupId: '3331', criterionId: '33311', clicks: 8, cost: 4, conversions: 1, value: 90 },
  { term: 'sleeping bag', adGroupId: '6661', criterionId: '66611', clicks: 5, cost: 6, conversions: 0.3, value: 40 },
];

function isoDay(date: Date): string {
  return date.toISOString().slice(0, 10);
}

/** The seeded account, its 30 days of data ending yesterday (UTC) relative to `now`. */
export function seedFakeAccount(customerId = '1234567890', now = new Date()): FakeAccount {
  const campaigns: FakeCampaign[] = [
    { id: '111', name: 'Hiking boots - Search', status: 'ENABLED', budgetId: '501', biddingStrategyType: 'MAXIMIZE_CONVERSIONS', maximizeConversions: { targetCpaMicros: 25 * MICROS } },
    { id: '222', name: 'Tents - Search', status: 'ENABLED', budgetId: '502', biddingStrategyType: 'MAXIMIZE_CONVERSION_VALUE', maximizeConversionValue: { targetRoas: 4 } },
    { id: '333', name: 'Brand', status: 'ENABLED', budgetId: '503', biddingStrategyType: 'TARGET_CPA', biddingStrategyId: '900' },
    { id: '444', name: 'Jackets', status: 'PAUSED', budgetId: '504', biddingStrategyType: 'TARGET_CPA', biddingStrategyId: '900' },
    { id: '555', name: 'Old campaign', status: 'REMOVED', budgetId: '505', biddingStrategyType: 'MANUAL_CPC' },
    { id: '666', name: 'Sleeping bags', status: 'ENABLED', budgetId: '506', biddingStrategyType: 'TARGET_CPA', targetCpa: { targetCpaMicros: 30 * MICROS } },
  ];
  const budgets = [
    { id: '501', amountMicros: 50 * MICROS },
    { id: '502', amountMicros: 80 * MICROS },
    { id: '503', amountMicros: 30 * MICROS },
    { id: '504', amountMicros: 20 * MICROS },
    { id: '505', amountMicros: 10 * MICROS },
    { id: '506', amountMicros: 25 * MICROS },
  ];
  const adGroups = [
    { id: '1111', campaignId: '111', name: 'Boots' },
    { id: '2221', campaignId: '222', name: 'Tents' },
    { id: '3331', campaignId: '333', name: 'Brand' },
    { id: '6661', campaignId: '666', name: 'Bags' },
  ];
  const keywords: FakeKeyword[] = [
    { criterionId: '11111', adGroupId: '1111', text: 'hiking boots', matchType: 'BROAD', status: 'ENABLED', cpcBidMicros: 1_200_000 },
    { criterionId: '11112', adGroupId: '1111', text: 'waterproof hiking boots', matchType: 'PHRASE', status: 'ENABLED' },
    { criterionId: '22211', adGroupId: '2221', text: 'camping tent', matchType: 'BROAD', status: 'ENABLED' },
    { criterionId: '33311', adGroupId: '3331', text: 'acme outdoor', matchType: 'EXACT', status: 'ENABLED' },
    { criterionId: '66611', adGroupId: '6661', text: 'sleeping bag', matchType: 'BROAD', status: 'ENABLED' },
  ];
  const searchTerms: FakeSearchTermDay[] = [];
  for (const spec of TERMS) {
    for (let back = 1; back <= (spec.days ?? 30); back++) {
      const date = new Date(Date.UTC(now.getUTCFullYear(), now.getUTCMonth(), now.getUTCDate() - back));
      searchTerms.push({
        date: isoDay(date),
        searchTerm: spec.term,
        adGroupId: spec.adGroupId,
        criterionId: spec.criterionId,
        impressions: spec.clicks * 12,
        clicks: spec.clicks,
        costMicros: Math.round(spec.cost * MICROS),
        conversions: spec.conversions,
        conversionsValue: spec.value ?? 0,
      });
    }
  }
  return {
    customerId,
    descriptiveName: 'Acme Outdoor',
    currencyCode: 'EUR',
    timeZone: 'Europe/Berlin',
    budgets: new Map(budgets.map((b) => [b.id, b])),
    portfolios: new Map([['900', { id: '900', name: 'Portfolio tCPA', type: 'TARGET_CPA', targetCpa: { targetCpaMicros: 15 * MICROS } }]]),
    campaigns: new Map(campaigns.map((c) => [c.id, c])),
    adGroups: new Map(adGroups.map((g) => [g.id, g])),
    keywords: new Map(keywords.map((k) => [k.criterionId, k])),
    searchTerms,
    negatives: [],
    changeEvents: [],
  };
}
