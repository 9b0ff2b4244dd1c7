import { sql, type Kysely } from 'kysely';

/**
 * Signed verdicts of event admission over fixed blocks of stream sequences
 * (src/events/sealing/admission-seal.ts, projections/runtime/admission-seals.ts). Not a
 * projection: it survives rebuilds, which are what it makes cheap. Each row is signed by the
 * service's key, so a row written by anyone else is ignored, not believed.
 */
export async function up(db: Kysely<any>): Promise<void> {
  await db.schema
    .createTable('admission_seals')
    .addColumn('stream', 'text', (c) => c.notNull())
    .addColumn('first_seq', 'bigint', (c) => c.notNull())
    .addColumn('last_seq', 'bigint', (c) => c.notNull())
    .addColumn('digest', 'text', (c) => c.notNull())
    .addColumn('rules', 'text', (c) => c.notNull())
    .addColumn('refused', 'jsonb', (c) => c.notNull())
    .addColumn('key_id', 'text', (c) => c.notNull())
    .addColumn('signature', 'text', (c) => c.notNull())
    .addColumn('sealed_at', 'timestamptz', (c) => c.notNull().defaultTo(sql`now()`))
    .addPrimaryKeyConstraint('admission_seals_pk', ['stream', 'first_seq'])
    .execute();
}

export async function down(db: Kysely<any>): Promise<void> {
  await db.schema.dropTable('admission_seals').execute();
}
