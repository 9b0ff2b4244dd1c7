import { IdSequence, STRATEGY_OF_ROLE, planAccount, type AccountStructure, type CampaignPlan } from './account-structure.ts';
import { simulateDays } from './daily-simulation.ts';
import type {
  GeneratedAccount,
  GeneratedCampaign,
  GeneratedNegativeKeyword,
  GeneratedPortfolio,
  GeneratedSearchTermDay,
} from './generated-account.ts';
import { cents } from './sandbox-metrics.ts';
import { generateAdGroupTerms } from './search-term-generator.ts';
import { SeededRandom } from './seeded-random.ts';
import { THEMES, type Theme } from './themes.ts';

/** Negatives an account already has: words its search terms never contain, so history stays consistent. */
const EXISTING_NEGATIVES = ['careers', 'salary', 'pdf', 'craigslist', 'cartoon', 'images'];

const THEME_HINTS: readonly [string, RegExp][] = [
  ['outdoor', /outdoor|hik|camp|trail|mountain/i],
  ['florist', /flor|flower|bloom|bouquet|garden/i],
  ['software', /soft|saas|app\b|task|cloud|tech/i],
  ['coffee', /coffee|roast|bean|caf[eé]|espresso/i],
];

/** A theme the account's name asks for ("Bloom Florists" → florist), so demo data fits its name. */
function themeNamedIn(name: string): Theme | undefined {
  const key = THEME_HINTS.find(([, pattern]) => pattern.test(name))?.[0];
  return THEMES.find((t) => t.key === key);
}

/**
 * Generates a complete sandbox account from its seed (and its name, which may pick the
 * theme): a pure function (no clock, no I/O), so the same inputs always yield the same account. Each part draws from its own
 * forked generator, so tuning one part does not reshuffle the others.
 */
export function generateAccount(seed: number, accountName = ''): GeneratedAccount {
  const rng = new SeededRandom(seed);
  // The draw happens either way, so a name hint changes the theme and nothing else.
  const drawn = rng.pick(THEMES) as Theme;
  const theme = themeNamedIn(accountName) ?? drawn;
  const structure = planAccount(rng.fork('structure'), theme);
  const poor = choosePoorKeywords(rng.fork('poor'), structure);
  const counts = termCounts(rng.fork('term-counts'), structure);
  const termsRng = rng.fork('terms');
  const terms = structure.adGroups.flatMap((adGroup, index) =>
    generateAdGroupTerms(
      termsRng,
      theme,
      adGroup,
      structure.keywords.filter((k) => k.ad_group_id === adGroup.id),
      poor,
      counts[index] as { total: number; waste: number },
    ),
  );
  const searchTermDays = simulateDays(rng.fork('days'), structure.campaigns, terms);
  const { portfolios, campaigns } = settleStrategies(rng.fork('targets'), structure.campaigns, searchTermDays);
  return {
    seed,
    theme: theme.key,
    portfolios,
    campaigns,
    adGroups: structure.adGroups.map(({ id, campaign_id, name, status }) => ({ id, campaign_id, name, status })),
    keywords: structure.keywords.map(({ baseCpc: _price, ...keyword }) => keyword),
    searchTermDays,
    negativeKeywords: existingNegatives(rng.fork('negatives'), structure),
  };
}

/**
 * 15–40 terms per ad group, and how many of them are waste: 16–24 % of the account's
 * terms. Brand traffic (exact match on the brand) has none, so generic ad groups carry
 * the account's whole share.
 */
function termCounts(rng: SeededRandom, structure: AccountStructure): { total: number; waste: number }[] {
  const totals = structure.adGroups.map(() => rng.int(15, 40));
  const all = totals.reduce((sum, n) => sum + n, 0);
  const generic = totals.reduce((sum, n, i) => (structure.adGroups[i]?.campaign.brand ? sum : sum + n), 0);
  const genericShare = Math.min(0.4, (rng.float(0.16, 0.24) * all) / Math.max(1, generic));
  return structure.adGroups.map((adGroup, i) => {
    const total = totals[i] as number;
    return { total, waste: adGroup.campaign.brand ? 0 : Math.round(total * genericShare * rng.float(0.85, 1.15)) };
  });
}

/**
 * 1–3 keywords in different live generic campaigns with costly traffic that converts
 * poorly; the first converts never. Never an ad group's first keyword, which also
 * carries that ad group's waste.
 */
function choosePoorKeywords(rng: SeededRandom, structure: AccountStructure): Map<string, number> {
  const firstOfAdGroup = new Set(structure.adGroups.map((g) => structure.keywords.find((k) => k.ad_group_id === g.id)?.id));
  const live = new Set(structure.campaigns.filter((c) => !c.brand && c.status === 'enabled').map((c) => c.id));
  const candidates = structure.keywords.filter((k) => k.status === 'enabled' && live.has(k.campaign_id) && !firstOfAdGroup.has(k.id));
  const chosen = new Map<string, number>();
  const usedCampaigns = new Set<string>();
  const count = rng.int(1, 3);
  for (const keyword of rng.shuffle(candidates)) {
    if (chosen.size >= count) break;
    if (usedCampaigns.has(keyword.campaign_id)) continue;
    usedCampaigns.add(keyword.campaign_id);
    chosen.set(keyword.id, chosen.size === 0 ? 0 : rng.float(0.05, 0.12));
  }
  return chosen;
}

/** Sets targets near what campaigns achieved (±25–30 %), so some are on track and some are not. */
function settleStrategies(
  rng: SeededRandom,
  plans: readonly CampaignPlan[],
  days: readonly GeneratedSearchTermDay[],
): { portfolios: GeneratedPortfolio[]; campaigns: GeneratedCampaign[] } {
  const totals = (ids: ReadonlySet<string>) => {
    let cost = 0;
    let conversions = 0;
    let value = 0;
    for (const row of days) {
      if (!ids.has(row.campaign_id)) continue;
      cost += row.cost;
      conversions += row.conversions;
      value += row.conversion_value;
    }
    return { cost, conversions, value };
  };
  const targetCpa = (ids: ReadonlySet<string>) => {
    const t = totals(ids);
    const cpa = t.conversions > 0 ? t.cost / t.conversions : 40;
    return Math.max(1, Math.round(cpa * rng.float(0.75, 1.3) * 2) / 2);
  };
  const targetRoasPct = (ids: ReadonlySet<string>) => {
    const t = totals(ids);
    const roasPct = t.cost > 0 && t.value > 0 ? (t.value / t.cost) * 100 : 300;
    return Math.max(50, Math.round((roasPct * rng.float(0.75, 1.3)) / 10) * 10);
  };

  const onPortfolio = plans.filter((c) => c.role === 'portfolio');
  const portfolios: GeneratedPortfolio[] = [];
  if (onPortfolio.length > 0) {
    portfolios.push({
      id: new IdSequence(rng, 10).next(),
      name: 'Generic – Shared Target CPA',
      strategy_type: 'maximize_conversions',
      target_cpa: targetCpa(new Set(onPortfolio.map((c) => c.id))),
      target_roas_pct: null,
    });
  }
  const campaigns = plans.map((plan): GeneratedCampaign => {
    const own = new Set([plan.id]);
    const portfolio = plan.role === 'portfolio' ? (portfolios[0] ?? null) : null;
    return {
      id: plan.id,
      name: plan.name,
      status: plan.status,
      daily_budget: cents(plan.daily_budget),
      strategy_type: portfolio ? null : STRATEGY_OF_ROLE[plan.role],
      target_cpa: plan.role === 'target_cpa' ? targetCpa(own) : null,
      target_roas_pct: plan.role === 'target_roas' ? targetRoasPct(own) : null,
      portfolio_id: portfolio?.id ?? null,
    };
  });
  return { portfolios, campaigns };
}

function existingNegatives(rng: SeededRandom, structure: AccountStructure): GeneratedNegativeKeyword[] {
  const negatives: GeneratedNegativeKeyword[] = [];
  for (const campaign of structure.campaigns.filter((c) => !c.brand)) {
    if (!rng.chance(0.5)) continue;
    for (const text of rng.sample(EXISTING_NEGATIVES, rng.int(1, 3))) negatives.push({ campaign_id: campaign.id, text, match_type: 'phrase' });
  }
  return negatives;
}
