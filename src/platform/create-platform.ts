import type { Kysely } from 'kysely';
import { loadConfig, type Config } from '../config/config.ts';
import type { Database } from '../db/schema.ts';
import type { AdsPlatform, PlatformAccountRef, PlatformChange } from './ads-platform.ts';
import { CredentialDecryptError } from './credentials/credential-cipher.ts';
import { CredentialsKeyMissingError, CredentialStore } from './credentials/credential-store.ts';
import { AccessTokenCache } from './google-ads/access-token-cache.ts';
import { GoogleAdsNotConnectedError } from './google-ads/google-ads-errors.ts';
import { GoogleAdsPlatform } from './google-ads/google-ads-platform.ts';
import { GoogleAdsTransport, type TransportOptions } from './google-ads/google-ads-transport.ts';
import { exchangeRefreshToken, OAuthGrantRefusedError } from './google-ads/oauth-token-client.ts';
import { AccountNotConnectedError } from './platform-errors.ts';
import { SandboxPlatform } from './sandbox/sandbox-platform.ts';

/**
 * The ads platform the service talks to: each call goes to the adapter of the account's
 * platform, the sandbox (generated data in Postgres) or Google Ads (its REST API).
 */
export function createPlatform(
  db: Kysely<Database>,
  // Without a config (sandbox-only tests and benchmarks), Google Ads accounts have no key and no client: they fail as not connected.
  config: Pick<Config, 'googleAds' | 'credentialsKey'> = loadConfig({}),
  options: { googleAds?: TransportOptions } = {},
): AdsPlatform {
  const sandbox = new SandboxPlatform(db);
  const credentials = new CredentialStore(db, config.credentialsKey);
  const tokens = new AccessTokenCache(async (accountId) => {
    const refreshToken = await readRefreshToken(credentials, accountId);
    if (refreshToken === null) throw new GoogleAdsNotConnectedError(accountId, 'no refresh token is stored for it');
    try {
      return await exchangeRefreshToken(config.googleAds, refreshToken);
    } catch (error) {
      if (error instanceof OAuthGrantRefusedError) throw new GoogleAdsNotConnectedError(accountId, error.message || error.oauthError);
      throw error;
    }
  });
  const googleAds = new GoogleAdsPlatform(new GoogleAdsTransport(config.googleAds, tokens, options.googleAds));
  return new PlatformRouter(sandbox, googleAds);
}

/**
 * The stored refresh token; one the service cannot read is an account that is not connected
 * (a user can act on that), never a 500. The reason names the cause, never the key.
 */
async function readRefreshToken(credentials: CredentialStore, accountId: string): Promise<string | null> {
  try {
    return await credentials.get(accountId);
  } catch (error) {
    if (error instanceof CredentialsKeyMissingError) throw new GoogleAdsNotConnectedError(accountId, 'CREDENTIALS_KEY is not set', 'credential-unreadable');
    if (error instanceof CredentialDecryptError) {
      throw new GoogleAdsNotConnectedError(accountId, 'CREDENTIALS_KEY is not the key it was stored with, or the stored row was altered', 'credential-unreadable');
    }
    throw error;
  }
}

class PlatformRouter implements AdsPlatform {
  private readonly sandbox: AdsPlatform;
  private readonly googleAds: GoogleAdsPlatform;

  constructor(
    sandbox: AdsPlatform,
    googleAds: GoogleAdsPlatform,
  ) {
    this.sandbox = sandbox;
    this.googleAds = googleAds;
  }

  private of(account: PlatformAccountRef): AdsPlatform {
    if (account.platform === 'google-ads') return this.googleAds;
    if (account.platform === 'sandbox') return this.sandbox;
    throw new AccountNotConnectedError(account.accountId);
  }

  accountSummary: AdsPlatform['accountSummary'] = (account) => this.of(account).accountSummary(account);
  listCampaigns: AdsPlatform['listCampaigns'] = (account) => this.of(account).listCampaigns(account);
  getCampaign: AdsPlatform['getCampaign'] = (account, id) => this.of(account).getCampaign(account, id);
  campaignPerformance: AdsPlatform['campaignPerformance'] = (account, range, id) => this.of(account).campaignPerformance(account, range, id);
  listKeywords: AdsPlatform['listKeywords'] = (account, range, id) => this.of(account).listKeywords(account, range, id);
  searchTerms: AdsPlatform['searchTerms'] = (account, range, options) => this.of(account).searchTerms(account, range, options);
  searchTermTotals: AdsPlatform['searchTermTotals'] = (account, range, id) => this.of(account).searchTermTotals(account, range, id);
  listNegativeKeywords: AdsPlatform['listNegativeKeywords'] = (account, id) => this.of(account).listNegativeKeywords(account, id);
  applyChange: AdsPlatform['applyChange'] = (account, change) => this.of(account).applyChange(account, change);

  async platformChanges(account: PlatformAccountRef, since: string) {
    return (await this.of(account).platformChanges?.(account, since)) ?? [];
  }

  async validateChange(account: PlatformAccountRef, change: PlatformChange): Promise<void> {
    await this.of(account).validateChange?.(account, change);
  }

  /** The adapter's unit, or a cent (what the sandbox and the drafts hold). */
  async moneyUnit(account: PlatformAccountRef): Promise<number> {
    return (await this.of(account).moneyUnit?.(account)) ?? 0.01;
  }
}
