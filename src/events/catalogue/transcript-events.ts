import type { EventEnvelope } from '../envelope.ts';
import { bool, enumOf, id, int, nullable, object, str, type EventDefinition } from './schema-helpers.ts';

/** Kinds of change an action can carry; the propose tools and the target endpoint create them. */
export const ACTION_KINDS = ['add_negative_keywords', 'pause_keywords', 'set_campaign_budget', 'set_target_cpa', 'set_target_roas'] as const;
export type ActionKind = (typeof ACTION_KINDS)[number];

export const RISK_TIERS = ['safe', 'review', 'blocked'] as const;
export type RiskTier = (typeof RISK_TIERS)[number];

/** What happened to an action when it was proposed. */
export const DISPOSITIONS = ['queued', 'auto_applied', 'blocked'] as const;
export type Disposition = (typeof DISPOSITIONS)[number];

export interface ToolCalledData {
  readonly run_id: string;
  /** 1-based position among the run's tool calls. */
  readonly index: number;
  readonly name: string;
  readonly input: Record<string, unknown>;
  readonly ok: boolean;
  /** The tool's full output (or its error); the run's result keeps only name, input and ok. */
  readonly output: Record<string, unknown>;
  readonly duration_ms: number;
}

export interface ActionProposedData {
  readonly action_id: string;
  /** Null when proposed through the campaign target endpoint rather than a run. */
  readonly run_id: string | null;
  readonly kind: ActionKind;
  readonly summary: string;
  readonly reason: string;
  /** Kind-specific parameters of the change (see docs/events.md). */
  readonly params: Record<string, unknown>;
  /** Platform state the proposal was based on; the apply worker re-checks it. */
  readonly based_on: Record<string, unknown>;
  readonly risk_tier: RiskTier;
  readonly disposition: Disposition;
  readonly policy_reasons: readonly string[];
  readonly auto_apply_requested: boolean;
  /** v2: the API key behind the proposal: the key that called the endpoint, or that started the proposing run. */
  readonly proposer_key_id?: string | null;
}

export type ToolCalled = EventEnvelope<'ToolCalled', ToolCalledData>;
export type ActionProposed = EventEnvelope<'ActionProposed', ActionProposedData>;
export type TranscriptEvent = ToolCalled;
export type ActionProposalEvent = ActionProposed;

const freeObject = { type: 'object' } as const;

/** The fields of ActionProposed v1; v2 adds proposer_key_id and changes nothing else. */
const ACTION_PROPOSED_V1_FIELDS = {
  action_id: id(),
  run_id: nullable(id()),
  kind: enumOf(ACTION_KINDS),
  summary: str({ minLength: 1, maxLength: 500 }),
  reason: str({ maxLength: 2000 }),
  params: freeObject,
  based_on: freeObject,
  risk_tier: enumOf(RISK_TIERS),
  disposition: enumOf(DISPOSITIONS),
  policy_reasons: { type: 'array', items: str() },
  auto_apply_requested: bool(),
};

export const TRANSCRIPT_EVENT_DEFINITIONS: readonly EventDefinition[] = [
  {
    type: 'ToolCalled',
    version: 1,
    aggregate: 'run',
    description: 'The agent called a tool. The full output is kept here, in the event log, and only here.',
    data: object({
      run_id: id(),
      index: int(1),
      name: str({ minLength: 1, maxLength: 100 }),
      input: freeObject,
      ok: bool(),
      output: freeObject,
      duration_ms: int(),
    }),
  },
  {
    type: 'ActionProposed',
    version: 1,
    aggregate: 'action',
    description: 'A change was proposed and classified by the safe-apply policy; the first event of an action.',
    data: object(ACTION_PROPOSED_V1_FIELDS),
  },
  {
    type: 'ActionProposed',
    version: 2,
    aggregate: 'action',
    description:
      'A change was proposed and classified by the safe-apply policy; the first event of an action. v2 adds proposer_key_id, the API key behind it (the caller of the target endpoint, or the key that started the proposing run), for the distinct-approver rule.',
    data: object({ ...ACTION_PROPOSED_V1_FIELDS, proposer_key_id: nullable(id()) }),
  },
];
