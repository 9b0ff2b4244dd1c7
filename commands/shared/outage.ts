import { EventStoreError, EventStoreErrorCode } from '../../src/event-store/errors.ts';

/**
 * How long background work (workers, the policy, the CLI) waits out an unreachable event
 * log: a NATS cluster electing a new stream leader takes a few seconds. API requests do not
 * ride it out: they answer 503 once the NATS request fails (at once with no responders, after
 * its 5 s timeout when the request is lost).
 */
export const OUTAGE_RIDE_THROUGH_MS = 15_000;

/**
 * Waits a little when `error` says the event log is unreachable and the outage is younger
 * than `budgetMs`; rethrows anything else. Nothing was decided in an
 * attempt that failed this way, so deciding again after a reload is safe (a write that did
 * land is found by the reload, and the deciders decide nothing twice).
 */
export async function rideThroughOutage(error: unknown, since: number | undefined, budgetMs: number): Promise<number> {
  if (!(error instanceof EventStoreError && error.code === EventStoreErrorCode.Unavailable)) throw error;
  const started = since ?? Date.now();
  const elapsed = Date.now() - started;
  if (elapsed >= budgetMs) throw error;
  await new Promise((resolve) => setTimeout(resolve, Math.min(1000, 100 + elapsed / 4)));
  return started;
}

/**
 * Runs `work`, and again while it fails because the event log is unreachable, for at most
 * `budgetMs` (0: once). Only for reads and for work that decides nothing before it fails.
 */
export async function withOutageRideThrough<T>(work: () => Promise<T>, budgetMs: number): Promise<T> {
  let since: number | undefined;
  for (;;) {
    try {
      return await work();
    } catch (error) {
      since = await rideThroughOutage(error, since, budgetMs);
    }
  }
}
