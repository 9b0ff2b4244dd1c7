import { sql, type Transaction } from 'kysely';
import type { Database } from '../../src/db/schema.ts';

/**
 * Runs `work` inside a savepoint of `trx`; on failure rolls back to it, so the transaction
 * goes on as if `work` had not run, and returns the error.
 *
 * @example
 * const failure = await inSavepoint(trx, 'apply_batch', () => projection.apply(trx, events));
 * if (failure !== null) // nothing of the batch was written
 */
export async function inSavepoint(trx: Transaction<Database>, name: string, work: () => Promise<void>): Promise<unknown | null> {
  await sql`savepoint ${sql.id(name)}`.execute(trx);
  try {
    await work();
  } catch (error) {
    await sql`rollback to savepoint ${sql.id(name)}`.execute(trx);
    return error;
  }
  await sql`release savepoint ${sql.id(name)}`.execute(trx);
  return null;
}
