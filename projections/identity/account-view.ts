import type { Kysely } from 'kysely';
import type { Database } from '../../src/db/schema.ts';
import type { PlatformKind } from '../../src/events/catalogue/index.ts';

export interface AccountRepresentation {
  readonly id: string;
  readonly object: 'account';
  readonly name: string;
  readonly platform: PlatformKind;
  readonly connected: boolean;
  readonly created_at: string;
}

export async function listAccounts(db: Kysely<Database>, workspaceId: string): Promise<AccountRepresentation[]> {
  const rows = await db.selectFrom('accounts').selectAll().where('workspace_id', '=', workspaceId).orderBy('created_at').orderBy('id').execute();
  return rows.map((row) => ({
    id: row.id,
    object: 'account',
    name: row.name,
    platform: row.platform,
    connected: row.platform !== 'none',
    created_at: row.created_at.toISOString(),
  }));
}

export async function findAccount(db: Kysely<Database>, workspaceId: string, accountId: string) {
  return db.selectFrom('accounts').selectAll().where('id', '=', accountId).where('workspace_id', '=', workspaceId).executeTakeFirst();
}
