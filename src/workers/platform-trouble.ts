import { isAppError } from '../errors/app-error.ts';

/** Longest an action waits before its re-check is tried again after a platform outage or rate limit. */
const MAX_COME_BACK_MS = 5 * 60_000;

/**
 * What the apply worker does when the platform fails it before anything was changed (the
 * re-check reads): a grant that is gone will not come back by itself, so the action goes back
 * to the queue with the reason (a person reconnects and approves again); an outage or a rate
 * limit passes, so the message comes back after the platform's Retry-After. Anything else is
 * not the platform's trouble and stays the pull loop's (bounded retries, then parked).
 */
export type PlatformTrouble = { readonly kind: 'return'; readonly reason: string } | { readonly kind: 'later'; readonly delayMs: number };

export function platformTrouble(error: unknown): PlatformTrouble | null {
  if (!isAppError(error)) return null;
  switch (error.code) {
    case 'account-not-connected':
      return { kind: 'return', reason: `the account is not connected: ${error.message}` };
    case 'platform-unavailable':
    case 'platform-rate-limited': {
      const seconds = error.retryAfterSeconds;
      return { kind: 'later', delayMs: Math.min(MAX_COME_BACK_MS, seconds !== undefined && seconds > 0 ? seconds * 1000 : 5000) };
    }
    default:
      return null;
  }
}
