import { sql, type Transaction } from 'kysely';
import type { Database } from '../../src/db/schema.ts';

/**
 * Lets the projector's transaction commit without waiting for its WAL to reach the disk
 * (`synchronous_commit = off`, for this transaction only).
 *
 * Why a read model can: its rows and its checkpoint commit in one transaction, and Postgres
 * keeps the commit order in its WAL, so a crash of Postgres loses at most its last few hundred
 * milliseconds of commits (`wal_writer_delay` × 3) whole, never half of one. The read model is
 * then an older, consistent state, and the projector applies the lost events again from the
 * event log, which holds them (Projector: "checkpoint went back"). Nothing else the service
 * writes to Postgres (idempotency keys, seals, leases, snapshots) is committed this way.
 * The wait saved is a disk flush per batch and projection: catching up alone, the runs
 * projection reached 0.56–0.64 of an ordered read instead of 0.48–0.55
 * (bench/event-store.bench.ts, docs/operations.md).
 *
 * @example
 * await db.transaction().execute(async (trx) => {
 *   await deferCommitFlush(trx);
 *   // … apply the batch, write the checkpoint
 * });
 */
export async function deferCommitFlush(trx: Transaction<Database>): Promise<void> {
  await sql`set local synchronous_commit = off`.execute(trx);
}
