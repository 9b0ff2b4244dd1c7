import { sql, type Kysely, type RawBuilder, type Transaction } from 'kysely';
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

/** A locked checkpoint, with when it was last written (Postgres's microseconds, as text). */
export interface LockedCheckpoint extends Checkpoint {
  /** Changes with every write of the checkpoint, by whoever writes it (projector, rebuild, quarantine retry). */
  readonly writtenAt: string;
}

/** Locks the projection's checkpoint row for the transaction: one writer per projection at a time. */
export async function lockCheckpoint(trx: Transaction<Database>, projection: string): Promise<LockedCheckpoint | null> {
  const row = await trx
    .selectFrom('projection_checkpoints')
    .select(['version', 'last_seq', sql<string>`updated_at::text`.as('written_at')])
    .where('projection', '=', projection)
    .forUpdate()
    .executeTakeFirst();
  return row ? { version: row.version, lastSeq: row.last_seq, writtenAt: row.written_at } : null;
}

/** @returns when it was written (see {@link LockedCheckpoint.writtenAt}). */
export async function writeCheckpoint(trx: Transaction<Database>, projection: string, checkpoint: Checkpoint): Promise<string> {
  const row = await trx
    .insertInto('projection_checkpoints')
    .values({ projection, version: checkpoint.version, last_seq: checkpoint.lastSeq, updated_at: sql`now()` as any })
    .onConflict((oc) =>
      oc.column('projection').doUpdateSet({ version: checkpoint.version, last_seq: checkpoint.lastSeq, updated_at: sql`now()` as any }),
    )
    .returning(sql<string>`updated_at::text`.as('written_at'))
    .executeTakeFirstOrThrow();
  return row.written_at;
}

/**
 * Moves the checkpoint only if it is still exactly `expected` (same sequence, same write):
 * the lock-free way to know nobody else wrote the projection since, checked at the end of the
 * transaction instead of locked at its start. Waits for a writer that holds the row.
 * `alongside` (a data-modifying statement of the same transaction, e.g. the chain heads'
 * upsert) runs in the same statement, saving its round trip; it runs whatever the outcome,
 * so the caller rolls back when this returns null.
 *
 * @returns when it was written, or null when the checkpoint is no longer `expected`.
 */
export async function writeCheckpointIfUnchanged(
  trx: Transaction<Database>,
  projection: string,
  checkpoint: Checkpoint,
  expected: { readonly lastSeq: number; readonly writtenAt: string },
  alongside: RawBuilder<unknown> | null = null,
): Promise<string | null> {
  const { rows } = await sql<{ written_at: string }>`
    ${alongside ? sql`with alongside as (${alongside})` : sql``}
    update projection_checkpoints set version = ${checkpoint.version}, last_seq = ${checkpoint.lastSeq}, updated_at = now()
    where projection = ${projection} and last_seq = ${expected.lastSeq} and updated_at::text = ${expected.writtenAt}
    returning updated_at::text as written_at
  `.execute(trx);
  return rows[0]?.written_at ?? null;
}
