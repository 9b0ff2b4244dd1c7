import { Migrator, type Kysely, type Migration, type MigrationProvider } from 'kysely';
import * as m001 from './migrations/001-infrastructure.ts';
import * as m002 from './migrations/002-sandbox-platform.ts';
import * as m003 from './migrations/003-event-quarantine.ts';
import * as m004 from './migrations/004-platform-credentials.ts';

/**
 * Migrations are listed here in code rather than read from a folder, so they work the same
 * under tsx, in a bundle and in tests. Each file is immutable once released.
 */
const MIGRATIONS: Record<string, Migration> = {
  '001-infrastructure': m001,
  '002-sandbox-platform': m002,
  '003-event-quarantine': m003,
  '004-platform-credentials': m004,
};

class StaticMigrationProvider implements MigrationProvider {
  async getMigrations(): Promise<Record<string, Migration>> {
    return MIGRATIONS;
  }
}

/** Runs pending migrations in the handle's schema. Concurrent starts are serialised by kysely's lock table. */
export async function migrateToLatest(db: Kysely<any>, schema: string): Promise<void> {
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
