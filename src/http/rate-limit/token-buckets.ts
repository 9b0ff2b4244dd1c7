/** A token bucket: `burst` requests at once, refilled at `ratePerSecond`. */
export interface BucketPolicy {
  /** Name announced in `RateLimit-Policy` / `RateLimit` (a structured-field string). */
  readonly name: string;
  readonly ratePerSecond: number;
  readonly burst: number;
}

export interface BucketDecision {
  readonly allowed: boolean;
  /** Whole requests still available after this one. */
  readonly remaining: number;
  /** Seconds until the bucket is full again (the draft's `t`). */
  readonly resetSeconds: number;
  /** Seconds until the next request would pass; 0 when this one passed. */
  readonly retryAfterSeconds: number;
}

interface Bucket {
  tokens: number;
  updatedMs: number;
}

/**
 * In-memory token buckets keyed by subject (an API key id or a client address). Taking a
 * token is O(1): one Map lookup and a little arithmetic, no I/O, so a key at its limit
 * costs every other caller nothing. The map is bounded: past `maxSubjects`, buckets that
 * have refilled completely are dropped (a full bucket and no bucket behave the same), and
 * if that is not enough the least recently used ones go, so a flood of distinct addresses
 * cannot grow memory without bound.
 */
export class TokenBuckets {
  private readonly buckets = new Map<string, Bucket>();

  private readonly policy: BucketPolicy;
  private readonly maxSubjects: number;
  private readonly now: () => number;

  constructor(
    policy: BucketPolicy,
    maxSubjects: number = 100_000,
    now: () => number = () => performance.now(),
  ) {
    this.policy = policy;
    this.maxSubjects = maxSubjects;
    this.now = now;
  }

  take(subject: string): BucketDecision {
    const { ratePerSecond, burst } = this.policy;
    const nowMs = this.now();
    const bucket = this.buckets.get(subject);
    let tokens = burst;
    if (bucket) {
      tokens = Math.min(burst, bucket.tokens + ((nowMs - bucket.updatedMs) / 1000) * ratePerSecond);
      // Re-inserting keeps the Map in least-recently-used order for eviction.
      this.buckets.delete(subject);
    } else if (this.buckets.size >= this.maxSubjects) {
      this.evict(nowMs);
    }
    const allowed = tokens >= 1;
    if (allowed) tokens -= 1;
    this.buckets.set(subject, { tokens, updatedMs: nowMs });
    return {
      allowed,
      remaining: Math.floor(tokens),
      resetSeconds: Math.ceil((burst - tokens) / ratePerSecond),
      retryAfterSeconds: allowed ? 0 : Math.max(1, Math.ceil((1 - tokens) / ratePerSecond)),
    };
  }

  get size(): number {
    return this.buckets.size;
  }

  private evict(nowMs: number): void {
    const { ratePerSecond, burst } = this.policy;
    for (const [subject, bucket] of this.buckets) {
      if (bucket.tokens + ((nowMs - bucket.updatedMs) / 1000) * ratePerSecond >= burst) this.buckets.delete(subject);
    }
    // Still crowded with busy subjects: drop the least recently used down to 90 %, so the
    // next scan is at least a tenth of `maxSubjects` inserts away (amortised O(1)).
    const target = Math.floor(this.maxSubjects * 0.9);
    for (const subject of this.buckets.keys()) {
      if (this.buckets.size <= target) break;
      this.buckets.delete(subject);
    }
  }
}
