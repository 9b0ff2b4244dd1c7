import type { Metrics } from '../ads-platform.ts';

/** Rounds money to cents, the precision stored (numeric(14,2)). */
export function cents(value: number): number {
  return Math.round((value + Number.EPSILON) * 100) / 100;
}

/**
 * A conversion count as the port gives it: to two decimals, but never rounded to 0 when it is
 * not 0. Data-driven attribution credits fractions of a conversion (0.004 is a real figure),
 * and the policy takes a keyword or search term with any conversion as converting: a fraction
 * rounded to 0 would let a converting keyword be paused, or a converting term negated, as safe.
 * Such a fraction keeps two significant digits instead. Snapped to millionths first: a sum of
 * reported counts leaves float residue (0.1 + 0.2 - 0.3 is 5.6e-17), which is 0, not a fraction.
 */
export function conversionCount(value: number): number {
  const snapped = Math.round(value * 1e6) / 1e6;
  const rounded = cents(snapped);
  return rounded === 0 && snapped !== 0 ? Number(snapped.toPrecision(2)) : rounded;
}

/** Postgres numeric and bigint arrive as strings (or null for an empty sum); reads need numbers. */
export function num(value: string | number | bigint | null | undefined): number {
  if (value === null || value === undefined) return 0;
  return Number(value);
}

/** Like `num` but keeps null (an unset target stays unset). */
export function numOrNull(value: string | number | null | undefined): number | null {
  return value === null || value === undefined ? null : Number(value);
}

/** Divides, or null when the denominator is zero (a CPA without conversions is undefined, not 0). */
function ratio(numerator: number, denominator: number, digits: number): number | null {
  if (denominator === 0) return null;
  const factor = 10 ** digits;
  return Math.round((numerator / denominator) * factor) / factor;
}

/** Summed metric columns as a query returns them. */
export interface MetricSums {
  impressions: string | number | null;
  clicks: string | number | null;
  cost: string | number | null;
  conversions: string | number | null;
  conversion_value: string | number | null;
}

/** Converts summed columns to the port's Metrics. */
export function toMetrics(row: MetricSums): Metrics {
  return {
    impressions: num(row.impressions),
    clicks: num(row.clicks),
    cost: cents(num(row.cost)),
    conversions: conversionCount(num(row.conversions)),
    conversion_value: cents(num(row.conversion_value)),
  };
}

/** CTR, CPC, CPA and ROAS of a metric total; ctr is 0 without impressions, the rest null when undefined. */
export function derivedRates(metrics: Metrics): { ctr: number; cpc: number | null; cpa: number | null; roas: number | null } {
  return {
    ctr: ratio(metrics.clicks, metrics.impressions, 4) ?? 0,
    cpc: ratio(metrics.cost, metrics.clicks, 2),
    cpa: ratio(metrics.cost, metrics.conversions, 2),
    roas: ratio(metrics.conversion_value, metrics.cost, 4),
  };
}
