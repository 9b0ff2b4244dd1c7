import { v7 as uuidv7 } from 'uuid';
import { identityProjection } from '../../projections/identity/identity-projection.ts';
import { waitForProjection } from '../../projections/runtime/projector.ts';
import { AccountNotFoundError, WorkspaceNotFoundError } from '../../commands/errors.ts';
import { lastSeqOf } from '../../commands/shared/handle.ts';
import { operatorActor } from './operator-actor.ts';
import { CredentialStore, CredentialsKeyMissingError } from '../platform/credentials/credential-store.ts';
import { normaliseCustomerId } from '../platform/google-ads/customer-id.ts';
import { exchangeRefreshToken } from '../platform/google-ads/oauth-token-client.ts';
import type { Infrastructure } from '../runtime/infrastructure.ts';
import type { OperatorResult } from './operator-commands.ts';
import { accountDecider } from '../../commands/account/account-decider.ts';
import { loadAccount, loadWorkspace } from '../../commands/queries.ts';
import { withSessionLock } from '../db/session-lock.ts';


export interface GoogleAdsConnection {
  readonly workspaceId: string;
  readonly name: string;
  /** As typed: with or without dashes. */
  readonly customerId: string;
  readonly loginCustomerId: string | undefined;
  readonly refreshToken: string;
}

/**
 * The Google Ads customer is already an account of this service. The safe-apply policy's
 * limits (20 auto-applied changes a day, the day bands, the spend-share cap, the learning
 * period) count per account: a customer connected twice would get them twice.
 */
export class GoogleAdsCustomerConnectedError extends Error {
  constructor(customerId: string, accountId: string, workspaceId: string) {
    super(
      `Google Ads customer ${customerId} is already connected as account ${accountId} (workspace ${workspaceId}); ` +
        'use that account (adsagent account reconnect ACCOUNT replaces its refresh token): connected twice, it would get the safe-apply limits twice',
    );
    this.name = 'GoogleAdsCustomerConnectedError';
  }
}

/**
 * Whether the customer is connected already cannot be told: the identity read model is behind
 * the event log (the service's projectors are not running, or catching up after an upgrade).
 */
export class CustomerConnectionUnknownError extends Error {
  constructor(customerId: string) {
    super(
      `cannot tell whether Google Ads customer ${customerId} is connected already: the accounts read model is behind the event log ` +
        '(is the service, with its projectors role, running?); start it, wait until /readyz answers 200, and run the command again',
    );
    this.name = 'CustomerConnectionUnknownError';
  }
}

/**
 * Creates a Google Ads account. The refresh token is proven at the token endpoint first (a
 * wrong one is refused before anything is written), then sealed into platform_credentials;
 * the AccountCreated event records only the platform and the customer ids. A customer is
 * connected once (GoogleAdsCustomerConnectedError).
 */
export async function connectGoogleAdsAccount(infra: Infrastructure, connection: GoogleAdsConnection): Promise<OperatorResult<{ id: string }>> {
  const customerId = normaliseCustomerId(connection.customerId, '--customer-id');
  const loginCustomerId = connection.loginCustomerId === undefined ? null : normaliseCustomerId(connection.loginCustomerId, '--login-customer-id');
  const workspace = await loadWorkspace(infra.aggregates, connection.workspaceId);
  if (!workspace.state.exists) throw new WorkspaceNotFoundError(connection.workspaceId);
  if (!infra.config.credentialsKey) throw new CredentialsKeyMissingError('so the refresh token could not be stored');
  // One connection of a customer at a time, until the account it makes is visible: two at once
  // would each find the customer unconnected.
  return withSessionLock(infra.database.db, `google-ads-customer:${customerId}`, async () => {
    // The identity read model after everything stored so far: an account connected a moment ago counts.
    if (!(await waitForProjection(infra.database.db, identityProjection.name, await infra.store.lastSequence(), 5000))) {
      throw new CustomerConnectionUnknownError(customerId);
    }
    const connected = await accountOfCustomer(infra, customerId);
    if (connected) throw new GoogleAdsCustomerConnectedError(customerId, connected.id, connected.workspaceId);
    return createGoogleAdsAccount(infra, connection, customerId, loginCustomerId);
  });
}

/**
 * The account a Google Ads customer is connected as, if any: the read model lists the Google Ads
 * accounts, and each one's customer is read from its AccountCreated (a few direct gets for an
 * operator command; no read model keeps customer ids, which would cost a rebuild of the identity
 * projection, and every API key with it, at the upgrade).
 */
async function accountOfCustomer(infra: Infrastructure, customerId: string): Promise<{ id: string; workspaceId: string } | null> {
  const accounts = await infra.database.db.selectFrom('accounts').select(['id', 'workspace_id']).where('platform', '=', 'google-ads').execute();
  for (const account of accounts) {
    const { state } = await loadAccount(infra.aggregates, account.workspace_id, account.id);
    if (state.googleAds?.customer_id === customerId) return { id: account.id, workspaceId: account.workspace_id };
  }
  return null;
}

/** The token proven, sealed, and the account created; the refresh token is removed again if the creation fails. */
async function createGoogleAdsAccount(infra: Infrastructure, connection: GoogleAdsConnection, customerId: string, loginCustomerId: string | null): Promise<OperatorResult<{ id: string }>> {
  await exchangeRefreshToken(infra.config.googleAds, connection.refreshToken);

  const accountId = uuidv7();
  const credentials = new CredentialStore(infra.database.db, infra.config.credentialsKey!);
  await credentials.put(accountId, 'google-ads', connection.refreshToken);
  let result;
  try {
    result = await infra.commands.handle(accountDecider, {
      type: 'CreateAccount',
      workspaceId: connection.workspaceId,
      accountId,
      name: connection.name,
      platform: 'google-ads',
      sandboxSeed: null,
      googleAds: { customer_id: customerId, login_customer_id: loginCustomerId },
      meta: { actor: operatorActor(), correlationId: accountId },
    });
  } catch (error) {
    // No account came of it: a stored token without one would make the service demand
    // CREDENTIALS_KEY and the OAuth client at every start (credentials-key-check.ts).
    await credentials.remove(accountId).catch(() => undefined);
    throw error;
  }
  const seq = lastSeqOf(result);
  const visible = seq === null || (await waitForProjection(infra.database.db, identityProjection.name, seq, 5000));
  return { value: { id: accountId }, visible };
}

/** Replaces the refresh token of a Google Ads account whose grant was revoked or expired. */
export async function reconnectGoogleAdsAccount(infra: Infrastructure, accountId: string, refreshToken: string): Promise<OperatorResult<{ id: string }>> {
  const row = await infra.database.db.selectFrom('accounts').select(['platform']).where('id', '=', accountId).executeTakeFirst();
  if (!row || row.platform !== 'google-ads') throw new AccountNotFoundError(accountId);
  if (!infra.config.credentialsKey) throw new CredentialsKeyMissingError('so the refresh token could not be stored');
  await exchangeRefreshToken(infra.config.googleAds, refreshToken);
  await new CredentialStore(infra.database.db, infra.config.credentialsKey).put(accountId, 'google-ads', refreshToken);
  return { value: { id: accountId }, visible: true };
}
