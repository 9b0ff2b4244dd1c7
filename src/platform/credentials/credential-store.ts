import type { Kysely } from 'kysely';
import type { Database } from '../../db/schema.ts';
import { openSecret, sealSecret } from './credential-cipher.ts';

/** No CREDENTIALS_KEY while a secret must be stored or read. */
export class CredentialsKeyMissingError extends Error {
  constructor(reason: string) {
    super(`CREDENTIALS_KEY is not set, ${reason}; set it to base64 of 32 random bytes (openssl rand -base64 32)`);
    this.name = 'CredentialsKeyMissingError';
  }
}

/**
 * Platform secrets (refresh tokens) per account, sealed with CREDENTIALS_KEY in the
 * platform_credentials table. Plain text exists only in memory, for the call that needs it.
 */
export class CredentialStore {
  private readonly db: Kysely<Database>;
  private readonly key: Buffer | undefined;

  constructor(
    db: Kysely<Database>,
    key: Buffer | undefined,
  ) {
    this.db = db;
    this.key = key;
  }

  /** Stores (or replaces: reconnecting an account) the account's secret. */
  async put(accountId: string, platform: string, secret: string): Promise<void> {
    const sealed = sealSecret(this.requireKey('so a refresh token cannot be stored'), accountId, secret);
    const row = { account_id: accountId, platform, iv: sealed.iv, ciphertext: sealed.ciphertext, auth_tag: sealed.authTag };
    await this.db
      .insertInto('platform_credentials')
      .values(row)
      .onConflict((oc) => oc.column('account_id').doUpdateSet({ platform, iv: sealed.iv, ciphertext: sealed.ciphertext, auth_tag: sealed.authTag }))
      .execute();
  }

  /** The account's secret, or null when none is stored. @throws CredentialDecryptError, CredentialsKeyMissingError */
  async get(accountId: string): Promise<string | null> {
    const row = await this.db.selectFrom('platform_credentials').selectAll().where('account_id', '=', accountId).executeTakeFirst();
    if (!row) return null;
    return openSecret(this.requireKey('so stored refresh tokens cannot be read'), accountId, { iv: row.iv, ciphertext: row.ciphertext, authTag: row.auth_tag });
  }

  /** Forgets the account's secret (an account whose creation failed after the secret was stored). */
  async remove(accountId: string): Promise<void> {
    await this.db.deleteFrom('platform_credentials').where('account_id', '=', accountId).execute();
  }

  async count(): Promise<number> {
    const row = await this.db.selectFrom('platform_credentials').select((eb) => eb.fn.countAll<string>().as('n')).executeTakeFirstOrThrow();
    return Number(row.n);
  }

  private requireKey(reason: string): Buffer {
    if (!this.key) throw new CredentialsKeyMissingError(reason);
    return this.key;
  }
}
