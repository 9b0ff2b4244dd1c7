import type { PlatformAccountRef } from '../../src/platform/ads-platform.ts';
import type { AccountState } from './account-state.ts';

/**
 * The account as the platform port addresses it, or null when it has no connected
 * advertising-platform account: the one connected-account rule the agent worker (fails the
 * run), the apply worker (returns the action), the proposal's dry run and the routes follow.
 *
 * @example
 * ```ts
 * const ref = platformAccountOf(accountId, (await loadAccount(aggregates, workspaceId, accountId)).state);
 * if (!ref) return returnToQueue('the account has no connected advertising-platform account');
 * ```
 */
export function platformAccountOf(accountId: string, state: Pick<AccountState, 'name' | 'platform' | 'sandboxSeed' | 'googleAds'>): PlatformAccountRef | null {
  if (state.platform === null || state.platform === 'none') return null;
  return { accountId, name: state.name, platform: state.platform, sandboxSeed: state.sandboxSeed, googleAds: state.googleAds };
}
