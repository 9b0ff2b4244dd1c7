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

  async apply(trx: Transaction<Database>, events: readonly StoredEvent[]) {
    for (const { seq, event: raw } of events) {
      const event = raw as DomainEvent;
      switch (event.type) {
        case 'WorkspaceCreated':
          await trx
            .insertInto('workspaces')
            .values({ id: event.aggregate.id, name: event.data.name, created_at: event.time, last_seq: seq })
            .execute();
          break;
        case 'AccountCreated':
          await trx
            .insertInto('accounts')
            .values({
              id: event.aggregate.id,
              workspace_id: event.workspace_id,
              name: event.data.name,
              platform: event.data.platform,
              sandbox_seed: event.data.sandbox_seed,
              created_at: event.time,
              last_seq: seq,
            })
            .execute();
          break;
        case 'ApiKeyIssued':
          await trx
            .insertInto('api_keys')
            .values({
              id: event.aggregate.id,
              workspace_id: event.workspace_id,
              name: event.data.name,
              scope: event.data.scope,
              secret_hash: event.data.secret_hash,
              created_at: event.time,
              revoked_at: null,
              last_seq: seq,
            })
            .execute();
          break;
        case 'ApiKeyRevoked':
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
  },
};
