import { MATCH_TYPES, normaliseNegativeKeyword, type MatchType, type NegativeKeyword, type PlatformChange } from '../ads-platform.ts';
import { clipText } from '../../text/clip-text.ts';
import { CampaignNotFoundError } from '../platform-errors.ts';
import { ChangeNotApplicableError, KeywordNotFoundError } from '../sandbox/sandbox-errors.ts';
import { googleMatchType, isTargetStrategy, MICROS_PER_UNIT, TARGET_FIELDS, type GoogleCampaign } from './google-ads-mapping.ts';
import type { GoogleAdsTarget, MutateService } from './google-ads-transport.ts';


export interface PlannedChange {
  readonly service: MutateService;
  readonly operations: Record<string, unknown>[];
  /** What each operation is about, index for index ("negative \"free\" (phrase)"), for per-operation outcomes. */
  readonly subjects: string[];
  /** Parts already in place (a negative that exists): nothing to send, reported as applied. */
  readonly skipped: string[];
}

export interface ChangeContext {
  readonly target: GoogleAdsTarget;
  findCampaign(id: string): Promise<GoogleCampaign | null>;
  negatives(campaignId: string): Promise<NegativeKeyword[]>;
  /** The account's currency code (ISO 4217), for its minimum unit. */
  currency(): Promise<string>;
}

/**
 * The largest budget or target taken, in account currency units: a daily budget of a million
 * won or dong is an ordinary one (about 700 and 40 US dollars), and 1e9 units stays exact in
 * micros (below 2^53).
 */
const MAX_MONEY = 1_000_000_000;
const MAX_ROAS_PCT = 100_000;
/**
 * Currencies without minor units (ISO 4217 exponent 0): amounts are whole units there.
 * Google Ads refuses a budget that is not a multiple of the currency's minimum unit.
 */
const ZERO_DECIMAL_CURRENCIES = new Set(['BIF', 'CLP', 'DJF', 'GNF', 'ISK', 'JPY', 'KMF', 'KRW', 'PYG', 'RWF', 'UGX', 'VND', 'VUV', 'XAF', 'XOF', 'XPF']);

/** Micros of one minimum unit: 10,000 (a cent) for most currencies, 1,000,000 for zero-decimal ones. */
export function minimumUnitMicros(currency: string): number {
  return ZERO_DECIMAL_CURRENCIES.has(currency.toUpperCase()) ? MICROS_PER_UNIT : 10_000;
}

/** An amount in micros, rounded to the currency's minimum unit; refused (not clamped) out of range. */
function money(value: number, label: string, unitMicros: number): number {
  if (typeof value !== 'number' || !Number.isFinite(value) || value <= 0 || value > MAX_MONEY) {
    throw new ChangeNotApplicableError(`${label} must be between 0.01 and ${MAX_MONEY}, not ${String(value)}`);
  }
  const micros = Math.round((value * MICROS_PER_UNIT) / unitMicros) * unitMicros;
  if (micros <= 0) throw new ChangeNotApplicableError(`${label} rounds to 0 in the account's currency`);
  return micros;
}


async function campaign(context: ChangeContext, id: string): Promise<GoogleCampaign> {
  const found = await context.findCampaign(id);
  if (!found || found.campaign.status === 'removed') throw new CampaignNotFoundError(clipText(String(id), 64));
  return found;
}

/**
 * The mutate operations of one port change, in Google's JSON: negatives as campaign
 * criteria, paused keywords as ad group criterion status, budgets on the campaign budget,
 * targets on the field of the campaign's own strategy with an updateMask naming it.
 */
export async function changeOperations(context: ChangeContext, change: PlatformChange): Promise<PlannedChange> {
  const customer = `customers/${context.target.customerId}`;
  switch (change.kind) {
    case 'add_negative_keywords': {
      const found = await campaign(context, change.campaign_id);
      const existing = new Set((await context.negatives(found.campaign.id)).map((n) => `${n.match_type}:${normaliseNegativeKeyword(n.text)}`));
      const wanted = new Map<string, { text: string; match_type: MatchType }>();
      for (const keyword of change.keywords) {
        const text = typeof keyword.text === 'string' ? normaliseNegativeKeyword(keyword.text) : '';
        if (text.length === 0 || text.length > 80) throw new ChangeNotApplicableError(`a negative keyword needs 1–80 characters, not '${clipText(String(keyword.text), 100)}'`);
        if (!MATCH_TYPES.includes(keyword.match_type)) throw new ChangeNotApplicableError(`unknown match type '${clipText(String(keyword.match_type), 20)}'`);
        wanted.set(`${keyword.match_type}:${text}`, { text, match_type: keyword.match_type });
      }
      const planned: PlannedChange = { service: 'campaignCriteria', operations: [], subjects: [], skipped: [] };
      for (const [key, keyword] of wanted) {
        const subject = `negative "${keyword.text}" (${keyword.match_type})`;
        if (existing.has(key)) {
          planned.skipped.push(subject);
          continue;
        }
        planned.operations.push({ create: { campaign: found.resourceName, negative: true, keyword: { text: keyword.text, matchType: googleMatchType(keyword.match_type) } } });
        planned.subjects.push(subject);
      }
      return planned;
    }
    case 'pause_keywords': {
      const ids = [...new Set(change.keyword_ids)];
      const malformed = ids.filter((id) => typeof id !== 'string' || !/^[0-9]{1,19}-[0-9]{1,19}$/.test(id));
      if (malformed.length > 0) throw new KeywordNotFoundError(malformed.map((id) => clipText(String(id), 64)));
      return {
        service: 'adGroupCriteria',
        operations: ids.map((id) => ({ update: { resourceName: `${customer}/adGroupCriteria/${id.replace('-', '~')}`, status: 'PAUSED' }, updateMask: 'status' })),
        subjects: ids.map((id) => `keyword ${id}`),
        skipped: [],
      };
    }
    case 'set_campaign_budget': {
      const found = await campaign(context, change.campaign_id);
      const amountMicros = money(change.daily_budget, 'daily budget', minimumUnitMicros(await context.currency()));
      return {
        service: 'campaignBudgets',
        operations: [{ update: { resourceName: found.budgetResourceName, amountMicros: String(amountMicros) }, updateMask: 'amountMicros' }],
        subjects: [`daily budget of campaign ${found.campaign.id}`],
        skipped: [],
      };
    }
    case 'set_target_cpa':
    case 'set_target_roas': {
      const found = await campaign(context, change.campaign_id);
      const kind = change.kind === 'set_target_cpa' ? 'cpa' : 'roas';
      const label = kind === 'cpa' ? 'target CPA' : 'target ROAS';
      if (found.portfolioResourceName) {
        throw new ChangeNotApplicableError(
          `campaign ${found.campaign.id} bids with portfolio "${found.campaign.bidding_strategy.portfolio?.name ?? ''}"; its ${label} is the portfolio's, shared by campaigns ${(found.campaign.bidding_strategy.portfolio?.campaign_ids ?? []).join(', ')}, and is changed in Google Ads itself`,
        );
      }
      const strategy = found.rawStrategyType;
      if (!isTargetStrategy(strategy) || TARGET_FIELDS[strategy].kind !== kind) {
        throw new ChangeNotApplicableError(`campaign ${found.campaign.id} ("${found.campaign.name}") bids with ${strategy || 'an unknown strategy'}, which takes no ${label}`);
      }
      const { group, field } = TARGET_FIELDS[strategy];
      let value: string | number;
      if (change.kind === 'set_target_cpa') {
        value = String(money(change.target_cpa, 'target CPA', minimumUnitMicros(await context.currency())));
      } else {
        const pct = change.target_roas_pct;
        if (typeof pct !== 'number' || !Number.isFinite(pct) || pct <= 0 || pct > MAX_ROAS_PCT) {
          throw new ChangeNotApplicableError(`target ROAS percent must be between 0.01 and ${MAX_ROAS_PCT}, not ${String(pct)}`);
        }
        value = Math.round(pct * 100) / 10_000;
      }
      return {
        service: 'campaigns',
        operations: [{ update: { resourceName: found.resourceName, [group]: { [field]: value } }, updateMask: `${group}.${field}` }],
        subjects: [`${label} of campaign ${found.campaign.id}`],
        skipped: [],
      };
    }
    default: {
      const unknown: never = change;
      throw new ChangeNotApplicableError(`unknown change kind '${clipText(String((unknown as { kind?: unknown }).kind), 40)}'`);
    }
  }
}
