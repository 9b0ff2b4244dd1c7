import type { ColumnType, JSONColumnType } from 'kysely';
import type { ActionStatus } from '../../commands/action/action-state.ts';

export interface ApprovalsTable {
  id: string;
  workspace_id: string;
  account_id: string;
  run_id: string | null;
  kind: string;
  summary: string;
  reason: string;
  params: JSONColumnType<Record<string, unknown>, string, string>;
  risk_tier: string;
  disposition: string;
  policy_reasons: JSONColumnType<string[], string, string>;
  status: ActionStatus;
  /** Why it last changed status (return reason, rejection reason, platform error). */
  status_reason: string | null;
  /** Before the first edit (ActionEdited): the proposal's summary, params, risk tier and reasons; null while unedited. */
  original: JSONColumnType<EditedFrom, string, string> | null;
  edited_at: ColumnType<Date | null, string | null, string>;
  /** `<actor kind>:<id>` of the last edit, e.g. `api_key:k_123`. */
  edited_by: string | null;
  apply_attempts: number;
  proposed_seq: number;
  created_at: ColumnType<Date, string, never>;
  updated_at: ColumnType<Date, string, string>;
  last_seq: number;
  /** The portfolio strategy a target change sets (it moves every campaign on it); null otherwise. */
  portfolio_id: string | null;
  /** The shared budget a budget change sets (it moves every campaign on it); null otherwise. */
  shared_budget_id: string | null;
}

/** The version of an action before it was edited, kept for reference. */
export interface EditedFrom {
  readonly summary: string;
  readonly params: Record<string, unknown>;
  readonly risk_tier: string;
  readonly policy_reasons: readonly string[];
}
