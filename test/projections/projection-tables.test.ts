import { expect } from 'chai';
import { randomBytes } from 'node:crypto';
import { sql } from 'kysely';
import { ensureProjectionTables } from '../../projections/runtime/projection-tables.ts';
import { openDatabase, type DatabaseHandle } from '../../src/db/database.ts';
import { migrateToLatest } from '../../src/db/migrator.ts';
import { TEST_DATABASE_URL } from '../support/isolation.ts';
import { ledgerProjection } from '../support/ledger-projection.ts';

/**
 * The set-up of a projection's tables at start is serialized by an advisory lock: per
 * deployment (schema), so that two deployments on one Postgres never wait for each other.
 */
describe('projection tables: the set-up lock is per schema', function () {
  this.timeout(30_000);
  const schemaA = `t_tables_a_${randomBytes(4).toString('hex')}`;
  const schemaB = `t_tables_b_${randomBytes(4).toString('hex')}`;
  const handles: DatabaseHandle[] = [];
  const open = async (schema: string) => {
    const handle = await openDatabase(TEST_DATABASE_URL, schema, 2);
    await migrateToLatest(handle.db, schema);
    handles.push(handle);
    return handle;
  };
  after(async () => {
    for (const handle of handles) {
      await sql`drop schema if exists ${sql.id(handle.schema)} cascade`.execute(handle.db);
      await handle.close();
    }
  });

  /** Holds, in `schema`, the lock ensureProjectionTables takes there for the ledger projection, until released. */
  const holdSetUpLock = async (handle: DatabaseHandle) => {
    let release!: () => void;
    const released = new Promise<void>((resolve) => (release = resolve));
    let held!: () => void;
    const holding = new Promise<void>((resolve) => (held = resolve));
    const transaction = handle.db.transaction().execute(async (trx) => {
      await sql`select pg_advisory_xact_lock(hashtext(current_schema() || ${':projection:ledger'}))`.execute(trx);
      held();
      await released;
    });
    await holding;
    return async () => {
      release();
      await transaction;
    };
  };

  it('lets another schema set up the same projection while one schema holds the lock, and makes the same schema wait', async () => {
    const a = await open(schemaA);
    const b = await open(schemaB);
    const otherA = await open(schemaA);
    const release = await holdSetUpLock(a);
    try {
      const inB = ensureProjectionTables(b.db, ledgerProjection);
      const timeout = new Promise((resolve) => setTimeout(() => resolve('waited'), 2000));
      expect(await Promise.race([inB.then(() => 'done'), timeout])).to.equal('done');

      let sameSchemaDone = false;
      const inA = ensureProjectionTables(otherA.db, ledgerProjection).then(() => (sameSchemaDone = true));
      await new Promise((resolve) => setTimeout(resolve, 300));
      expect(sameSchemaDone, 'the same schema waits for the lock').to.equal(false);
      await release();
      await inA;
      expect(sameSchemaDone).to.equal(true);
    } catch (error) {
      await release();
      throw error;
    }
  });
});
