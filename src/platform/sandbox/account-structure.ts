import type { BiddingStrategyType, MatchType } from '../ads-platform.ts';
import type { GeneratedAdGroup, GeneratedKeyword } from './generated-account.ts';
import type { SeededRandom } from './seeded-random.ts';
import { KEYWORD_MODIFIERS, type Category, type Theme } from './themes.ts';

/**
 * The campaign / ad group / keyword skeleton of a generated account. Targets are not set
 * here: they are derived from the simulated performance, so they sit near what each
 * campaign actually achieves (like a real account's tuned targets).
 */

/** How a campaign bids; `portfolio` campaigns share one maximize_conversions strategy with a target CPA. */
export type StrategyRole = 'manual' | 'target_cpa' | 'target_roas' | 'max_conversions' | 'portfolio';

export interface CampaignPlan {
  readonly id: string;
  readonly name: string;
  readonly brand: boolean;
  readonly category: Category | null;
  readonly role: StrategyRole;
  readonly status: 'enabled' | 'paused';
  /** Last day index with traffic: a paused campaign stopped part-way through the period. */
  readonly lastActiveDay: number;
  readonly daily_budget: number;
  /** Share of the budget the campaign spends on an average day. */
  readonly utilisation: number;
}

export interface AdGroupPlan extends GeneratedAdGroup {
  readonly campaign: CampaignPlan;
  /** Phrase the ad group is built around ("waterproof hiking boots"). */
  readonly base: string;
}

export interface KeywordPlan extends GeneratedKeyword {
  /** Typical cost per click of the keyword's traffic (hidden auction price). */
  readonly baseCpc: number;
}

export interface AccountStructure {
  readonly brand: string;
  readonly campaigns: readonly CampaignPlan[];
  readonly adGroups: readonly AdGroupPlan[];
  readonly keywords: readonly KeywordPlan[];
}

export const STRATEGY_OF_ROLE: Record<StrategyRole, BiddingStrategyType> = {
  manual: 'manual_cpc',
  target_cpa: 'maximize_conversions',
  target_roas: 'maximize_conversion_value',
  max_conversions: 'maximize_conversions',
  portfolio: 'maximize_conversions',
};

/** Google-like numeric ids, increasing with random gaps so they do not look sequential. */
export class IdSequence {
  private current: number;
  private readonly rng: SeededRandom;

  constructor(rng: SeededRandom, digits: number) {
    this.rng = rng;
    this.current = rng.int(10 ** (digits - 1), 3 * 10 ** (digits - 1));
  }
  next(): string {
    this.current += this.rng.int(1, 977);
    return String(this.current);
  }
}

const titleCase = (text: string) => text.replace(/\b\p{L}/gu, (c) => c.toUpperCase());
const fill = (template: string, value: string) => template.replace('{}', value);
/** Keyword text of a brand name: lowercase, "&" spelt out as searchers type it. */
export const brandKeyword = (brand: string) => brand.toLowerCase().replace(/\s*&\s*/g, ' and ');

/** Plans 6–7 campaigns covering every bidding set-up the agent must handle. */
export function planAccount(rng: SeededRandom, theme: Theme): AccountStructure {
  const brand = rng.pick(theme.brands);
  const campaignIds = new IdSequence(rng, 11);
  const categories = rng.sample(theme.categories, 6);
  const genericRoles: StrategyRole[] = ['target_cpa', 'target_roas', 'max_conversions', 'portfolio', 'portfolio'];
  if (rng.chance(0.5)) genericRoles.push('manual');
  // The paused one is never a portfolio campaign, so a portfolio target change always moves two live campaigns.
  const pausedIndex = rng.pick([1, 2, ...(genericRoles.length > 5 ? [5] : [])]);

  const campaigns: CampaignPlan[] = [
    {
      id: campaignIds.next(),
      name: 'Brand – Exact',
      brand: true,
      category: null,
      role: 'manual',
      status: 'enabled',
      lastActiveDay: 29,
      daily_budget: rng.int(4, 12) * 5,
      utilisation: rng.float(0.55, 0.8),
    },
  ];
  genericRoles.forEach((role, index) => {
    const paused = index === pausedIndex;
    const category = categories[index] as Category;
    campaigns.push({
      id: campaignIds.next(),
      name: `Generic – ${category.title}`,
      brand: false,
      category,
      role,
      status: paused ? 'paused' : 'enabled',
      lastActiveDay: paused ? rng.int(12, 22) : 29,
      daily_budget: niceBudget(rng.float(35, 400)),
      // One campaign is visibly limited by its budget; the rest have headroom.
      utilisation: index === 0 ? rng.float(0.92, 0.98) : rng.float(0.55, 0.85),
    });
  });

  const adGroupIds = new IdSequence(rng, 12);
  const keywordIds = new IdSequence(rng, 12);
  const adGroups: AdGroupPlan[] = [];
  const keywords: KeywordPlan[] = [];
  for (const campaign of campaigns) {
    const groups = campaign.brand ? brandAdGroups(rng, brand, theme) : genericAdGroups(rng, campaign.category as Category);
    for (const group of groups) {
      const adGroup: AdGroupPlan = { id: adGroupIds.next(), campaign_id: campaign.id, name: group.name, status: 'enabled', campaign, base: group.base };
      adGroups.push(adGroup);
      group.keywords.forEach((text, index) => {
        // Brand traffic is cheap; the first keyword is the ad group's anchor and never paused.
        const baseCpc = campaign.brand ? rng.float(0.3, 0.7) : rng.float(theme.cpc[0], theme.cpc[1]);
        const matchType: MatchType = campaign.brand ? 'exact' : index === 0 ? rng.pick(['phrase', 'broad'] as const) : pickMatchType(rng);
        keywords.push({
          id: keywordIds.next(),
          campaign_id: campaign.id,
          ad_group_id: adGroup.id,
          text,
          match_type: matchType,
          status: index > 0 && rng.chance(0.07) ? 'paused' : 'enabled',
          max_cpc: campaign.role === 'manual' ? Math.min(4, Math.round(baseCpc * rng.float(1.15, 1.5) * 100) / 100) : null,
          baseCpc,
        });
      });
    }
  }
  return { brand, campaigns, adGroups, keywords };
}

function niceBudget(value: number): number {
  const step = value < 100 ? 5 : 10;
  return Math.min(400, Math.max(20, Math.round(value / step) * step));
}

function pickMatchType(rng: SeededRandom): MatchType {
  const r = rng.next();
  return r < 0.35 ? 'exact' : r < 0.75 ? 'phrase' : 'broad';
}

interface AdGroupDraft {
  readonly name: string;
  readonly base: string;
  readonly keywords: readonly string[];
}

function genericAdGroups(rng: SeededRandom, category: Category): AdGroupDraft[] {
  const modifiers = rng.sample(category.modifiers, rng.int(2, Math.min(4, category.modifiers.length)));
  return modifiers.map((modifier, index) => {
    const base = `${modifier} ${category.product}`;
    const variants = KEYWORD_MODIFIERS.map((template) => fill(template, base));
    // The bare product phrase belongs to the first ad group only, as a real account would structure it.
    if (index === 0) variants.push(category.product, `${category.product} online`);
    const count = rng.int(4, Math.min(10, variants.length + 1));
    return { name: titleCase(base), base, keywords: [base, ...rng.sample(variants, count - 1)] };
  });
}

function brandAdGroups(rng: SeededRandom, brand: string, theme: Theme): AdGroupDraft[] {
  const name = brandKeyword(brand);
  const joined = name.replace(/\s+/g, '');
  const drafts: AdGroupDraft[] = [
    { name: 'Brand', base: name, keywords: unique([name, joined, `${name} shop`, `${name} online`, `${name} store`, `${joined} de`, `www ${joined} de`]) },
    { name: 'Brand + Products', base: name, keywords: theme.categories.map((c) => `${name} ${c.product}`) },
    {
      name: 'Brand – Service',
      base: name,
      keywords: [`${name} discount code`, `${name} voucher`, `${name} reviews`, `${name} contact`, `${name} delivery`, `${name} opening hours`],
    },
    { name: 'Brand – Misspellings', base: name, keywords: misspellings(rng, joined, 8) },
  ];
  const groups = [drafts[0] as AdGroupDraft, ...rng.sample(drafts.slice(1), rng.int(1, 3))];
  return groups.map((group) => ({ ...group, keywords: group.keywords.slice(0, rng.int(4, Math.min(10, group.keywords.length))) }));
}

/** Plausible typos of a word: a dropped, doubled or swapped letter. */
export function misspellings(rng: SeededRandom, word: string, count: number): string[] {
  const found = new Set<string>();
  for (let attempt = 0; attempt < count * 10 && found.size < count; attempt++) {
    const i = rng.int(1, word.length - 2);
    const op = rng.int(0, 2);
    const typo =
      op === 0 ? word.slice(0, i) + word.slice(i + 1) : op === 1 ? word.slice(0, i) + word[i] + word.slice(i) : word.slice(0, i) + word[i + 1] + word[i] + word.slice(i + 2);
    if (typo !== word) found.add(typo);
  }
  return [...found];
}

function unique(items: readonly string[]): string[] {
  return [...new Set(items)];
}
