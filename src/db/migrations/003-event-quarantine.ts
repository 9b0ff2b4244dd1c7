import { sql, type Kysely } from 'kysely';

/**
 * Events a projection could not apply for a reason a retry cannot fix (projections/runtime/
 * quarantine.ts). Not a projection table: it survives projection rebuilds, which park the
 * same events again (an upsert on projection + sequence).
 */
export async function up(db: Kysely<any>): Promise<void> {
  await db.schema
    .createTable('event_quarantine')
    .addColumn('projection', 'text', (c) => c.notNull())
    .addColumn('seq', 'bigint', (c) => c.notNull())
    .addColumn('subject', 'text', (c) => c.notNull())
    .addColumn('code', 'text', (c) => c.notNull())
    .addColumn('error', 'text', (c) => c.notNull())
    .addColumn('payload', 'bytea', (c) => c.notNull())
    .addColumn('first_seen_at', 'timestamptz', (c) => c.notNull().defaultTo(sql`now()`))
    .addColumn('last_seen_at', 'timestamptz', (c) => c.notNull().defaultTo(sql`now()`))
    .addPrimaryKeyConstraint('event_quarantine_pk', ['projection', 'seq'])
    .execute();
}

export async function down(db: Kysely<any>): Promise<void> {
  await db.schema.dropTable('event_quarantine').execute();
}
