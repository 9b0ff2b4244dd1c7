import type { ActionKind, DomainEvent, RiskTier } from '../../src/events/catalogue/index.ts';
import { actionVersion } from './action-version.ts';

/**
 * Where an action stands. queued → approved → applying → applied; auto_applied →
 * applying → applied; any of approved/auto_applied/applying → returned (back in the
 * queue); queued/returned → rejected. blocked actions never move.
 */
export const ACTION_STATUSES = ['queued', 'auto_applied', 'approved', 'applying', 'applied', 'returned', 'rejected', 'blocked'] as const;
export type ActionStatus = (typeof ACTION_STATUSES)[number];

/** Statuses a person can act on from the approvals view. */
export const AWAITING_APPROVAL: readonly ActionStatus[] = ['queued', 'returned'];
/** Statuses the apply worker acts on. */
export const READY_TO_APPLY: readonly ActionStatus[] = ['approved', 'auto_applied', 'applying'];

/** Who is applying the action, and until when nobody else may. */
export interface ApplyClaim {
  readonly id: string;
  readonly workerId: string;
  /** ISO time; null for claims recorded before leases existed (ActionApplyStarted v1): those may be taken over. */
  readonly leaseUntil: string | null;
}

export interface ActionState {
  readonly exists: boolean;
  readonly kind: ActionKind | null;
  readonly riskTier: RiskTier | null;
  readonly status: ActionStatus | 'none';
  /** Whether the action reached the apply worker through auto-apply (the kill switch applies to those). */
  readonly autoApplied: boolean;
  readonly attempts: number;
  readonly params: Record<string, unknown>;
  readonly basedOn: Record<string, unknown>;
  /** The summary and policy reasons people see; with params, based_on and the tier, what an edit records as `before`. */
  readonly summary: string;
  readonly policyReasons: readonly string[];
  readonly runId: string | null;
  /** When it was proposed (ISO): the UTC day whose quota its auto-apply slot counts against. */
  readonly proposedAt: string | null;
  /** The API key behind the proposal (the endpoint's caller, or the key that started the run); null when not known (v1 events of runs). */
  readonly proposerKeyId: string | null;
  /** The claim of the attempt in progress while `applying`; null otherwise. */
  readonly claim: ApplyClaim | null;
  /**
   * The claim whose attempt ended last (applied, failed or returned): a finish of that claim
   * decided again after its append's acknowledgement was lost records only what is missing.
   */
  readonly endedClaimId: string | null;
  /**
   * ISO time of the last event that changed what the approvals view shows (every event but
   * heartbeats, as the approvals projection's `updated_at`); with status and params, the
   * action's version (action-version.ts). Null before the proposal.
   */
  readonly changedAt: string | null;
  /**
   * An edit stored without the approval it was made with (ActionEdited is the last event: the
   * append of the pair stopped after the first, the store having no atomic batch): who made it
   * and the version the action had before it, so that request, sent again, records only the
   * approval (decideApproveAction). Null once any other event follows.
   */
  readonly editAwaitingApproval: { readonly actor: string; readonly versionBefore: string; readonly edit: unknown } | null;
  /**
   * The last attempt failed for good (ActionApplyFailed with will_retry false is the last event)
   * and its return to the queue was not stored: no new attempt may start, and the apply worker
   * records the return with this reason (the finish's append stopped after its first event).
   */
  readonly returnAwaited: { readonly reason: string } | null;
  /**
   * The last approval or rejection as it was requested: who, the note (or reason), the edit it
   * was made with (when that person's ActionEdited came just before it) and the versions the
   * action had before it and before that edit. The same request sent again after its append's
   * acknowledgement was lost records nothing and answers as a success (retriesOwnDecision).
   * Null before any.
   */
  readonly lastDecision: {
    readonly decision: 'approved' | 'rejected';
    readonly actor: string;
    /** ActionApproved's note, or ActionRejected's reason. */
    readonly text: string;
    readonly edit: unknown;
    readonly versionBefore: string;
    readonly versionBeforeEdit: string | null;
  } | null;
}

/** How an action's events fold into its decision state (the decider is action-decider.ts). */
export const actionFold = {
  // 6: endedClaimId. 7: editAwaitingApproval, returnAwaited. 8: lastDecision.
  stateVersion: 8,
  initialState: (): ActionState => ({
    exists: false,
    kind: null,
    riskTier: null,
    status: 'none',
    autoApplied: false,
    attempts: 0,
    params: {},
    basedOn: {},
    summary: '',
    policyReasons: [],
    runId: null,
    proposedAt: null,
    proposerKeyId: null,
    claim: null,
    endedClaimId: null,
    changedAt: null,
    editAwaitingApproval: null,
    returnAwaited: null,
    lastDecision: null,
  }),
  evolve(state: ActionState, event: DomainEvent): ActionState {
    const next = evolveAction(state, event);
    // A heartbeat changes nothing a person sees: the version stays (the projection skips it too).
    if (next === state || event.type === 'ActionApplyHeartbeat') return next;
    const editAwaitingApproval =
      event.type === 'ActionEdited'
        ? { actor: actorKey(event.actor), versionBefore: actionVersion({ status: state.status, params: state.params, changedAt: state.changedAt }), edit: event.data.edit }
        : null;
    const returnAwaited = event.type === 'ActionApplyFailed' && !event.data.will_retry ? { reason: `the last attempt failed for good: ${event.data.error}` } : null;
    let lastDecision = state.lastDecision;
    if (event.type === 'ActionApproved' || event.type === 'ActionRejected') {
      const actor = actorKey(event.actor);
      // The approval an edit-and-approve's ActionEdited was stored without: made with that edit.
      const edited = event.type === 'ActionApproved' && state.editAwaitingApproval?.actor === actor ? state.editAwaitingApproval : null;
      lastDecision = {
        decision: event.type === 'ActionApproved' ? 'approved' : 'rejected',
        actor,
        text: event.type === 'ActionApproved' ? event.data.note : event.data.reason,
        edit: edited?.edit ?? null,
        versionBefore: actionVersion({ status: state.status, params: state.params, changedAt: state.changedAt }),
        versionBeforeEdit: edited?.versionBefore ?? null,
      };
    }
    return { ...next, changedAt: event.time, editAwaitingApproval, returnAwaited, lastDecision };
  },
};

function evolveAction(state: ActionState, event: DomainEvent): ActionState {
  switch (event.type) {
    case 'ActionProposed':
      return {
        ...state,
        exists: true,
        kind: event.data.kind,
        riskTier: event.data.risk_tier,
        status: event.data.disposition,
        autoApplied: event.data.disposition === 'auto_applied',
        params: event.data.params,
        basedOn: event.data.based_on,
        summary: event.data.summary,
        policyReasons: event.data.policy_reasons,
        runId: event.data.run_id,
        proposedAt: event.time,
        proposerKeyId: event.data.proposer_key_id ?? (event.actor.kind === 'api_key' ? event.actor.id : null),
      };
    case 'ActionEdited': {
      // From here on the action is the edited version: the apply worker applies these params.
      const { after } = event.data;
      return { ...state, params: after.params, basedOn: after.based_on, summary: after.summary, policyReasons: after.policy_reasons, riskTier: after.risk_tier };
    }
    case 'ActionApproved':
      return { ...state, status: 'approved', autoApplied: false };
    case 'ActionRejected':
      return { ...state, status: 'rejected' };
    case 'ActionApplyStarted':
      return {
        ...state,
        status: 'applying',
        attempts: event.data.attempt,
        claim: { id: event.data.claim_id ?? event.id, workerId: event.data.worker_id, leaseUntil: event.data.lease_until ?? null },
      };
    case 'ActionApplyHeartbeat':
      return state.claim?.id === event.data.claim_id ? { ...state, claim: { ...state.claim, leaseUntil: event.data.lease_until } } : state;
    case 'ActionApplyFailed':
      // The attempt is over; the next one (after the backoff) claims afresh.
      return attemptEnded(state, {});
    case 'ActionApplied':
      return attemptEnded(state, { status: 'applied' });
    case 'ActionReturnedToQueue':
      return attemptEnded(state, { status: 'returned', autoApplied: false });
    default:
      return state;
  }
}

/** The attempt under the current claim is over: no claim, and that claim remembered as the one that ended last. */
function attemptEnded(state: ActionState, change: Partial<Pick<ActionState, 'status' | 'autoApplied'>>): ActionState {
  return { ...state, ...change, claim: null, endedClaimId: state.claim?.id ?? state.endedClaimId };
}

/** An actor as one comparable string (`api_key:<id>`). */
export function actorKey(actor: { readonly kind: string; readonly id: string }): string {
  return `${actor.kind}:${actor.id}`;
}
