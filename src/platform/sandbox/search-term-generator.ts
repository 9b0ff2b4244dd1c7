import type { AdGroupPlan, KeywordPlan } from './account-structure.ts';
import type { SeededRandom } from './seeded-random.ts';
import { COMMON_QUALIFIERS, COMMON_WASTE, type Theme } from './themes.ts';

/**
 * Search terms of one ad group and the hidden traffic parameters the daily simulation
 * samples from. Three tiers make the data look like real search-term reports: a few head
 * terms that show daily, some mid terms, a long tail that shows now and then. About a
 * fifth of a generic ad group's terms are irrelevant (waste): they get clicks but never convert.
 */
export interface TermSpec {
  readonly search_term: string;
  readonly campaign_id: string;
  readonly ad_group_id: string;
  readonly keyword_id: string;
  readonly waste: boolean;
  /** Probability the term shows on a given day. */
  readonly appear: number;
  /** Relative impression volume on a day it shows (scaled to the campaign budget later). */
  readonly volume: number;
  readonly ctr: number;
  readonly cpc: number;
  readonly cr: number;
  readonly orderValue: number;
}

const clamp = (value: number, min: number, max: number) => Math.min(max, Math.max(min, value));

/**
 * Generates `counts.total` unique search terms for an ad group, `counts.waste` of them
 * irrelevant, each matched to one of its enabled keywords in a way the keyword's match
 * type allows. `poorKeywords` (id → factor on the conversion rate, 0 for none at all) get
 * expensive, (almost) non-converting traffic: the "high spend, poor CPA" keywords an
 * optimiser should find.
 */
export function generateAdGroupTerms(
  rng: SeededRandom,
  theme: Theme,
  adGroup: AdGroupPlan,
  keywords: readonly KeywordPlan[],
  poorKeywords: ReadonlyMap<string, number>,
  counts: { readonly total: number; readonly waste: number },
): TermSpec[] {
  const enabled = keywords.filter((k) => k.status === 'enabled');
  const anchor = enabled[0];
  if (!anchor) return [];
  const { total, waste: wasteCount } = counts;
  const seen = new Set<string>();
  const specs: TermSpec[] = [];
  const qualifiers = [...theme.qualifiers, ...COMMON_QUALIFIERS];
  const orderValue = () => rng.float(theme.orderValue[0], theme.orderValue[1]);

  const add = (text: string, keyword: KeywordPlan, params: Omit<TermSpec, 'search_term' | 'campaign_id' | 'ad_group_id' | 'keyword_id' | 'orderValue'>) => {
    const term = text.replace(/\s+/g, ' ').trim();
    if (term.length === 0 || seen.has(term)) return false;
    seen.add(term);
    const poorFactor = poorKeywords.get(keyword.id);
    const poor = poorFactor !== undefined;
    specs.push({
      ...params,
      search_term: term,
      campaign_id: keyword.campaign_id,
      ad_group_id: keyword.ad_group_id,
      keyword_id: keyword.id,
      // A poor keyword attracts costly traffic that (nearly) never converts.
      cpc: clamp(poor ? params.cpc * 1.35 : params.cpc, 0.3, 4),
      cr: params.cr * (poorFactor ?? 1),
      volume: poor ? params.volume * 1.8 : params.volume,
      orderValue: orderValue(),
    });
    return true;
  };

  // Terms on a poor keyword: its own text shows daily, so the keyword carries real spend.
  for (const keyword of enabled.filter((k) => poorKeywords.has(k.id))) {
    add(keyword.text, keyword, { waste: false, appear: rng.float(0.85, 1), volume: rng.float(25, 45), ctr: rng.float(0.035, 0.06), cpc: priceOf(rng, keyword), cr: 0.03 });
  }

  const relevantTarget = total - wasteCount;
  // The first terms are the keywords' own texts: exact traffic is what drives an account.
  const heads = enabled.slice(0, 2).filter((k) => !seen.has(k.text));
  for (let attempt = 0; specs.length < relevantTarget && attempt < relevantTarget * 60; attempt++) {
    const rank = specs.length;
    const head = heads.shift();
    const keyword = head ?? rng.pick(enabled);
    const text = head ? head.text : variantOf(rng, keyword, qualifiers);
    const brand = adGroup.campaign.brand;
    const tier = rank < 2 ? 'head' : rank < 6 ? 'mid' : 'tail';
    add(text, keyword, {
      waste: false,
      appear: tier === 'head' ? rng.float(0.85, 1) : tier === 'mid' ? rng.float(0.15, 0.4) : rng.float(0.03, 0.1),
      volume: tier === 'head' ? rng.float(20, 60) : tier === 'mid' ? rng.float(5, 15) : rng.float(1, 5),
      ctr: brand ? rng.float(0.06, 0.1) : tier === 'head' ? rng.float(0.04, 0.09) : tier === 'mid' ? rng.float(0.02, 0.07) : rng.float(0.01, 0.05),
      cpc: priceOf(rng, keyword),
      cr: brand ? rng.float(0.05, 0.1) : tier === 'head' ? rng.float(0.03, 0.08) : tier === 'mid' ? rng.float(0.015, 0.06) : rng.float(0, 0.05),
    });
  }

  const templates = [...COMMON_WASTE, ...theme.waste, ...theme.competitors.map((c) => `${c} {}`)];
  const product = adGroup.campaign.category?.product ?? adGroup.base;
  // One or two irrelevant terms show most days: the costly waste; the rest is occasional.
  const heavy = wasteCount > 0 ? rng.int(1, Math.min(2, wasteCount)) : 0;
  for (let made = 0, attempt = 0; made < wasteCount && attempt < wasteCount * 25; attempt++) {
    // Irrelevant terms come in through the loosest keyword: broad reaches the bare product, phrase needs its own words.
    const phrase = anchor.match_type === 'broad' && rng.chance(0.6) ? product : anchor.text;
    const isHeavy = made < heavy;
    const added = add(rng.pick(templates).replace('{}', phrase), anchor, {
      waste: true,
      appear: isHeavy ? rng.float(0.5, 0.8) : rng.float(0.08, 0.3),
      volume: isHeavy ? rng.float(15, 35) : rng.float(3, 10),
      ctr: isHeavy ? rng.float(0.025, 0.06) : rng.float(0.015, 0.045),
      cpc: priceOf(rng, anchor),
      cr: 0,
    });
    if (added) made++;
  }
  return specs;
}

/** A term's price: near the keyword's market price, under its max CPC on manual bidding. */
function priceOf(rng: SeededRandom, keyword: KeywordPlan): number {
  const price = keyword.max_cpc !== null ? keyword.max_cpc * rng.float(0.55, 0.9) : keyword.baseCpc * rng.float(0.85, 1.15);
  return clamp(price, 0.3, 4);
}

/** A search term the keyword's match type would match. */
function variantOf(rng: SeededRandom, keyword: KeywordPlan, qualifiers: readonly string[]): string {
  const words = keyword.text.split(' ');
  const qualifier = rng.pick(qualifiers.filter((q) => !keyword.text.includes(q)));
  if (keyword.match_type === 'exact') {
    // Two edits now and then ("alpenpfad shop" → "alpenfad shp"): short brand lists need them to reach 15 terms.
    const variant = closeVariant(rng, words);
    return rng.chance(0.3) ? closeVariant(rng, variant.split(' ')) : variant;
  }
  const extended = rng.chance(0.5) ? `${qualifier} ${keyword.text}` : `${keyword.text} ${qualifier}`;
  if (keyword.match_type === 'phrase') return extended;
  // Broad match also reorders words and adds several qualifiers.
  const op = rng.int(0, 2);
  if (op === 0) return extended;
  if (op === 1) return `${words.slice(1).join(' ')} ${words[0]} ${qualifier}`;
  return `${rng.pick(qualifiers)} ${extended}`;
}

/** Exact match's close variants: plural, a typo, joined words, reordered words. */
function closeVariant(rng: SeededRandom, words: readonly string[]): string {
  const list = [...words];
  const i = rng.int(0, list.length - 1);
  const word = list[i] as string;
  switch (rng.int(0, 3)) {
    case 0:
      list[i] = word.endsWith('s') ? word.slice(0, -1) : `${word}s`;
      return list.join(' ');
    case 1: {
      if (word.length < 5) return list.join(' ');
      const at = rng.int(1, word.length - 2);
      list[i] = word.slice(0, at) + word.slice(at + 1);
      return list.join(' ');
    }
    case 2:
      if (list.length < 2) return `${word}s`;
      return [...list.slice(0, i), list.slice(i, i + 2).join('')].concat(list.slice(i + 2)).join(' ');
    default:
      return list.length < 2 ? word : [...list.slice(1), list[0]].join(' ');
  }
}
