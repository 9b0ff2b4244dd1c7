import type { AccountState } from '../../../commands/account/account-state.ts';
import { AccountNotFoundError } from '../../../commands/errors.ts';
import type { Principal } from '../../auth/scopes.ts';
import type { PlatformAccountRef } from '../../platform/ads-platform.ts';
import { AccountNotConnectedError } from '../../platform/platform-errors.ts';
import { isIdToken, type ApiContext } from './api-context.ts';
import { loadAccount } from '../../../commands/queries.ts';
import { platformAccountOf } from '../../../commands/account/platform-account.ts';

/**
 * The account a path names, if it belongs to the caller's workspace. Read from the event
 * log (the account's aggregate), so a just-created account is found; another workspace's
 * account answers exactly like one that does not exist.
 */
export async function accountOf(api: ApiContext, principal: Principal, accountId: string): Promise<AccountState> {
  if (!isIdToken(accountId)) throw new AccountNotFoundError(accountId);
  const { aggregates } = api;
  const loaded = await loadAccount(aggregates, principal.workspaceId, accountId);
  if (!loaded.state.exists || loaded.state.workspaceId !== principal.workspaceId) throw new AccountNotFoundError(accountId);
  return loaded.state;
}

/** The account as the platform port needs it. @throws AccountNotConnectedError */
export function connectedAccount(accountId: string, state: AccountState): PlatformAccountRef {
  const ref = platformAccountOf(accountId, state);
  if (!ref) throw new AccountNotConnectedError(accountId);
  return ref;
}
