import { Readable } from 'node:stream';
import { pipeline } from 'node:stream/promises';
import {
  CompiledQuery,
  PostgresDialect,
  type DatabaseConnection,
  type Driver,
  type QueryResult,
  type TransactionSettings,
} from 'kysely';
import type pg from 'pg';
import { from as copyFrom } from 'pg-copy-streams';

/**
 * A kysely connection that can also run `COPY … FROM STDIN`: kysely's own Postgres
 * connection keeps its pg client private, and COPY needs the client itself (the rows travel
 * as a stream after the statement, not as parameters). Everything else behaves as kysely's.
 */
export class CopyCapableConnection implements DatabaseConnection {
  readonly #client: pg.PoolClient;

  constructor(client: pg.PoolClient) {
    this.#client = client;
  }

  async executeQuery<R>(compiledQuery: CompiledQuery): Promise<QueryResult<R>> {
    const { command, rowCount, rows } = await this.#client.query(compiledQuery.sql, [...compiledQuery.parameters]);
    const changed = command === 'INSERT' || command === 'UPDATE' || command === 'DELETE' || command === 'MERGE';
    return { numAffectedRows: changed ? BigInt(rowCount ?? 0) : undefined, rows: (rows ?? []) as R[] };
  }

  /** kysely's `.stream()` needs pg-cursor, which this service does not use. */
  async *streamQuery<R>(): AsyncIterableIterator<QueryResult<R>> {
    throw new Error('streaming queries are not enabled on this dialect (no cursor configured)');
  }

  /**
   * Runs `statement` (a `COPY … FROM STDIN` in text format) with `data` as its input.
   *
   * @returns the rows Postgres copied.
   */
  async copyFrom(statement: string, data: string): Promise<number> {
    const stream = this.#client.query(copyFrom(statement));
    await pipeline(Readable.from([data]), stream);
    return stream.rowCount;
  }

  release(): void {
    this.#client.release();
  }
}

/** kysely's Postgres driver, handing out {@link CopyCapableConnection}s. */
class CopyCapableDriver implements Driver {
  readonly #pool: pg.Pool;
  readonly #connections = new WeakMap<pg.PoolClient, CopyCapableConnection>();

  constructor(pool: pg.Pool) {
    this.#pool = pool;
  }

  async init(): Promise<void> {}

  async acquireConnection(): Promise<DatabaseConnection> {
    const client = await this.#pool.connect();
    let connection = this.#connections.get(client);
    if (!connection) {
      connection = new CopyCapableConnection(client);
      this.#connections.set(client, connection);
    }
    return connection;
  }

  async beginTransaction(connection: DatabaseConnection, settings: TransactionSettings): Promise<void> {
    const modes = [settings.isolationLevel && `isolation level ${settings.isolationLevel}`, settings.accessMode].filter(Boolean);
    await connection.executeQuery(CompiledQuery.raw(modes.length > 0 ? `start transaction ${modes.join(' ')}` : 'begin'));
  }

  async commitTransaction(connection: DatabaseConnection): Promise<void> {
    await connection.executeQuery(CompiledQuery.raw('commit'));
  }

  async rollbackTransaction(connection: DatabaseConnection): Promise<void> {
    await connection.executeQuery(CompiledQuery.raw('rollback'));
  }

  async releaseConnection(connection: DatabaseConnection): Promise<void> {
    (connection as CopyCapableConnection).release();
  }

  async destroy(): Promise<void> {
    await this.#pool.end();
  }
}

/**
 * kysely's Postgres dialect (compiler, adapter, introspector) over a driver whose
 * connections can COPY: see {@link copyRows}.
 */
export class CopyCapablePostgresDialect extends PostgresDialect {
  readonly #pool: pg.Pool;

  constructor(pool: pg.Pool) {
    super({ pool });
    this.#pool = pool;
  }

  override createDriver(): Driver {
    return new CopyCapableDriver(this.#pool);
  }
}
