import { AsyncLocalStorage } from 'node:async_hooks';

/**
 * The moment by which platform calls made on a run's behalf must be done (the run's wall
 * clock). An adapter waiting out a rate limit gives up at once when the wait would pass it,
 * instead of sleeping the run into a timeout. Outside a run (HTTP routes, apply worker)
 * there is none and adapters use their own cap.
 */
const deadlines = new AsyncLocalStorage<number>();

export function withPlatformDeadline<T>(deadlineEpochMs: number, fn: () => Promise<T>): Promise<T> {
  return deadlines.run(deadlineEpochMs, fn);
}

export function platformDeadline(): number | undefined {
  return deadlines.getStore();
}
