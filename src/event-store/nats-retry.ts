import { isNatsUnavailable } from './nats-unavailable.ts';

/** How long a process that is starting keeps trying while the NATS cluster cannot answer (an election, a loaded cluster). */
export const STARTUP_RIDE_THROUGH_MS = 30_000;

const BACKOFF_MS = [100, 250, 500, 1000, 2000] as const;

export interface RetryWhileUnavailableOptions {
  /** Epoch ms after which the last failure is thrown; Infinity to try until aborted. */
  readonly deadline: number;
  /** An abort ends the retries; the result is then undefined. */
  readonly signal?: AbortSignal;
}

/**
 * `attempt()` again, with a growing pause, while it fails because no NATS server can answer
 * (timeouts, no responders, JetStream's 503 — see isNatsUnavailable). Any other failure, and
 * the last one past `deadline`, is thrown. For idempotent steps only: creating a stream or a
 * consumer that may exist, reading.
 *
 * @example
 * ```ts
 * await retryWhileNatsUnavailable(() => ensureEventStream(jsm, options), { deadline: Date.now() + STARTUP_RIDE_THROUGH_MS });
 * ```
 */
export async function retryWhileNatsUnavailable<T>(attempt: () => Promise<T>, options: RetryWhileUnavailableOptions): Promise<T | undefined> {
  for (let failures = 0; ; failures++) {
    if (options.signal?.aborted) return undefined;
    try {
      return await attempt();
    } catch (error) {
      if (!isNatsUnavailable(error) || Date.now() >= options.deadline) throw error;
      await new Promise((resolve) => setTimeout(resolve, BACKOFF_MS[Math.min(failures, BACKOFF_MS.length - 1)]).unref());
    }
  }
}

/** Like {@link retryWhileNatsUnavailable} for a start-up step: tries for STARTUP_RIDE_THROUGH_MS. */
export async function duringStartup<T>(step: () => Promise<T>): Promise<T> {
  return (await retryWhileNatsUnavailable(step, { deadline: Date.now() + STARTUP_RIDE_THROUGH_MS }))!;
}
