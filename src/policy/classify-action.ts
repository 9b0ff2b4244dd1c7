import type { ActionKind, RiskTier } from '../events/catalogue/index.ts';
import { tokensOf } from '../platform/keyword-match.ts';
import type { ActionDraft, BudgetBasis } from './action-draft.ts';

export interface Classification {
  readonly risk_tier: RiskTier;
  readonly policy_reasons: readonly string[];
}

/**
 * The limits of the safe tier. A change is safe only when it is small, reversible, touches
 * a small share of the account's spend, and cannot move other campaigns. docs/policy.md
 * documents every rule; tests pin each one.
 */
export const POLICY_LIMITS = {
  negativeKeywordsSafeMax: 10,
  negativeKeywordsMax: 50,
  pauseKeywordsSafeMax: 5,
  pauseKeywordsMax: 50,
  /** Largest share of the account's 30-day spend a safe change may touch. */
  spendShareSafeMax: 0.1,
  budgetChangeSafeMax: 0.2,
  budgetChangeMax: 1.0,
  targetChangeSafeMax: 0.1,
  targetChangeMax: 0.5,
  /** A campaign whose budget or target this service changed within these days is re-learning: no budget/target change is safe. */
  learningPeriodDays: 7,
  /** Largest share of the account's 30-day spend all of a UTC day's auto-applied negatives and pauses may touch together. */
  dailyAutoApplySpendShareMax: 0.1,
} as const;

/** Kinds that change a campaign's budget or target: held to the day's band and to the learning period. */
export const BUDGET_AND_TARGET_KINDS = ['set_campaign_budget', 'set_target_cpa', 'set_target_roas'] as const satisfies readonly ActionKind[];

/** What the policy knows beyond the draft itself, from the service's own events. */
export interface PolicyContext {
  /**
   * For a budget or target change: the first value of that campaign field the service saw
   * today (UTC), as recorded on the day's quota aggregate; null when nothing was recorded yet
   * (the current value is then the day's first).
   */
  readonly dayBaseline: number | null;
  /** The latest budget or target change this service applied to the campaign within the learning period, if any. */
  readonly recentChange: {
    readonly actionId: string;
    readonly kind: ActionKind;
    readonly appliedAt: string;
    /** Set when the change was made through a setting the campaign shares (made through another campaign on it). */
    readonly through?: { readonly portfolioId: string } | { readonly sharedBudgetId: string };
  } | null;
}

export const NO_POLICY_CONTEXT: PolicyContext = { dayBaseline: null, recentChange: null };

const FIELD_LABEL: Record<(typeof BUDGET_AND_TARGET_KINDS)[number], string> = {
  set_campaign_budget: 'budget',
  set_target_cpa: 'target CPA',
  set_target_roas: 'target ROAS',
};

const pct = (fraction: number) => `${(fraction * 100).toFixed(1)}%`;

/**
 * Whether a relative change is within ±`limit`. With a margin far below a cent on any amount:
 * in binary floating point an exact +10 % step can compute as 0.10000000000000009 (1 → 1.1),
 * which a bare `<=` would call beyond the limit.
 */
const withinLimit = (change: number, limit: number) => Math.abs(change) <= limit + 1e-9;

/**
 * A budget or target change is safe only if it also stays within the safe band measured
 * from the day's first value (so a day's auto-applied steps cannot compound) and the
 * campaign is not in a learning period. Returns the reasons it is not; empty when it is.
 */
function dayAndLearningReasons(kind: (typeof BUDGET_AND_TARGET_KINDS)[number], current: number, next: number, safeMax: number, context: PolicyContext): string[] {
  const reasons: string[] = [];
  const label = FIELD_LABEL[kind];
  const baseline = context.dayBaseline;
  if (baseline !== null && baseline > 0 && baseline !== current) {
    const fromBaseline = (next - baseline) / baseline;
    if (!withinLimit(fromBaseline, safeMax)) {
      reasons.push(
        `measured from today's first ${label} ${baseline} (UTC day), the change is ${pct(fromBaseline)}: a day's auto-applied changes stay within ±${pct(safeMax)} of it`,
      );
    }
  }
  if (context.recentChange) {
    const { kind: recentKind, appliedAt, actionId, through } = context.recentChange;
    const field = FIELD_LABEL[recentKind as keyof typeof FIELD_LABEL] ?? 'settings';
    const what = !through
      ? `the campaign's ${field}`
      : 'portfolioId' in through
        ? `the ${field} of portfolio strategy ${through.portfolioId}, which the campaign bids on`
        : `shared budget ${through.sharedBudgetId}, which the campaign draws on`;
    reasons.push(
      `learning period: this service changed ${what} at ${appliedAt} (action ${actionId}); ` +
        `no budget or target change is safe within ${POLICY_LIMITS.learningPeriodDays} days of another`,
    );
  }
  return reasons;
}

/**
 * A budget change is safe only on a budget of the campaign's own. A shared budget's change
 * moves every campaign on it, while the day band, the one-setting-per-day rule and the
 * learning period count per campaign: N campaigns on one budget would let a day move it N
 * "safe" steps and never hold it in a learning period. Returns why it is not safe, or null.
 */
function sharedBudgetReason(shared: BudgetBasis['shared_budget']): string | null {
  if (shared === undefined) return "whether the campaign's budget is shared with other campaigns was not read from the platform: a shared budget's change moves every campaign on it";
  if (shared === null) return null;
  return (
    `the campaign's budget ${shared.id} is a shared budget (campaigns ${shared.campaign_ids.join(', ')}): the change moves every campaign on it, ` +
    'and the day band and learning period count per campaign'
  );
}

/**
 * The fraction of the account's 30-day spend that `touchedCost` is. An account that shows no
 * spend (or a negative one, which no platform should answer) while the touched terms or
 * keywords cost something is inconsistent: counted as the whole spend, never as none of it.
 */
export function spendShare(touchedCost: number, accountCost: number): number {
  if (accountCost > 0) return touchedCost / accountCost;
  return touchedCost > 0 ? 1 : 0;
}

/** Classifies a draft into safe, review or blocked, with the reasons for it. Pure. */
export function classifyAction(draft: ActionDraft, context: PolicyContext = NO_POLICY_CONTEXT): Classification {
  const reasons: string[] = [];
  const blocked = (reason: string): Classification => ({ risk_tier: 'blocked', policy_reasons: [reason] });
  const L = POLICY_LIMITS;

  switch (draft.kind) {
    case 'add_negative_keywords': {
      const { keywords } = draft.params;
      const basis = draft.based_on;
      if (basis.campaign_status === 'removed') return blocked('campaign is removed');
      if (keywords.length > L.negativeKeywordsMax) return blocked(`more than ${L.negativeKeywordsMax} negative keywords in one action`);
      const share = spendShare(basis.matched_cost_30d, basis.account_cost_30d);
      let safe = true;
      if (keywords.length > L.negativeKeywordsSafeMax) {
        safe = false;
        reasons.push(`${keywords.length} negative keywords exceed the safe maximum of ${L.negativeKeywordsSafeMax}`);
      }
      // Not 0 either way: a negative count (conversions retracted) is not "no conversions". Nor
      // is a net 0 of terms that converted: one term's +1 and another's retraction cancel out.
      const convertingTerms = basis.converting_terms_30d ?? 0;
      if (basis.matched_conversions_30d !== 0 || convertingTerms > 0) {
        safe = false;
        const terms = convertingTerms > 0 ? `${convertingTerms} matching search term(s)` : 'matching search terms';
        reasons.push(`${terms} had conversions in 30 days (net ${basis.matched_conversions_30d})`);
      }
      if (share > L.spendShareSafeMax) {
        safe = false;
        reasons.push(`touches ${pct(share)} of the account's 30-day spend (safe maximum ${pct(L.spendShareSafeMax)})`);
      }
      const wordless = keywords.filter((k) => tokensOf(k.text).length === 0);
      if (wordless.length > 0) {
        // A negative without words matches nothing we can measure: its share of spend would read 0 %.
        safe = false;
        reasons.push(`${wordless.length} negative keyword(s) have no letters or digits to match on, so what they block cannot be measured`);
      }
      if (basis.blocked_keywords.length > 0) {
        safe = false;
        reasons.push(`would block the campaign's own keyword(s): ${basis.blocked_keywords.slice(0, 5).join(', ')}`);
      }
      if (safe) reasons.push(`${keywords.length} negative keyword(s) on search terms without conversions, ${pct(share)} of spend; reversible`);
      return { risk_tier: safe ? 'safe' : 'review', policy_reasons: reasons };
    }
    case 'pause_keywords': {
      const { keywords, account_cost_30d } = draft.based_on;
      if (draft.params.keyword_ids.length > L.pauseKeywordsMax) return blocked(`more than ${L.pauseKeywordsMax} keywords in one action`);
      const cost = keywords.reduce((sum, k) => sum + k.cost_30d, 0);
      const conversions = keywords.reduce((sum, k) => sum + k.conversions_30d, 0);
      // Each keyword on its own: one keyword's retracted conversions must not cancel another's.
      const converted = keywords.some((k) => k.conversions_30d !== 0);
      const share = spendShare(cost, account_cost_30d);
      let safe = true;
      if (keywords.length > L.pauseKeywordsSafeMax) {
        safe = false;
        reasons.push(`${keywords.length} keywords exceed the safe maximum of ${L.pauseKeywordsSafeMax}`);
      }
      if (converted) {
        safe = false;
        reasons.push(`the keywords had ${conversions} conversions in 30 days`);
      }
      if (share > L.spendShareSafeMax) {
        safe = false;
        reasons.push(`touches ${pct(share)} of the account's 30-day spend (safe maximum ${pct(L.spendShareSafeMax)})`);
      }
      if (safe) reasons.push(`pauses ${keywords.length} keyword(s) without conversions, ${pct(share)} of spend; reversible`);
      return { risk_tier: safe ? 'safe' : 'review', policy_reasons: reasons };
    }
    case 'set_campaign_budget': {
      const { daily_budget: current, campaign_status } = draft.based_on;
      const next = draft.params.daily_budget;
      if (campaign_status === 'removed') return blocked('campaign is removed');
      if (!(next > 0)) return blocked('a daily budget must be positive');
      const change = current > 0 ? (next - current) / current : Infinity;
      if (!withinLimit(change, L.budgetChangeMax)) return blocked(`changes the budget by ${pct(change)} (maximum ±${pct(L.budgetChangeMax)})`);
      const withinStep = withinLimit(change, L.budgetChangeSafeMax);
      reasons.push(`budget change of ${pct(change)} ${withinStep ? 'is within' : 'exceeds'} the safe ±${pct(L.budgetChangeSafeMax)}`);
      const shared = sharedBudgetReason(draft.based_on.shared_budget);
      if (shared) reasons.push(shared);
      const held = dayAndLearningReasons(draft.kind, current, next, L.budgetChangeSafeMax, context);
      reasons.push(...held);
      return { risk_tier: withinStep && !shared && held.length === 0 ? 'safe' : 'review', policy_reasons: reasons };
    }
    case 'set_target_cpa':
    case 'set_target_roas': {
      const basis = draft.based_on;
      const current = draft.kind === 'set_target_cpa' ? draft.based_on.target_cpa : draft.based_on.target_roas_pct;
      const next = draft.kind === 'set_target_cpa' ? draft.params.target_cpa : draft.params.target_roas_pct;
      const label = draft.kind === 'set_target_cpa' ? 'target CPA' : 'target ROAS';
      if (basis.campaign_status === 'removed') return blocked('campaign is removed');
      if (current === null) return blocked(`the campaign's strategy has no ${label} to change`);
      if (!(next > 0)) return blocked(`a ${label} must be positive`);
      const change = (next - current) / current;
      if (!withinLimit(change, L.targetChangeMax)) return blocked(`changes the ${label} by ${pct(change)} (maximum ±${pct(L.targetChangeMax)})`);
      let safe = withinLimit(change, L.targetChangeSafeMax);
      reasons.push(`${label} change of ${pct(change)} ${safe ? 'is within' : 'exceeds'} the safe ±${pct(L.targetChangeSafeMax)}`);
      if (basis.portfolio_id !== null) {
        safe = false;
        reasons.push(`the campaign uses portfolio strategy ${basis.portfolio_id}: the change moves ${basis.campaigns_affected} campaigns`);
      }
      const held = dayAndLearningReasons(draft.kind, current, next, L.targetChangeSafeMax, context);
      if (held.length > 0) safe = false;
      reasons.push(...held);
      return { risk_tier: safe ? 'safe' : 'review', policy_reasons: reasons };
    }
  }
}
