import { sql, type Kysely } from 'kysely';
import type { Database } from '../../src/db/schema.ts';
import { lockCheckpoint, writeCheckpoint } from './checkpoints.ts';
import { createOwnedTables, ownedTables } from './chain-heads.ts';
import type { Projection } from './projection.ts';

/**
 * Makes sure the projection's tables exist at its current version. A missing checkpoint
 * or an older version drops the owned tables and creates them empty at checkpoint 0, and
 * empties the projection's quarantine: the projector then replays the log from the first
 * event and parks again what this version refuses (a row left from the old version would
 * stay parked, and a retry would apply an event the replay already applied). An advisory lock (per schema and
 * projection) keeps two processes starting at once from doing it twice.
 *
 * @returns the checkpoint the projector resumes after.
 */
export async function ensureProjectionTables(db: Kysely<Database>, projection: Projection): Promise<number> {
  return db.transaction().execute(async (trx) => {
    // Keyed by the deployment's schema too: two deployments on one Postgres (every test file is one) never wait for each other.
    await sql`select pg_advisory_xact_lock(hashtext(current_schema() || ${`:projection:${projection.name}`}))`.execute(trx);
    const checkpoint = await lockCheckpoint(trx, projection.name);
    if (checkpoint && checkpoint.version === projection.version) return checkpoint.lastSeq;
    for (const table of ownedTables(projection)) await trx.schema.dropTable(table).ifExists().cascade().execute();
    await createOwnedTables(trx, projection);
    await trx.deleteFrom('event_quarantine').where('projection', '=', projection.name).execute();
    await writeCheckpoint(trx, projection.name, { version: projection.version, lastSeq: 0 });
    return 0;
  });
}
