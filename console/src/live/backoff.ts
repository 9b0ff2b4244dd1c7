import { ApiProblem } from '../api/api-client.ts';

/** The first retry after a failed read waits this long; each further one twice as long, up to MAX_RETRY_DELAY_S. */
export const FIRST_RETRY_DELAY_S = 1;
export const MAX_RETRY_DELAY_S = 30;

/**
 * Delays between attempts after failures: 1 s, 2, 4, … up to 30 s, never sooner than the
 * failure's Retry-After. `reset()` after a success starts again at 1 s.
 */
export class Backoff {
  private delayS = FIRST_RETRY_DELAY_S;

  /** Seconds to wait before the next attempt after this failure. */
  next(error: unknown): number {
    const retryAfter = error instanceof ApiProblem ? (error.retryAfterSeconds ?? 0) : 0;
    const wait = Math.max(this.delayS, retryAfter);
    this.delayS = Math.min(MAX_RETRY_DELAY_S, this.delayS * 2);
    return wait;
  }

  reset(): void {
    this.delayS = FIRST_RETRY_DELAY_S;
  }
}

/** Resolves after `ms`, or at once when `signal` aborts (the caller checks `signal.aborted`). */
export function sleep(ms: number, signal: AbortSignal): Promise<void> {
  return new Promise((resolve) => {
    if (signal.aborted) return resolve();
    const timer = setTimeout(done, ms);
    function done() {
      clearTimeout(timer);
      signal.removeEventListener('abort', done);
      resolve();
    }
    signal.addEventListener('abort', done);
  });
}
