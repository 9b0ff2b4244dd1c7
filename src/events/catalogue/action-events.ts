import type { EventEnvelope } from '../envelope.ts';
import { bool, enumOf, id, int, object, str, type EventDefinition } from './schema-helpers.ts';

export interface KillSwitchEngagedData {
  readonly reason: string;
}
export interface KillSwitchReleasedData {
  readonly reason: string;
}
export interface AutoApplySlotReservedData {
  readonly action_id: string;
  /** UTC day the slot counts against, YYYY-MM-DD. */
  readonly day: string;
  /** 1-based: this reservation is the n-th of the day; never above the cap. */
  readonly slot: number;
  /** v2, budget and target changes: the day's first value of the campaign field, and the value this action sets. */
  readonly band?: {
    readonly campaign_id: string;
    readonly field: 'daily_budget' | 'target_cpa' | 'target_roas_pct';
    readonly baseline: number;
    readonly value: number;
  };
  /** v2, negatives and pauses: the share (fraction) of the account's 30-day spend the action touches. */
  readonly spend_share?: number;
}
export interface ActionApprovedData {
  readonly note: string;
}
/** One version of what an approver can edit: the change, what it was measured against, and how the policy classified it. */
export interface EditableVersion {
  readonly summary: string;
  readonly params: Record<string, unknown>;
  readonly based_on: Record<string, unknown>;
  readonly risk_tier: 'safe' | 'review' | 'blocked';
  readonly policy_reasons: readonly string[];
}
export interface ActionEditedData {
  /** The action as it was before the edit (the proposal, or an earlier edit of a returned action). */
  readonly before: EditableVersion;
  /** The action as edited, classified again by the policy against the platform's values at the edit. */
  readonly after: EditableVersion;
  /** What the approver sent: the one params field it replaces. */
  readonly edit: Record<string, unknown>;
}
export interface ActionRejectedData {
  readonly reason: string;
}
export interface ActionApplyStartedData {
  readonly worker_id: string;
  readonly attempt: number;
  /** v2: names this claim; only its holder may heartbeat or finish the attempt. */
  readonly claim_id?: string;
  /** v2: the claim is the worker's until then (ISO time); a heartbeat extends it. v1 claims have no lease. */
  readonly lease_until?: string;
}
export interface ActionApplyHeartbeatData {
  readonly worker_id: string;
  readonly claim_id: string;
  readonly lease_until: string;
}
export interface ActionAppliedData {
  readonly worker_id: string;
  readonly attempt: number;
  /** Parts of the change the platform refused while applying the rest (Google Ads partialFailure); absent when all went through. */
  readonly partial_failures?: readonly PartialFailure[];
  /** Each operation the platform applied, with the resource name it answered (Google Ads); absent for platforms that name none. */
  readonly applied_operations?: readonly AppliedOperation[];
}
export interface AppliedOperation {
  /** What the operation was about: `keyword 1111-11112`. */
  readonly subject: string;
  /** The platform's name of the changed resource: `customers/1234567890/adGroupCriteria/1111~11112`. */
  readonly resource_name: string;
}
export interface PartialFailure {
  /** What the refused operation was about: `keyword 1111-99999`, `negative "free" (phrase)`. */
  readonly subject: string;
  readonly error_code: string;
  readonly message: string;
}
export interface ActionApplyFailedData {
  readonly worker_id: string;
  readonly attempt: number;
  readonly error: string;
  readonly will_retry: boolean;
}
export interface ActionReturnedToQueueData {
  readonly reason: string;
}

export type KillSwitchEngaged = EventEnvelope<'KillSwitchEngaged', KillSwitchEngagedData>;
export type KillSwitchReleased = EventEnvelope<'KillSwitchReleased', KillSwitchReleasedData>;
export type AutoApplySlotReserved = EventEnvelope<'AutoApplySlotReserved', AutoApplySlotReservedData>;
export type ActionApproved = EventEnvelope<'ActionApproved', ActionApprovedData>;
export type ActionRejected = EventEnvelope<'ActionRejected', ActionRejectedData>;
export type ActionEdited = EventEnvelope<'ActionEdited', ActionEditedData>;
export type ActionApplyStarted = EventEnvelope<'ActionApplyStarted', ActionApplyStartedData>;
export type ActionApplyHeartbeat = EventEnvelope<'ActionApplyHeartbeat', ActionApplyHeartbeatData>;
export type ActionApplied = EventEnvelope<'ActionApplied', ActionAppliedData>;
export type ActionApplyFailed = EventEnvelope<'ActionApplyFailed', ActionApplyFailedData>;
export type ActionReturnedToQueue = EventEnvelope<'ActionReturnedToQueue', ActionReturnedToQueueData>;

export type SafetyEvent = KillSwitchEngaged | KillSwitchReleased | AutoApplySlotReserved;
export type ActionLifecycleEvent =
  | ActionEdited
  | ActionApproved
  | ActionRejected
  | ActionApplyStarted
  | ActionApplyHeartbeat
  | ActionApplied
  | ActionApplyFailed
  | ActionReturnedToQueue;

const EDITABLE_VERSION = object({
  summary: str({ minLength: 1, maxLength: 500 }),
  params: { type: 'object' },
  based_on: { type: 'object' },
  risk_tier: enumOf(['safe', 'review', 'blocked']),
  policy_reasons: { type: 'array', items: str() },
});

export const ACTION_EVENT_DEFINITIONS: readonly EventDefinition[] = [
  {
    type: 'KillSwitchEngaged',
    version: 1,
    aggregate: 'workspace',
    description: "An admin engaged the workspace's kill switch: nothing is auto-applied, and auto-applied actions not yet live go back to the queue.",
    data: object({ reason: str({ maxLength: 2000 }) }),
  },
  {
    type: 'KillSwitchReleased',
    version: 1,
    aggregate: 'workspace',
    description: "An admin released the workspace's kill switch.",
    data: object({ reason: str({ maxLength: 2000 }) }),
  },
  {
    type: 'AutoApplySlotReserved',
    version: 1,
    aggregate: 'quota',
    description: "One of the account's 20 auto-apply slots of a UTC day was taken by an action. The quota subject of a day makes the cap exact under concurrency.",
    data: object({ action_id: id(), day: str({ pattern: '^\\d{4}-\\d{2}-\\d{2}$' }), slot: int(1) }),
  },
  {
    type: 'AutoApplySlotReserved',
    version: 2,
    aggregate: 'quota',
    description:
      "One of the account's 20 auto-apply slots of a UTC day was taken by an action. A budget or target change also records the day's first value of the campaign field (baseline, recorded once) and the value it sets; a negative or pause records the share of 30-day spend it touches. The quota subject of a day makes all three exact under concurrency.",
    data: object(
      {
        action_id: id(),
        day: str({ pattern: '^\\d{4}-\\d{2}-\\d{2}$' }),
        slot: int(1),
        band: object({
          campaign_id: id(),
          field: enumOf(['daily_budget', 'target_cpa', 'target_roas_pct']),
          baseline: { type: 'number', exclusiveMinimum: 0 },
          value: { type: 'number', exclusiveMinimum: 0 },
        }),
        spend_share: { type: 'number', minimum: 0 },
      },
      ['band', 'spend_share'],
    ),
  },
  {
    type: 'ActionApproved',
    version: 1,
    aggregate: 'action',
    description: 'A person approved a queued action; the apply worker takes it from here.',
    data: object({ note: str({ maxLength: 2000 }) }),
  },
  {
    type: 'ActionEdited',
    version: 1,
    aggregate: 'action',
    description:
      'A person edited a queued action and approved it in the same request (an ActionApproved follows in the same append): dropped proposed negative keywords or changed their match type, or changed a budget or target value. before and after keep both versions with their policy classification; after was classified again against the platform at the edit. The editor and the time are the envelope\'s actor and time. From here on the action is the after version: it is what the apply worker applies.',
    data: object({ before: EDITABLE_VERSION, after: EDITABLE_VERSION, edit: { type: 'object', minProperties: 1, maxProperties: 1 } }),
  },
  {
    type: 'ActionRejected',
    version: 1,
    aggregate: 'action',
    description: 'A person rejected a queued action; it will never be applied.',
    data: object({ reason: str({ maxLength: 2000 }) }),
  },
  {
    type: 'ActionApplyStarted',
    version: 1,
    aggregate: 'action',
    description: 'An apply worker passed the re-check and is applying the change on the platform.',
    data: object({ worker_id: str({ minLength: 1 }), attempt: int(1) }),
  },
  {
    type: 'ActionApplyStarted',
    version: 2,
    aggregate: 'action',
    description:
      'An apply worker passed the re-check and claimed the action until lease_until. While the lease runs no other worker can claim it; only the holder of claim_id can record how the attempt ended.',
    data: object({
      worker_id: str({ minLength: 1 }),
      attempt: int(1),
      claim_id: id(),
      lease_until: str({ format: 'date-time' }),
    }),
  },
  {
    type: 'ActionApplyHeartbeat',
    version: 1,
    aggregate: 'action',
    description: 'The apply worker holding claim_id is still waiting for the platform; its lease now runs until lease_until.',
    data: object({ worker_id: str({ minLength: 1 }), claim_id: id(), lease_until: str({ format: 'date-time' }) }),
  },
  {
    type: 'ActionApplied',
    version: 1,
    aggregate: 'action',
    description:
      'The change is live on the advertising platform. applied_operations lists each operation the platform applied with the resource name it answered; partial_failures lists the parts the platform refused while applying the rest (Google Ads partialFailure), each with the platform\'s error code and message.',
    data: object(
      {
        worker_id: str({ minLength: 1 }),
        attempt: int(1),
        partial_failures: {
          type: 'array',
          maxItems: 100,
          items: object({ subject: str({ maxLength: 300 }), error_code: str({ maxLength: 200 }), message: str({ maxLength: 1000 }) }),
        },
        applied_operations: {
          type: 'array',
          maxItems: 100,
          items: object({ subject: str({ maxLength: 300 }), resource_name: str({ maxLength: 300 }) }),
        },
      },
      ['partial_failures', 'applied_operations'],
    ),
  },
  {
    type: 'ActionApplyFailed',
    version: 1,
    aggregate: 'action',
    description: 'A platform call failed; will_retry says whether the apply worker tries again.',
    data: object({ worker_id: str({ minLength: 1 }), attempt: int(1), error: str(), will_retry: bool() }),
  },
  {
    type: 'ActionReturnedToQueue',
    version: 1,
    aggregate: 'action',
    description: 'The apply worker did not apply the action (a re-check failed, or the platform kept failing); it waits for approval again.',
    data: object({ reason: str() }),
  },
];
