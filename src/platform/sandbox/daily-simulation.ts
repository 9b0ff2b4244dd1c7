import type { CampaignPlan } from './account-structure.ts';
import { DAYS_OF_DATA, type GeneratedSearchTermDay } from './generated-account.ts';
import { cents } from './sandbox-metrics.ts';
import type { SeededRandom } from './seeded-random.ts';
import type { TermSpec } from './search-term-generator.ts';

/**
 * Samples 30 days of search-term rows. Volumes are scaled per campaign so its average
 * daily cost is its budget times its utilisation: budgets and spend agree, as they
 * would in a live account. A term only gets a row on days it showed, which keeps the
 * long tail sparse and the row count to a few thousand.
 */
export function simulateDays(rng: SeededRandom, campaigns: readonly CampaignPlan[], terms: readonly TermSpec[]): GeneratedSearchTermDay[] {
  const phase = rng.float(0, 7);
  // A weekly rhythm and a slight trend, shared by the whole account.
  const dayFactor = Array.from(
    { length: DAYS_OF_DATA },
    (_, d) => 1 + 0.12 * Math.sin((2 * Math.PI * (d + phase)) / 7) + 0.1 * (d / (DAYS_OF_DATA - 1) - 0.5),
  );
  const scale = new Map<string, number>();
  for (const campaign of campaigns) {
    const expected = terms
      .filter((t) => t.campaign_id === campaign.id)
      .reduce((sum, t) => sum + t.appear * t.volume * t.ctr * t.cpc, 0);
    scale.set(campaign.id, expected > 0 ? (campaign.daily_budget * campaign.utilisation) / expected : 0);
  }
  const lastDay = new Map(campaigns.map((c) => [c.id, c.lastActiveDay]));

  const rows: GeneratedSearchTermDay[] = [];
  for (const term of terms) {
    const factor = scale.get(term.campaign_id) ?? 0;
    const last = lastDay.get(term.campaign_id) ?? DAYS_OF_DATA - 1;
    const sample = (day: number): GeneratedSearchTermDay => {
      const impressions = Math.max(1, Math.round(term.volume * factor * (dayFactor[day] ?? 1) * Math.exp(0.3 * rng.gaussian())));
      const clicks = rng.binomial(impressions, term.ctr);
      const conversions = rng.binomial(clicks, term.cr);
      let value = 0;
      for (let i = 0; i < conversions; i++) value += term.orderValue * rng.float(0.7, 1.4);
      return {
        day_index: day,
        search_term: term.search_term,
        campaign_id: term.campaign_id,
        ad_group_id: term.ad_group_id,
        keyword_id: term.keyword_id,
        impressions,
        clicks,
        cost: cents(clicks * term.cpc * rng.float(0.85, 1.15)),
        conversions,
        conversion_value: cents(value),
      };
    };
    const before = rows.length;
    for (let day = 0; day <= last; day++) if (rng.chance(term.appear)) rows.push(sample(day));
    // A term exists in a report only if it showed: each generated term shows at least once.
    if (rows.length === before) rows.push(sample(rng.int(0, last)));
  }
  return rows;
}
