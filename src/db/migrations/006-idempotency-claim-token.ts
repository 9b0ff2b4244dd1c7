import type { Kysely } from 'kysely';

/**
 * Who holds an Idempotency-Key's claim: a token each claim and each takeover draws afresh
 * (src/http/idempotency/idempotency-store.ts). Completing or releasing a claim names its
 * token, so a request whose claim was taken over while it stalled cannot release the new
 * holder's claim (a retry would then have made a second run) or overwrite its answer.
 * Rows claimed before this migration hold the empty token, which no request holds: they
 * can only be taken over, as they would have been after their lease.
 */
export async function up(db: Kysely<any>): Promise<void> {
  await db.schema.alterTable('idempotency_records').addColumn('claim_token', 'text', (c) => c.notNull().defaultTo('')).execute();
}

export async function down(db: Kysely<any>): Promise<void> {
  await db.schema.alterTable('idempotency_records').dropColumn('claim_token').execute();
}
