import type { Campaign, CampaignPerformance, Keyword, MatchType, SearchTerm } from '../../../platform/ads-platform.ts';
import { negativeBlocks, tokensOf } from '../../../platform/keyword-match.ts';
import type { FunctionCall } from '../model-port.ts';

/**
 * Standard paid-search heuristics over the account's own numbers. Each returns the
 * findings (for the answer) and the proposals (function calls) they justify.
 */
export interface Finding {
  readonly calls: FunctionCall[];
  readonly lines: string[];
}

const STOP_WORDS = new Set(['the', 'and', 'for', 'with', 'near', 'best', 'buy', 'online', 'shop', 'store', 'cheap', 'sale', 'me', 'in', 'to', 'of', 'a']);
const round = (n: number) => Math.round(n * 100) / 100;

export interface WastedTerm extends SearchTerm {}

/** Search terms with real spend and no conversion over the period. */
export function wastedSearchTerms(terms: readonly SearchTerm[]): WastedTerm[] {
  return terms.filter((t) => t.conversions === 0 && t.clicks >= 2 && t.cost >= 5).sort((a, b) => b.cost - a.cost);
}

/** The enabled campaigns whose search terms wasted the most, most first (at most `count`). */
export function topWasteCampaigns(terms: readonly SearchTerm[], enabled: ReadonlySet<string> | null, count = 3): string[] {
  const cost = new Map<string, number>();
  for (const term of wastedSearchTerms(terms)) {
    if (enabled && !enabled.has(term.campaign_id)) continue;
    cost.set(term.campaign_id, (cost.get(term.campaign_id) ?? 0) + term.cost);
  }
  return [...cost.entries()].sort((a, b) => b[1] - a[1]).slice(0, count).map(([id]) => id);
}

/**
 * Negative keywords for wasted terms: a word that recurs in wasted terms but never in a
 * converting one becomes a phrase negative; a costly one-off term becomes an exact one.
 * At most 10 per campaign, the 3 enabled campaigns with the most waste. `campaignTerms` holds the
 * complete search terms of those campaigns (the account overview is only the costliest);
 * no proposed negative may block a converting search term in either, nor an enabled
 * keyword of the campaign.
 */
export function negativeKeywordProposals(
  accountTerms: readonly SearchTerm[],
  campaignTerms: ReadonlyMap<string, readonly SearchTerm[]>,
  keywords: readonly Keyword[],
  enabled: ReadonlySet<string> | null,
  money: (n: number) => string,
): Finding {
  const wasted = wastedSearchTerms(accountTerms);
  const lines: string[] = [];
  const calls: FunctionCall[] = [];
  const wastedCost = round(wasted.reduce((s, t) => s + t.cost, 0));
  if (wasted.length === 0) return { calls, lines: ['No search term spent money without converting in the period.'] };
  lines.push(
    `${wasted.length} search terms spent ${money(wastedCost)} with no conversion (${wasted.reduce((s, t) => s + t.clicks, 0)} clicks). The most expensive:`,
    ...wasted.slice(0, 8).map((t) => `  - "${t.search_term}": ${money(t.cost)}, ${t.clicks} clicks, 0 conversions`),
  );

  for (const id of topWasteCampaigns(accountTerms, enabled)) {
    const terms = campaignTerms.get(id) ?? accountTerms.filter((t) => t.campaign_id === id);
    const list = wastedSearchTerms(terms);
    // A retraction is not "no conversions" to the policy either.
    const converting = [...terms, ...accountTerms].filter((t) => t.conversions !== 0);
    const convertingWords = new Set(converting.flatMap((t) => words(t.search_term)));
    const wordCost = new Map<string, { cost: number; terms: number }>();
    for (const term of list) {
      for (const word of new Set(words(term.search_term))) {
        if (convertingWords.has(word)) continue;
        const entry = wordCost.get(word) ?? { cost: 0, terms: 0 };
        wordCost.set(word, { cost: entry.cost + term.cost, terms: entry.terms + 1 });
      }
    }
    mergeWordPairs(list, wordCost);
    // As the policy counts them: a keyword of unknown status may be serving.
    const ownKeywords = keywords.filter((k) => k.campaign_id === id && k.status !== 'paused');
    // A negative must block neither a converting search term nor one of the campaign's own keywords.
    const blocksConverting = (keyword: { text: string; match_type: MatchType }) =>
      converting.some((t) => negativeBlocks(keyword, t.search_term)) || ownKeywords.some((k) => negativeBlocks(keyword, k.text));
    const chosen: { text: string; match_type: 'phrase' | 'exact' }[] = [];
    const covered = new Set<string>();
    for (const [word, entry] of [...wordCost.entries()].sort((a, b) => b[1].cost - a[1].cost)) {
      if (chosen.length >= 10) break;
      if (entry.terms < 2 && entry.cost < 20) continue;
      const keyword = { text: word, match_type: 'phrase' as const };
      if (blocksConverting(keyword)) continue;
      chosen.push(keyword);
      for (const term of list) if (negativeBlocks(keyword, term.search_term)) covered.add(term.search_term);
    }
    for (const term of list) {
      if (chosen.length >= 10) break;
      const keyword = { text: tokensOf(term.search_term).join(' '), match_type: 'exact' as const };
      if (!covered.has(term.search_term) && term.cost >= 20 && !blocksConverting(keyword)) chosen.push(keyword);
    }
    if (chosen.length === 0) continue;
    const blockedCost = list.filter((t) => chosen.some((k) => negativeBlocks(k, t.search_term))).reduce((sum, t) => sum + t.cost, 0);
    calls.push({
      name: 'add_negative_keywords',
      args: {
        campaign_id: id,
        keywords: chosen,
        reason: `The search terms these negatives block spent ${money(round(blockedCost))} in 30 days without a conversion.`,
      },
    });
  }
  return { calls, lines };
}

/**
 * Two words that only ever occur side by side in the wasted terms ("open source", "second
 * hand") become one phrase negative instead of two single words, which would also block
 * unrelated queries containing just one of them.
 */
function mergeWordPairs(terms: readonly SearchTerm[], wordCost: Map<string, { cost: number; terms: number }>): void {
  const pairCost = new Map<string, { cost: number; terms: number }>();
  for (const term of terms) {
    // Adjacent in the search term itself (stop words included), so the pair is a real phrase.
    const list = tokensOf(term.search_term);
    for (let i = 0; i + 1 < list.length; i++) {
      if (!wordCost.has(list[i]!) || !wordCost.has(list[i + 1]!)) continue;
      const pair = `${list[i]} ${list[i + 1]}`;
      const entry = pairCost.get(pair) ?? { cost: 0, terms: 0 };
      pairCost.set(pair, { cost: entry.cost + term.cost, terms: entry.terms + 1 });
    }
  }
  for (const [pair, entry] of [...pairCost.entries()].sort((a, b) => b[1].cost - a[1].cost)) {
    const [first, second] = pair.split(' ') as [string, string];
    const a = wordCost.get(first);
    const b = wordCost.get(second);
    if (!a || !b || entry.terms !== a.terms || entry.terms !== b.terms) continue;
    wordCost.delete(first);
    wordCost.delete(second);
    wordCost.set(pair, entry);
  }
}

function words(text: string): string[] {
  return tokensOf(text).filter((w) => w.length >= 3 && !STOP_WORDS.has(w));
}

/** Keywords that spent well beyond the account's cost per conversion and converted nothing. */
export function poorKeywordProposals(keywords: readonly Keyword[], accountCpa: number | null, money: (n: number) => string): Finding {
  const threshold = accountCpa !== null ? Math.max(10, accountCpa * 1.5) : 30;
  const poor = keywords
    .filter((k) => k.status === 'enabled' && k.conversions === 0 && k.cost >= threshold)
    .sort((a, b) => b.cost - a.cost);
  if (poor.length === 0) return { calls: [], lines: [`No enabled keyword spent over ${money(threshold)} without converting.`] };
  const chosen = poor.slice(0, 5);
  return {
    calls: [
      {
        name: 'pause_keywords',
        args: {
          keyword_ids: chosen.map((k) => k.id),
          reason: `Each spent more than ${money(threshold)} (1.5x the account's cost per conversion) in 30 days without a conversion.`,
        },
      },
    ],
    lines: [
      `${poor.length} enabled keywords spent more than ${money(threshold)} each without a conversion:`,
      ...chosen.map((k) => `  - "${k.text}" (${k.match_type}): ${money(k.cost)}, ${k.clicks} clicks, 0 conversions`),
    ],
  };
}

/** Budget-limited campaigns that convert at or below the account's CPA get +15%; very costly ones -15%. */
export function budgetProposals(
  campaigns: readonly Campaign[],
  performance: readonly CampaignPerformance[],
  accountCpa: number | null,
  days: number,
  money: (n: number) => string,
): Finding {
  const lines: string[] = [];
  const calls: FunctionCall[] = [];
  for (const campaign of campaigns.filter((c) => c.status === 'enabled')) {
    const perf = performance.find((p) => p.campaign_id === campaign.id);
    if (!perf) continue;
    const utilisation = perf.cost / (campaign.daily_budget * days);
    const efficient = perf.cpa !== null && accountCpa !== null && perf.cpa <= accountCpa;
    if (utilisation >= 0.9 && efficient) {
      const next = round(campaign.daily_budget * 1.15);
      lines.push(`"${campaign.name}" used ${(utilisation * 100).toFixed(0)}% of its budget at a CPA of ${money(perf.cpa!)} (account: ${money(accountCpa!)}): raise ${money(campaign.daily_budget)} to ${money(next)}.`);
      calls.push({ name: 'set_campaign_budget', args: { campaign_id: campaign.id, daily_budget: next, reason: 'Budget-limited and converting at or below the account CPA.' } });
    } else if (accountCpa !== null && (perf.cpa === null ? perf.cost > accountCpa * 3 : perf.cpa > accountCpa * 2)) {
      const next = round(campaign.daily_budget * 0.85);
      lines.push(`"${campaign.name}" spent ${money(perf.cost)} at ${perf.cpa === null ? 'no conversions' : `a CPA of ${money(perf.cpa)}`}: lower ${money(campaign.daily_budget)} to ${money(next)}.`);
      calls.push({ name: 'set_campaign_budget', args: { campaign_id: campaign.id, daily_budget: next, reason: 'Cost per conversion far above the account average.' } });
    }
  }
  if (lines.length === 0) lines.push('No campaign is clearly limited by budget or clearly over-spending.');
  return { calls: calls.slice(0, 3), lines };
}

/** Moves targets 8% toward what the campaign actually achieves, inside the safe tier. */
export function targetProposals(campaigns: readonly Campaign[], performance: readonly CampaignPerformance[], money: (n: number) => string): Finding {
  const lines: string[] = [];
  const calls: FunctionCall[] = [];
  for (const campaign of campaigns.filter((c) => c.status === 'enabled')) {
    const perf = performance.find((p) => p.campaign_id === campaign.id);
    const strategy = campaign.bidding_strategy;
    if (!perf) continue;
    if (strategy.target_cpa !== null && perf.cpa !== null) {
      const ratio = perf.cpa / strategy.target_cpa;
      if (ratio < 0.8 || ratio > 1.25) {
        const next = round(strategy.target_cpa * (ratio < 1 ? 0.92 : 1.08));
        lines.push(`"${campaign.name}": actual CPA ${money(perf.cpa)} vs target ${money(strategy.target_cpa)}; move the target to ${money(next)}.`);
        calls.push({ name: 'set_target_cpa', args: { campaign_id: campaign.id, target_cpa: next, reason: `Actual CPA is ${(ratio * 100).toFixed(0)}% of the target.` } });
      }
    }
    if (strategy.target_roas_pct !== null && perf.roas !== null) {
      const actualPct = perf.roas * 100;
      const ratio = actualPct / strategy.target_roas_pct;
      if (ratio < 0.8 || ratio > 1.25) {
        const next = Math.round(strategy.target_roas_pct * (ratio < 1 ? 0.92 : 1.08));
        lines.push(`"${campaign.name}": actual ROAS ${actualPct.toFixed(0)}% vs target ${strategy.target_roas_pct}%; move the target to ${next}%.`);
        calls.push({ name: 'set_target_roas', args: { campaign_id: campaign.id, target_roas_pct: next, reason: `Actual ROAS is ${(ratio * 100).toFixed(0)}% of the target.` } });
      }
    }
  }
  if (lines.length === 0) lines.push('Every target is within 20-25% of what its campaign achieves; no change needed.');
  return { calls: calls.slice(0, 3), lines };
}
