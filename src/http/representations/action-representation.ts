import { actionVersion } from '../../../commands/action/action-version.ts';
import type { ApprovalRow } from '../../../projections/approvals/approval-view.ts';
import type { EditedFrom } from '../../../projections/approvals/approvals-tables.ts';
import type { Disposition, RiskTier } from '../../events/catalogue/index.ts';

/** What the domain and the read models know of a proposed action; no URL. */
export interface ActionFacts {
  readonly id: string;
  readonly kind: string;
  readonly summary: string;
  readonly risk_tier: RiskTier | string;
  readonly disposition: Disposition | string;
  readonly policy_reasons: readonly string[];
}

/** The specification's Action, as every endpoint shows it (run result, live events, target endpoint, approvals). */
export interface ActionRepresentation extends ActionFacts {
  readonly approvals_url: string;
}

/**
 * Where a person reviews an account's actions: the approvals console's page for the account
 * (docs/console.md), which lists them from GET /api/v1/accounts/{projectId}/approvals. Built
 * here, at the edge: nothing below HTTP knows URLs.
 */
export function approvalsUrl(publicBaseUrl: string, accountId: string): string {
  return `${publicBaseUrl}/console/accounts/${encodeURIComponent(accountId)}/approvals`;
}

/**
 * The one way an action becomes its representation.
 *
 * @example
 * ```ts
 * toActionRepresentation(facts, 'acc-1', 'https://api.example.com').approvals_url; // 'https://api.example.com/console/accounts/acc-1/approvals'
 * ```
 */
export function toActionRepresentation(action: ActionFacts, accountId: string, publicBaseUrl: string): ActionRepresentation {
  return {
    id: action.id,
    kind: action.kind,
    summary: action.summary,
    risk_tier: action.risk_tier,
    disposition: action.disposition,
    policy_reasons: action.policy_reasons,
    approvals_url: approvalsUrl(publicBaseUrl, accountId),
  };
}

/** An action as the approvals endpoints show it: the Action plus its lifecycle. */
export interface ApprovalRepresentation extends ActionRepresentation {
  readonly object: 'action';
  readonly reason: string;
  readonly params: Record<string, unknown>;
  readonly status: string;
  readonly status_reason: string | null;
  readonly run_id: string | null;
  readonly project_id: string;
  readonly created_at: string;
  readonly updated_at: string;
  /** Null unless an approver edited the action before approving it; then who, when, and the version before the edit. */
  readonly edited: EditedRepresentation | null;
  /** Opaque; changes whenever the action does. Sent back as `expected_version` on approve and reject. */
  readonly version: string;
}

export interface EditedRepresentation {
  readonly at: string;
  readonly by: { readonly kind: string; readonly id: string };
  /** The action as proposed: summary, params, risk tier and policy reasons. */
  readonly original: EditedFrom;
}

function editedOf(row: ApprovalRow): EditedRepresentation | null {
  if (!row.original || !row.edited_at || !row.edited_by) return null;
  const split = row.edited_by.indexOf(':');
  return { at: row.edited_at.toISOString(), by: { kind: row.edited_by.slice(0, split), id: row.edited_by.slice(split + 1) }, original: row.original };
}

export function toApprovalRepresentation(row: ApprovalRow, publicBaseUrl: string): ApprovalRepresentation {
  const action = toActionRepresentation(row, row.account_id, publicBaseUrl);
  return {
    id: action.id,
    object: 'action',
    kind: action.kind,
    summary: action.summary,
    reason: row.reason,
    params: row.params,
    risk_tier: action.risk_tier,
    disposition: action.disposition,
    policy_reasons: action.policy_reasons,
    approvals_url: action.approvals_url,
    status: row.status,
    status_reason: row.status_reason,
    run_id: row.run_id,
    project_id: row.account_id,
    created_at: row.created_at.toISOString(),
    updated_at: row.updated_at.toISOString(),
    edited: editedOf(row),
    version: actionVersion({ status: row.status, params: row.params, changedAt: row.updated_at }),
  };
}
