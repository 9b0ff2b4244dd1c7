import type { ColumnType, JSONColumnType } from 'kysely';
import type { AccountsTable, ApiKeysTable, WorkspacesTable } from '../../projections/identity/identity-tables.ts';
import type { ApprovalsTable } from '../../projections/approvals/approvals-tables.ts';
import type { RunActionsTable, RunsTable, WorkspaceTokenUsageTable } from '../../projections/runs/runs-tables.ts';
import type {
  SandboxAccountsTable,
  SandboxAdGroupsTable,
  SandboxCampaignsTable,
  SandboxKeywordsTable,
  SandboxNegativeKeywordsTable,
  SandboxPortfoliosTable,
  SandboxSearchTermDailyTable,
} from '../platform/sandbox/sandbox-tables.ts';

export interface ProjectionCheckpointsTable {
  projection: string;
  version: number;
  last_seq: number;
  updated_at: ColumnType<Date, string | undefined, string | undefined>;
}

/** A projection's parked events (projections/runtime/quarantine.ts). */
export interface EventQuarantineTable {
  projection: string;
  seq: number;
  subject: string;
  code: string;
  error: string;
  payload: Buffer;
  first_seen_at: ColumnType<Date, string | undefined, never>;
  last_seen_at: ColumnType<Date, string | undefined, string | undefined>;
}

/** Encrypted platform secrets (src/platform/credentials/credential-store.ts). */
export interface PlatformCredentialsTable {
  account_id: string;
  platform: string;
  iv: Buffer;
  ciphertext: Buffer;
  auth_tag: Buffer;
  created_at: ColumnType<Date, string | undefined, never>;
}

/** Signed admission verdicts per block of stream sequences (projections/runtime/admission-seals.ts). */
export interface AdmissionSealsTable {
  stream: string;
  /** bigint: pg returns it as a string. */
  first_seq: ColumnType<string, number, number>;
  last_seq: ColumnType<string, number, number>;
  digest: string;
  rules: string;
  refused: JSONColumnType<unknown[], string, string>;
  key_id: string;
  signature: string;
  sealed_at: ColumnType<Date, string | undefined, string | undefined>;
}

export interface IdempotencyRecordsTable {
  key_id: string;
  idempotency_key: string;
  request_hash: string;
  run_id: string;
  state: 'processing' | 'completed';
  response_status: number | null;
  response_body: JSONColumnType<Record<string, unknown> | null, string | null, string | null>;
  created_at: ColumnType<Date, string | undefined, never>;
  locked_until: ColumnType<Date, string, string>;
  /** The holder of a processing claim (migration 006); '' for rows claimed before it. */
  claim_token: ColumnType<string, string | undefined, string>;
}

/** Every table, infrastructure and read models, for kysely's type checking. */
export interface Database {
  projection_checkpoints: ProjectionCheckpointsTable;
  idempotency_records: IdempotencyRecordsTable;
  event_quarantine: EventQuarantineTable;
  platform_credentials: PlatformCredentialsTable;
  admission_seals: AdmissionSealsTable;
  workspaces: WorkspacesTable;
  accounts: AccountsTable;
  api_keys: ApiKeysTable;
  runs: RunsTable;
  run_actions: RunActionsTable;
  workspace_token_usage: WorkspaceTokenUsageTable;
  approvals: ApprovalsTable;
  sandbox_accounts: SandboxAccountsTable;
  sandbox_portfolios: SandboxPortfoliosTable;
  sandbox_campaigns: SandboxCampaignsTable;
  sandbox_ad_groups: SandboxAdGroupsTable;
  sandbox_keywords: SandboxKeywordsTable;
  sandbox_search_term_daily: SandboxSearchTermDailyTable;
  sandbox_negative_keywords: SandboxNegativeKeywordsTable;
}
