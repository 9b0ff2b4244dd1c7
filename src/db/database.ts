import { Kysely, sql } from 'kysely';
import pg from 'pg';
import { redactUrls } from '../log/redact-url.ts';
import { CopyCapablePostgresDialect } from './copy-capable-dialect.ts';
import type { Database } from './schema.ts';

// BIGINT sequences fit in a JS number (2^53) for any realistic event log: parse them as numbers.
pg.types.setTypeParser(pg.types.builtins.INT8, (value) => Number(value));

export class PostgresUnreachableError extends Error {
  /** Without its password: error serializers print own properties. */
  readonly url: string;

  constructor(url: string, cause: unknown) {
    super(
      `cannot reach PostgreSQL at ${redactUrls(url)} (${redactUrls(cause instanceof Error ? cause.message : String(cause))}); ` +
        'start it with `bash deploy/ensure-services.sh` or set DATABASE_URL',
      { cause },
    );
    this.name = 'PostgresUnreachableError';
    this.url = redactUrls(url);
  }
}

const CONNECTION_TIMEOUT_MS = 5000;

export interface DatabaseHandle {
  readonly db: Kysely<Database>;
  readonly schema: string;
  readonly pool: pg.Pool;
  /**
   * A connection of its own, outside the pool (not connected yet), with the pool's server
   * and timeout: for a session whose state must outlive any one query, such as a session-level
   * advisory lock (projections/runtime/projector-lease.ts). The caller ends it.
   */
  newSession(): pg.Client;
  close(): Promise<void>;
}

/**
 * Opens a pool whose connections resolve unqualified table names in `schema` first, so
 * one database can hold many isolated deployments (every test file makes its own).
 */
export async function openDatabase(url: string, schema: string, maxConnections = 10, options: { readonly createSchema?: boolean } = {}): Promise<DatabaseHandle> {
  const pool = new pg.Pool({
    connectionString: url,
    max: maxConnections,
    options: `-c search_path=${schema},public`,
    connectionTimeoutMillis: CONNECTION_TIMEOUT_MS,
    idleTimeoutMillis: 10_000,
  });
  // A client losing its server (Postgres restart) emits 'error'; unheard, that is an
  // uncaught exception that ends the process. The pool hears idle clients; checked-out ones
  // need their own listener (their query rejects too, and that is where it is handled).
  pool.on('error', () => undefined);
  pool.on('connect', (client) => client.on('error', () => undefined));
  try {
    const client = await pool.connect();
    try {
      // A reader (an audit) checks the connection and changes nothing.
      await client.query(options.createSchema === false ? 'select 1' : `CREATE SCHEMA IF NOT EXISTS "${schema}"`);
    } finally {
      client.release();
    }
  } catch (error) {
    await pool.end().catch(() => undefined);
    throw new PostgresUnreachableError(url, error);
  }
  const db = new Kysely<Database>({ dialect: new CopyCapablePostgresDialect(pool) });
  return {
    db,
    schema,
    pool,
    // keepAlive: a session held for long must notice a dead peer without a query of its own.
    newSession: () => new pg.Client({ connectionString: url, options: `-c search_path=${schema},public`, connectionTimeoutMillis: CONNECTION_TIMEOUT_MS, keepAlive: true }),
    close: async () => {
      await db.destroy();
      // Kysely ends the pool only once it has run a query: a handle nobody queried (an audit
      // of one account, which compares no read model) would keep its idle connection, and the
      // process, alive for idleTimeoutMillis.
      if (!pool.ended) await pool.end();
    },
  };
}

export async function pingDatabase(db: Kysely<Database>): Promise<void> {
  await sql`select 1`.execute(db);
}
