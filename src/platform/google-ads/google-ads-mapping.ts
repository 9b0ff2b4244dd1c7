import type { BiddingStrategy, BiddingStrategyType, Campaign, Keyword, MatchType, Metrics, SharedBudget } from '../ads-platform.ts';
import { cents, conversionCount } from '../sandbox/sandbox-metrics.ts';
import { sanitizeText } from '../../text/hostile-text.ts';
import { clipText } from '../../text/clip-text.ts';
import { GoogleAdsAnswerError } from './google-ads-errors.ts';
import type { GoogleAdsRow } from './google-ads-transport.ts';

/**
 * Google Ads JSON (camelCase, int64 as strings, enums as names) to the port's shapes, in
 * account currency units. Rows are hostile input: every read is typed and defaulted.
 */
export const MICROS_PER_UNIT = 1_000_000;

type Obj = Record<string, unknown>;
const obj = (value: unknown): Obj => (typeof value === 'object' && value !== null && !Array.isArray(value) ? (value as Obj) : {});
export const at = (row: GoogleAdsRow, path: string): unknown => path.split('.').reduce<unknown>((node, key) => obj(node)[key], row);
/** A string field; characters no event may carry (NUL, controls, lone surrogates) become U+FFFD, as for the model's text. */
export const text = (row: GoogleAdsRow, path: string): string => {
  const value = at(row, path);
  return typeof value === 'string' ? sanitizeText(value) : typeof value === 'number' ? String(value) : '';
};
/** A string field as `text` reads it, cut to at most `max` UTF-16 units without splitting a character (an emoji's surrogate pair). */
export const clippedText = (row: GoogleAdsRow, path: string, max: number): string => clipText(text(row, path), max);
/**
 * Above any count or amount Google can mean: a budget of 10^12 units in micros, a billion
 * times more conversions than searches run in a year. Below it, sums and conversions to units
 * and percents stay finite.
 */
export const MAX_PLATFORM_NUMBER = 1e18;

/** A present numeric field: int64 as a string or double as a number, finite, in [0, MAX_PLATFORM_NUMBER] (or, `signed`, in ±MAX_PLATFORM_NUMBER). */
function presentNumber(path: string, raw: unknown, signed = false): number {
  const value = typeof raw === 'number' ? raw : typeof raw === 'string' && raw.trim() !== '' ? Number(raw) : Number.NaN;
  if (!Number.isFinite(value) || value < (signed ? -MAX_PLATFORM_NUMBER : 0) || value > MAX_PLATFORM_NUMBER) throw new GoogleAdsAnswerError(path, raw);
  return value;
}

/**
 * Like {@link number}, negative values allowed: conversions and their value, which conversion
 * adjustments (retractions, restatements) can take below zero for a day.
 */
const signedNumber = (row: GoogleAdsRow, path: string): number => {
  const raw = at(row, path);
  return raw === undefined || raw === null ? 0 : presentNumber(path, raw, true);
};

/**
 * int64 (a string) or double (a number); 0 when absent (Google leaves zeros out of its JSON).
 * @throws GoogleAdsAnswerError when present but not a finite, non-negative number within range:
 *   taken as 0, "NaN" conversions would make a negative keyword look safe.
 */
export const number = (row: GoogleAdsRow, path: string): number => {
  const raw = at(row, path);
  return raw === undefined || raw === null ? 0 : presentNumber(path, raw);
};
/** Like {@link number}, null when absent or 0 (no target set). @throws GoogleAdsAnswerError as `number` does */
const optionalNumber = (row: GoogleAdsRow, path: string): number | null => {
  const value = number(row, path);
  return value > 0 ? value : null;
};

export const microsToUnits = (micros: number): number => cents(micros / MICROS_PER_UNIT);

export function metricsOf(row: GoogleAdsRow): Metrics {
  return {
    impressions: number(row, 'metrics.impressions'),
    clicks: number(row, 'metrics.clicks'),
    cost: microsToUnits(number(row, 'metrics.costMicros')),
    conversions: conversionCount(signedNumber(row, 'metrics.conversions')),
    conversion_value: cents(signedNumber(row, 'metrics.conversionsValue')),
  };
}

export function sumMetrics(list: readonly Metrics[]): Metrics {
  const sum = { impressions: 0, clicks: 0, cost: 0, conversions: 0, conversion_value: 0 };
  for (const m of list) {
    sum.impressions += m.impressions;
    sum.clicks += m.clicks;
    sum.cost += m.cost;
    sum.conversions += m.conversions;
    sum.conversion_value += m.conversion_value;
  }
  return { ...sum, cost: cents(sum.cost), conversions: conversionCount(sum.conversions), conversion_value: cents(sum.conversion_value) };
}

/**
 * Google's strategy types onto the port's. Target CPA and Target ROAS are Maximize
 * conversions (value) with a target, which is what Google migrated them to; the raw type is
 * kept (`GoogleCampaign.rawStrategyType`) so changes write the field the campaign really has.
 */
export function strategyTypeOf(googleType: string): BiddingStrategyType {
  switch (googleType) {
    case 'MAXIMIZE_CONVERSIONS':
    case 'TARGET_CPA':
      return 'maximize_conversions';
    case 'MAXIMIZE_CONVERSION_VALUE':
    case 'TARGET_ROAS':
      return 'maximize_conversion_value';
    case 'MANUAL_CPC':
      return 'manual_cpc';
    default:
      return 'other';
  }
}

/** Where a campaign's own target lives, by its Google strategy type (the updateMask path). */
export const TARGET_FIELDS = {
  MAXIMIZE_CONVERSIONS: { group: 'maximizeConversions', field: 'targetCpaMicros', kind: 'cpa' },
  TARGET_CPA: { group: 'targetCpa', field: 'targetCpaMicros', kind: 'cpa' },
  MAXIMIZE_CONVERSION_VALUE: { group: 'maximizeConversionValue', field: 'targetRoas', kind: 'roas' },
  TARGET_ROAS: { group: 'targetRoas', field: 'targetRoas', kind: 'roas' },
} as const satisfies Record<string, { group: string; field: string; kind: 'cpa' | 'roas' }>;
export type TargetStrategy = keyof typeof TARGET_FIELDS;

export function isTargetStrategy(type: string): type is TargetStrategy {
  return Object.hasOwn(TARGET_FIELDS, type);
}

/** A campaign as the adapter needs it to change it: the port's view plus Google's resource names. */
export interface GoogleCampaign {
  readonly campaign: Campaign;
  readonly rawStrategyType: string;
  readonly resourceName: string;
  readonly budgetResourceName: string;
  readonly portfolioResourceName: string | null;
}

export interface PortfolioRow {
  readonly resourceName: string;
  readonly id: string;
  readonly name: string;
  readonly type: string;
  readonly targetCpaMicros: number | null;
  readonly targetRoas: number | null;
}

export function portfolioOf(row: GoogleAdsRow): PortfolioRow {
  return {
    resourceName: text(row, 'biddingStrategy.resourceName'),
    id: text(row, 'biddingStrategy.id'),
    name: clippedText(row, 'biddingStrategy.name', 200),
    type: text(row, 'biddingStrategy.type'),
    targetCpaMicros: optionalNumber(row, 'biddingStrategy.targetCpa.targetCpaMicros'),
    targetRoas: optionalNumber(row, 'biddingStrategy.targetRoas.targetRoas'),
  };
}

/**
 * The shared budget a campaign row draws on, or null when the budget is the campaign's own.
 * Google lets only an explicitly shared budget serve more than one campaign; a reference
 * count above one is read as shared too, and so is a budget other campaigns of the same read
 * draw on, so a row that lacks the flag or miscounts cannot pass as own.
 *
 * @param budgetMembers the campaigns (not removed) of each budget resource name
 */
export function sharedBudgetOf(row: GoogleAdsRow, budgetMembers: ReadonlyMap<string, string[]>): SharedBudget | null {
  const resourceName = text(row, 'campaign.campaignBudget');
  const explicitlyShared = at(row, 'campaignBudget.explicitlyShared') === true;
  const drawnOnByOthers = (budgetMembers.get(resourceName)?.length ?? 0) > 1;
  if (!explicitlyShared && !drawnOnByOthers && number(row, 'campaignBudget.referenceCount') <= 1) return null;
  return { id: text(row, 'campaignBudget.id') || resourceName.split('/').at(-1) || '', campaign_ids: budgetMembers.get(resourceName) ?? [text(row, 'campaign.id')] };
}

export function campaignOf(
  row: GoogleAdsRow,
  portfolios: ReadonlyMap<string, PortfolioRow>,
  portfolioMembers: ReadonlyMap<string, string[]>,
  budgetMembers: ReadonlyMap<string, string[]>,
): GoogleCampaign {
  const rawStrategyType = text(row, 'campaign.biddingStrategyType');
  const portfolioResourceName = text(row, 'campaign.biddingStrategy') || null;
  const portfolio = portfolioResourceName ? portfolios.get(portfolioResourceName) : undefined;
  const type = strategyTypeOf(portfolio?.type ?? rawStrategyType);
  const cpaMicros = portfolio
    ? portfolio.targetCpaMicros
    : (optionalNumber(row, 'campaign.maximizeConversions.targetCpaMicros') ?? optionalNumber(row, 'campaign.targetCpa.targetCpaMicros'));
  const roas = portfolio ? portfolio.targetRoas : (optionalNumber(row, 'campaign.maximizeConversionValue.targetRoas') ?? optionalNumber(row, 'campaign.targetRoas.targetRoas'));
  const strategy: BiddingStrategy = {
    type,
    target_cpa: type === 'maximize_conversions' && cpaMicros !== null ? microsToUnits(cpaMicros) : null,
    target_roas_pct: type === 'maximize_conversion_value' && roas !== null ? Math.round(roas * 10_000) / 100 : null,
    portfolio:
      portfolioResourceName !== null
        ? { id: portfolio?.id ?? portfolioResourceName.split('/').at(-1) ?? '', name: portfolio?.name ?? '', campaign_ids: portfolioMembers.get(portfolioResourceName) ?? [] }
        : null,
  };
  const status = text(row, 'campaign.status');
  return {
    campaign: {
      id: text(row, 'campaign.id'),
      name: clippedText(row, 'campaign.name', 200),
      status: campaignStatusOf(status),
      daily_budget: microsToUnits(number(row, 'campaignBudget.amountMicros')),
      shared_budget: sharedBudgetOf(row, budgetMembers),
      bidding_strategy: strategy,
    },
    rawStrategyType,
    resourceName: text(row, 'campaign.resourceName'),
    budgetResourceName: text(row, 'campaign.campaignBudget'),
    portfolioResourceName,
  };
}

/**
 * Google's campaign status onto the port's. Only PAUSED is paused: UNKNOWN (a status newer than
 * the API version spoken) or UNSPECIFIED may be serving, and the model and the approver were told
 * "paused" of a campaign that may be spending.
 */
export function campaignStatusOf(value: string): Campaign['status'] {
  return value === 'ENABLED' ? 'enabled' : value === 'PAUSED' ? 'paused' : value === 'REMOVED' ? 'removed' : 'unknown';
}

/**
 * Google's keyword status onto the port's. Only PAUSED is paused: UNKNOWN (a status newer than
 * the API version spoken) or UNSPECIFIED may be serving, and a keyword taken as paused that is
 * not would be recorded paused by an apply worker's takeover with nothing sent, or left out of
 * the keywords a negative would block.
 */
export function keywordStatusOf(value: string): Keyword['status'] {
  return value === 'ENABLED' ? 'enabled' : value === 'PAUSED' ? 'paused' : 'unknown';
}

const MATCH_TYPES_FROM_GOOGLE: Record<string, MatchType> = { EXACT: 'exact', PHRASE: 'phrase', BROAD: 'broad' };
export const matchTypeOf = (value: string): MatchType => MATCH_TYPES_FROM_GOOGLE[value] ?? 'broad';
export const googleMatchType = (value: MatchType): string => value.toUpperCase();

/** The port's keyword id for an ad group criterion: criterion ids are unique only within their ad group. */
export const keywordIdOf = (adGroupId: string, criterionId: string): string => `${adGroupId}-${criterionId}`;

/** "customers/1/adGroupCriteria/1111~11111" -> "1111-11111". */
export function keywordIdFromResourceName(resourceName: string): string {
  const match = /\/adGroupCriteria\/(\d+)~(\d+)$/.exec(resourceName);
  return match ? keywordIdOf(match[1]!, match[2]!) : '';
}
