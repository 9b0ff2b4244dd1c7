import type { Kysely, Transaction } from 'kysely';
import type { Database } from '../../src/db/schema.ts';
import type { DomainEvent } from '../../src/events/catalogue/index.ts';
import type { StoredEvent } from '../../src/event-store/event-store.ts';
import type { Projection } from '../runtime/projection.ts';

/** The event types `apply` writes rows for. */
const IDENTITY_EVENTS: ReadonlySet<string> = new Set(['WorkspaceCreated', 'AccountCreated', 'ApiKeyIssued', 'ApiKeyRevoked'] satisfies DomainEvent['type'][]);

/**
 * Workspaces, accounts and API keys (hashes only): what authentication and tenancy checks
 * read on every request.
 */
export const identityProjection: Projection = {
  name: 'identity',
  version: 2,
  tables: ['api_keys', 'accounts', 'workspaces'],

  async createTables(db: Kysely<any>) {
    await db.schema
      .createTable('workspaces')
      .addColumn('id', 'text', (c) => c.primaryKey())
      .addColumn('name', 'text', (c) => c.notNull())
      .addColumn('created_at', 'timestamptz', (c) => c.notNull())
      .addColumn('last_seq', 'bigint', (c) => c.notNull())
      .execute();
    await db.schema
      .createTable('accounts')
      .addColumn('id', 'text', (c) => c.primaryKey())
      .addColumn('workspace_id', 'text', (c) => c.notNull())
      .addColumn('name', 'text', (c) => c.notNull())
      .addColumn('platform', 'text', (c) => c.notNull())
      .addColumn('sandbox_seed', 'integer')
      .addColumn('created_at', 'timestamptz', (c) => c.notNull())
      .addColumn('last_seq', 'bigint', (c) => c.notNull())
      .execute();
    await db.schema.createIndex('accounts_workspace').on('accounts').columns(['workspace_id', 'created_at']).execute();
    await db.schema
      .createTable('api_keys')
      .addColumn('id', 'text', (c) => c.primaryKey())
      .addColumn('workspace_id', 'text', (c) => c.notNull())
      .addColumn('name', 'text', (c) => c.notNull())
      .addColumn('scope', 'text', (c) => c.notNull())
      .addColumn('secret_hash', 'text', (c) => c.notNull())
      .addColumn('created_at', 'timestamptz', (c) => c.notNull())
      .addColumn('revoked_at', 'timestamptz')
      .addColumn('last_seq', 'bigint', (c) => c.notNull())
      .execute();
  },

  handles: (event) => IDENTITY_EVENTS.has(event.type),

  /**
   * Consecutive creations of one kind go into one multi-row insert; a revocation is its own
   * update, in stream order. A duplicate id fails its insert as it would alone, and
   * applyIsolating then applies the batch event by event and parks that one.
   */
  async apply(trx: Transaction<Database>, events: readonly StoredEvent[]) {
    let pending: { table: 'workspaces' | 'accounts' | 'api_keys'; rows: Record<string, unknown>[] } | null = null;
    const flush = async () => {
      if (pending) await (trx as unknown as Kysely<any>).insertInto(pending.table).values(pending.rows).execute();
      pending = null;
    };
    const insert = async (table: 'workspaces' | 'accounts' | 'api_keys', row: Record<string, unknown>) => {
      if (pending?.table !== table) await flush();
      pending ??= { table, rows: [] };
      pending.rows.push(row);
    };
    for (const { seq, event: raw } of events) {
      const event = raw as DomainEvent;
      switch (event.type) {
        case 'WorkspaceCreated':
          await insert('workspaces', { id: event.aggregate.id, name: event.data.name, created_at: event.time, last_seq: seq });
          break;
        case 'AccountCreated':
          await insert('accounts', {
            id: event.aggregate.id,
            workspace_id: event.workspace_id,
            name: event.data.name,
            platform: event.data.platform,
            sandbox_seed: event.data.sandbox_seed,
            created_at: event.time,
            last_seq: seq,
          });
          break;
        case 'ApiKeyIssued':
          await insert('api_keys', {
            id: event.aggregate.id,
            workspace_id: event.workspace_id,
            name: event.data.name,
            scope: event.data.scope,
            secret_hash: event.data.secret_hash,
            created_at: event.time,
            revoked_at: null,
            last_seq: seq,
          });
          break;
        case 'ApiKeyRevoked':
          await flush();
          await trx
            .updateTable('api_keys')
            .set({ revoked_at: event.time, last_seq: seq })
            .where('id', '=', event.aggregate.id)
            .execute();
          break;
        default:
          break;
      }
    }
    await flush();
  },
};
