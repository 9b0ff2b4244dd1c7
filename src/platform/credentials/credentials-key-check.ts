import type { Kysely } from 'kysely';
import { ConfigError, type Config } from '../../config/config.ts';
import type { Database } from '../../db/schema.ts';
import { CredentialStore } from './credential-store.ts';

/**
 * CREDENTIALS_KEY (and the OAuth client) are optional until a Google Ads account exists;
 * from then on a service without them could not reach that account, so it refuses to start
 * with a clear reason instead of failing every run on it later.
 */
export async function requireCredentialsKeyIfNeeded(config: Config, db: Kysely<Database>): Promise<void> {
  if (config.credentialsKey && config.googleAds.clientId && config.googleAds.clientSecret) return;
  const count = await new CredentialStore(db, undefined).count();
  if (count === 0) return;
  const problems: string[] = [];
  if (!config.credentialsKey) problems.push(`CREDENTIALS_KEY is required: ${count} Google Ads account(s) have stored refresh tokens it must decrypt; set it to the key they were stored with`);
  for (const name of ['GOOGLE_ADS_CLIENT_ID', 'GOOGLE_ADS_CLIENT_SECRET'] as const) {
    const set = name === 'GOOGLE_ADS_CLIENT_ID' ? config.googleAds.clientId : config.googleAds.clientSecret;
    if (!set) problems.push(`${name} is required: ${count} Google Ads account(s) exist, and their refresh tokens were issued to that OAuth client`);
  }
  throw new ConfigError(problems);
}
