/**
 * The amounts a proposal or an edit may name, in account currency units (ROAS in percent):
 * the smallest that do not round to 0 (a budget or target of 0 would be proposed, blocked,
 * and stay in the history) and the largest the Google Ads adapter takes (1e9 units stays
 * exact in micros; src/platform/google-ads/google-ads-changes.ts). One table for the agent's
 * tools, the target endpoint and the approver's edit, so a value is refused the same way
 * wherever it comes from, naming the field, instead of failing deeper down as an Infinity.
 */
export const AMOUNT_BOUNDS = {
  daily_budget: { minimum: 0.01, maximum: 1_000_000_000 },
  target_cpa: { minimum: 0.01, maximum: 1_000_000_000 },
  target_roas_pct: { minimum: 0.1, maximum: 100_000 },
} as const;

export type BoundedAmount = keyof typeof AMOUNT_BOUNDS;
