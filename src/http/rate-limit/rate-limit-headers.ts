import type { BucketDecision, BucketPolicy } from './token-buckets.ts';

/**
 * The header fields of draft-ietf-httpapi-ratelimit-headers-10 (the draft current in 2025;
 * syntax unchanged since -08): `RateLimit-Policy: "<name>";q=<quota>;w=<window s>` and
 * `RateLimit: "<name>";r=<remaining>;t=<seconds until the quota is whole again>`.
 * A token bucket of `burst` refilled at `rate`/s is announced as `burst` units per the
 * time it takes to refill from empty.
 */
export const RATE_LIMIT_POLICY_HEADER = 'RateLimit-Policy';
export const RATE_LIMIT_HEADER = 'RateLimit';

export function policyWindowSeconds(policy: BucketPolicy): number {
  return Math.max(1, Math.ceil(policy.burst / policy.ratePerSecond));
}

export function rateLimitHeaders(policy: BucketPolicy, decision: BucketDecision): Record<string, string> {
  return {
    [RATE_LIMIT_POLICY_HEADER]: policyHeaderValue(policy),
    [RATE_LIMIT_HEADER]: `"${policy.name}";r=${decision.remaining};t=${decision.resetSeconds}`,
  };
}

/** A policy's header never changes: built once per policy object, not per request. */
const policyValues = new WeakMap<BucketPolicy, string>();

function policyHeaderValue(policy: BucketPolicy): string {
  let value = policyValues.get(policy);
  if (value === undefined) {
    value = `"${policy.name}";q=${policy.burst};w=${policyWindowSeconds(policy)}`;
    policyValues.set(policy, value);
  }
  return value;
}
