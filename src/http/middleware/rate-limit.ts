import type { Context, Middleware } from 'koa';
import { UnauthorizedError } from '../../auth/auth-errors.ts';
import { presentedKey, rememberAuthentication, verifyKey, type Authentication } from '../../auth/authenticate.ts';
import type { KeyDirectory } from '../../auth/key-directory.ts';
import { clientAddressSubject } from '../rate-limit/client-address.ts';
import { RateLimitedError } from '../rate-limit/rate-limit-errors.ts';
import { RATE_LIMIT_HEADER, RATE_LIMIT_POLICY_HEADER, rateLimitHeaders } from '../rate-limit/rate-limit-headers.ts';
import { TokenBuckets, type BucketPolicy } from '../rate-limit/token-buckets.ts';
import { withFastLaneGate, type FastLaneGate } from '../fast-lane.ts';

export interface RateLimitOptions {
  readonly keys: KeyDirectory;
  /** Each valid API key's bucket. */
  readonly perKey: BucketPolicy;
  /** Each client address's bucket, for requests without a valid key. */
  readonly perAddress: BucketPolicy;
  /** Paths not limited for requests without credentials (health probes must keep answering under a flood). */
  readonly exemptPaths: ReadonlySet<string>;
  /** Sees every refused request (metrics). */
  readonly onLimited?: (policy: string) => void;
}

/**
 * Limits every request before any route runs. A request with a valid API key spends from
 * its key's bucket; anything else (no key, a malformed, unknown, revoked or wrong key)
 * spends from its client address's bucket. A key that is not in the key cache yet makes
 * the address pay first, so made-up keys reach Postgres only at the address's rate.
 * The answer is remembered for `authenticate`, so a request is never looked up twice.
 * Every limited response carries `RateLimit-Policy` and `RateLimit`; the error handler
 * keeps them on problem responses.
 */
export function rateLimit(options: RateLimitOptions): Middleware {
  const { keys, perKey, perAddress, exemptPaths, onLimited } = options;
  const keyBuckets = new TokenBuckets(perKey);
  const addressBuckets = new TokenBuckets(perAddress);

  const spend = (ctx: Context, buckets: TokenBuckets, policy: BucketPolicy, subject: string): void => {
    const decision = buckets.take(subject);
    const headers = rateLimitHeaders(policy, decision);
    if (!decision.allowed) {
      onLimited?.(policy.name);
      throw new RateLimitedError(policy.name, decision.retryAfterSeconds, headers);
    }
    ctx.set(headers);
  };

  // What the middleware does for a request with a valid cached key, for the GET fast lane (src/http/fast-lane.ts).
  const gate: FastLaneGate = (keyId) => {
    const decision = keyBuckets.take(keyId);
    // A refused token is not spent: the koa chain takes again and answers the 429.
    if (!decision.allowed) return undefined;
    const headers = rateLimitHeaders(perKey, decision);
    return [RATE_LIMIT_POLICY_HEADER, headers[RATE_LIMIT_POLICY_HEADER]!, RATE_LIMIT_HEADER, headers[RATE_LIMIT_HEADER]!];
  };

  return withFastLaneGate(async (ctx, next) => {
    // A probe sends no credentials; one that does is checked like any request (it may be after /readyz details).
    if (exemptPaths.has(ctx.path) && !ctx.get('authorization')) return next();
    const presented = presentedKey(ctx.get('authorization'));
    let authentication: Authentication | undefined;
    if (presented instanceof UnauthorizedError) {
      authentication = { kind: 'rejected', error: presented };
    } else {
      const cached = keys.cached(presented.keyId);
      if (cached !== undefined) authentication = verifyKey(presented.secret, cached === 'unknown' ? null : cached);
      // Issued a moment ago and still on its way into the cache: a real key id (a flood of made-up
      // ones never gets here), so it is looked up before its address's budget is charged.
      else if (keys.issuedJustNow(presented.keyId)) authentication = verifyKey(presented.secret, await keys.find(presented.keyId));
    }
    if (authentication?.kind !== 'authenticated') spend(ctx, addressBuckets, perAddress, clientAddressSubject(ctx.ip));
    if (!authentication && !(presented instanceof UnauthorizedError)) {
      authentication = verifyKey(presented.secret, await keys.find(presented.keyId));
    }
    if (authentication?.kind === 'authenticated') spend(ctx, keyBuckets, perKey, authentication.principal.keyId);
    if (authentication) rememberAuthentication(ctx, authentication);
    await next();
  }, gate);
}
