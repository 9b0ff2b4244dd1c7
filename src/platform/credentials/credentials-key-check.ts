import type { Kysely } from 'kysely';
import { ConfigError, type Config } from '../../config/config.ts';
import type { Database } from '../../db/schema.ts';
import { CredentialStore } from './credential-store.ts';

/**
 * CREDENTIALS_KEY is optional until a Google Ads account exists; from then on a service
 * without it could not reach that account, so it refuses to start with a clear reason
 * instead of failing every run on it later.
 */
export async function requireCredentialsKeyIfNeeded(config: Config, db: Kysely<Database>): Promise<void> {
  if (config.credentialsKey) return;
  const count = await new CredentialStore(db, undefined).count();
  if (count > 0) {
    throw new ConfigError([`CREDENTIALS_KEY is required: ${count} Google Ads account(s) have stored refresh tokens it must decrypt; set it to the key they were stored with`]);
  }
}
