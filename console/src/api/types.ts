/** Shapes of the public /api/v1 responses the console reads (docs/api.md). */

export interface Account {
  readonly id: string;
  readonly name: string;
  readonly platform: string;
  readonly connected: boolean;
  readonly created_at: string;
}

export const ACTION_STATUSES = ['queued', 'auto_applied', 'approved', 'applying', 'applied', 'returned', 'rejected', 'blocked'] as const;
export type ActionStatus = (typeof ACTION_STATUSES)[number];

/** Statuses from which a person may approve or reject (docs/api.md, "Approvals"). */
export const ACTIONABLE_STATUSES: readonly ActionStatus[] = ['queued', 'returned'];

export interface Approval {
  readonly id: string;
  readonly kind: string;
  readonly summary: string;
  readonly reason: string | null;
  readonly params: Record<string, unknown>;
  readonly risk_tier: string;
  readonly disposition: string;
  readonly policy_reasons: readonly string[];
  readonly approvals_url: string;
  readonly status: ActionStatus;
  readonly status_reason: string | null;
  readonly run_id: string | null;
  readonly project_id: string;
  readonly created_at: string;
  readonly updated_at: string;
  /** Opaque; changes whenever the action does. Sent back as `expected_version` so only the version the person saw is decided. */
  readonly version: string;
  /** Set when an approver edited the action before approving it: `original` is the version as proposed. */
  readonly edited?: {
    readonly at: string;
    readonly by: { readonly kind: string; readonly id: string };
    readonly original: { readonly summary: string; readonly params: Record<string, unknown>; readonly risk_tier: string; readonly policy_reasons: readonly string[] };
  } | null;
}

export const MATCH_TYPES = ['exact', 'phrase', 'broad'] as const;
export interface Keyword {
  readonly text: string;
  readonly match_type: (typeof MATCH_TYPES)[number];
}

/** The one params field an approver may change per kind (docs/api.md, "Edit, then approve"). */
export const EDITABLE_FIELDS = {
  add_negative_keywords: 'keywords',
  set_campaign_budget: 'daily_budget',
  set_target_cpa: 'target_cpa',
  set_target_roas: 'target_roas_pct',
} as const;
export type EditableKind = keyof typeof EDITABLE_FIELDS;
export const isEditable = (kind: string): kind is EditableKind => kind in EDITABLE_FIELDS;

/** The `edit` of an approve request: one field. */
export type ActionEdit = { readonly keywords: readonly Keyword[] } | { readonly [field: string]: number };

export interface ListPage<T> {
  readonly data: readonly T[];
  readonly next_cursor?: string | number | null;
}

export const TERMINAL_RUN_STATUSES = ['succeeded', 'failed', 'canceled'] as const;

export interface RunAction {
  readonly id: string;
  readonly kind: string;
  readonly summary: string;
  readonly risk_tier: string;
  readonly disposition: string;
  readonly policy_reasons: readonly string[];
  readonly approvals_url: string;
}

export interface ToolCall {
  readonly name: string;
  readonly input: unknown;
  readonly ok: boolean;
}

export interface Run {
  readonly id: string;
  readonly status: string;
  readonly project_id: string;
  readonly auto_apply: boolean;
  readonly scope: string;
  readonly created_at: string;
  readonly started_at: string | null;
  readonly finished_at: string | null;
  readonly duration_ms: number | null;
  readonly agent: { readonly kind: string; readonly model: string } | null;
  readonly result: {
    readonly text: string;
    readonly truncated: boolean;
    readonly actions: readonly RunAction[];
    readonly tool_calls: readonly ToolCall[];
    readonly usage: { readonly input_tokens: number; readonly output_tokens: number; readonly steps: number } | null;
  } | null;
  readonly error: { readonly code: string; readonly message: string } | null;
}

/** One entry of GET .../history: an event envelope, or a stored message that is not a trustworthy event. */
export interface HistoryEntry {
  readonly seq: number;
  readonly id?: string;
  readonly type?: string;
  readonly time?: string;
  readonly correlation_id?: string;
  readonly actor?: { readonly kind: string; readonly id: string };
  readonly aggregate?: { readonly type: string; readonly id: string };
  readonly data?: Record<string, unknown>;
  readonly corrupt?: true;
  readonly code?: string;
  readonly error?: string;
}
