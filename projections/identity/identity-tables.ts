import type { ColumnType } from 'kysely';
import type { PlatformKind } from '../../src/events/catalogue/index.ts';

export interface WorkspacesTable {
  id: string;
  name: string;
  created_at: ColumnType<Date, string, string>;
  last_seq: number;
}

export interface AccountsTable {
  id: string;
  workspace_id: string;
  name: string;
  platform: PlatformKind;
  sandbox_seed: number | null;
  created_at: ColumnType<Date, string, string>;
  last_seq: number;
}

export interface ApiKeysTable {
  id: string;
  workspace_id: string;
  name: string;
  scope: 'read' | 'write' | 'admin';
  secret_hash: string;
  created_at: ColumnType<Date, string, string>;
  revoked_at: ColumnType<Date | null, string | null, string | null>;
  last_seq: number;
}
