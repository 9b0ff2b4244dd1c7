import { sql, type Kysely } from 'kysely';

/**
 * Secrets an account needs to reach its advertising platform (a Google Ads refresh token),
 * encrypted with CREDENTIALS_KEY (AES-256-GCM). Kept out of the event log on purpose: the
 * log is append-only, copied to auditors and never forgets, so a secret there could never
 * be revoked from it. Not a projection: nothing rebuilds it.
 */
export async function up(db: Kysely<any>): Promise<void> {
  await db.schema
    .createTable('platform_credentials')
    .addColumn('account_id', 'text', (c) => c.primaryKey())
    .addColumn('platform', 'text', (c) => c.notNull())
    .addColumn('iv', 'bytea', (c) => c.notNull())
    .addColumn('ciphertext', 'bytea', (c) => c.notNull())
    .addColumn('auth_tag', 'bytea', (c) => c.notNull())
    .addColumn('created_at', 'timestamptz', (c) => c.notNull().defaultTo(sql`now()`))
    .execute();
}

export async function down(db: Kysely<any>): Promise<void> {
  await db.schema.dropTable('platform_credentials').execute();
}
