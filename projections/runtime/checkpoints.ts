import { sql, type Kysely, type Transaction } from 'kysely';
import type { Database } from '../../src/db/schema.ts';

export interface Checkpoint {
  readonly version: number;
  readonly lastSeq: number;
}

export async function readCheckpoint(db: Kysely<Database>, projection: string): Promise<Checkpoint | null> {
  const row = await db
    .selectFrom('projection_checkpoints')
    .select(['version', 'last_seq'])
    .where('projection', '=', projection)
    .executeTakeFirst();
  return row ? { version: row.version, lastSeq: row.last_seq } : null;
}

/** Locks the projection's checkpoint row for the transaction: one writer per projection at a time. */
export async function lockCheckpoint(trx: Transaction<Database>, projection: string): Promise<Checkpoint | null> {
  const row = await trx
    .selectFrom('projection_checkpoints')
    .select(['version', 'last_seq'])
    .where('projection', '=', projection)
    .forUpdate()
    .executeTakeFirst();
  return row ? { version: row.version, lastSeq: row.last_seq } : null;
}

export async function writeCheckpoint(trx: Transaction<Database>, projection: string, checkpoint: Checkpoint): Promise<void> {
  await trx
    .insertInto('projection_checkpoints')
    .values({ projection, version: checkpoint.version, last_seq: checkpoint.lastSeq, updated_at: sql`now()` as any })
    .onConflict((oc) =>
      oc.column('projection').doUpdateSet({ version: checkpoint.version, last_seq: checkpoint.lastSeq, updated_at: sql`now()` as any }),
    )
    .execute();
}
