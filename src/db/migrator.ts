import { Migrator, type Kysely, type Migration, type MigrationProvider } from 'kysely';
import * as m001 from './migrations/001-infrastructure.ts';
import * as m002 from './migrations/002-sandbox-platform.ts';
import * as m003 from './migrations/003-event-quarantine.ts';
import * as m004 from './migrations/004-platform-credentials.ts';
import * as m005 from './migrations/005-admission-seals.ts';
import * as m006 from './migrations/006-idempotency-claim-token.ts';

/**
 * Migrations are listed here in code rather than read from a folder, so they work the same
 * from the sources, in a bundle and in tests. Each file is immutable once released.
 */
const MIGRATIONS: Record<string, Migration> = {
  '001-infrastructure': m001,
  '002-sandbox-platform': m002,
  '003-event-quarantine': m003,
  '004-platform-credentials': m004,
  '005-admission-seals': m005,
  '006-idempotency-claim-token': m006,
};

class StaticMigrationProvider implements MigrationProvider {
  async getMigrations(): Promise<Record<string, Migration>> {
    return MIGRATIONS;
  }
}

/** Attempts when another schema vanishes while kysely lists the database's tables. */
const MIGRATION_ATTEMPTS = 5;

/**
 * Runs pending migrations in the handle's schema. Concurrent starts are serialised by
 * kysely's lock table. Kysely checks for its migration table by listing the tables of every
 * schema, and that listing fails (SQLSTATE 3F000) when some other schema is dropped at that
 * moment — another tenant's or test's cleanup — so such a failure is retried.
 */
export async function migrateToLatest(db: Kysely<any>, schema: string): Promise<void> {
  for (let attempt = 1; ; attempt++) {
    try {
      await migrateOnce(db, schema);
      return;
    } catch (error) {
      const vanished = (error as { cause?: { code?: unknown } }).cause?.code === '3F000';
      if (!vanished || attempt >= MIGRATION_ATTEMPTS) throw error;
      await new Promise((resolve) => setTimeout(resolve, 50 * attempt));
    }
  }
}

async function migrateOnce(db: Kysely<any>, schema: string): Promise<void> {
  const migrator = new Migrator({
    db: db.withSchema(schema),
    provider: new StaticMigrationProvider(),
    migrationTableSchema: schema,
  });
  const { error, results } = await migrator.migrateToLatest();
  const failed = results?.find((r) => r.status === 'Error');
  if (error || failed) {
    throw new Error(`migration ${failed?.migrationName ?? ''} failed: ${String(error)}`, { cause: error });
  }
}
