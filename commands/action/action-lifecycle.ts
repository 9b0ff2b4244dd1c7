import { AppError, ErrorKind } from '../../src/errors/app-error.ts';
import type { AppliedOperation, PartialFailure } from '../../src/events/catalogue/index.ts';
import { isDeepStrictEqual } from 'node:util';
import { EditBlockedByPolicyError, editedParams, type ReviewedEdit } from './action-edit.ts';
import { newEvent, type CommandMeta, type EventAddress } from '../shared/new-event.ts';
import { actorKey, AWAITING_APPROVAL, READY_TO_APPLY, type ActionState } from './action-state.ts';
import { streams } from '../../src/event-store/subjects.ts';
import { actionVersion } from './action-version.ts';

export class ActionNotFoundError extends AppError {
  readonly kind = ErrorKind.NotFound;
  constructor(actionId: string) {
    super('action-not-found', `No action ${actionId} in this account.`);
  }
}

export class ActionNotInQueueError extends AppError {
  readonly kind = ErrorKind.IllegalState;
  constructor(actionId: string, status: string) {
    super('action-not-in-queue', `Action ${actionId} is ${status}; only a queued (or returned) action can be edited, approved or rejected.`, {
      details: { action_status: status },
    });
  }
}

/**
 * The client decided on a version of the action it read earlier (`expected_version`), and the
 * action has changed since: edited, returned to the queue, or otherwise moved on. Deciding now
 * would approve (or reject) something the person never saw.
 */
export class ActionChangedError extends AppError {
  readonly kind = ErrorKind.Conflict;
  constructor(actionId: string, expectedVersion: string, currentVersion: string, status: string) {
    super(
      'action-changed',
      `Action ${actionId} changed since version ${expectedVersion} (it is now version ${currentVersion}, ${status}); nothing was decided. ` +
        'Read the action again (the approvals list), review it as it is now, and decide again with its new `version` as `expected_version`.',
      { details: { expected_version: expectedVersion, action_version: currentVersion, action_status: status } },
    );
  }
}

export class DistinctApproverRequiredError extends AppError {
  readonly kind = ErrorKind.Forbidden;
  constructor(actionId: string, keyId: string) {
    super(
      'distinct-approver-required',
      `The workspace requires a distinct approver: API key ${keyId} proposed action ${actionId} (or started the run that proposed it) and cannot approve it.`,
      { details: { proposer_key_id: keyId } },
    );
  }
}

/** The apply worker has nothing to do for this action (already applied, rejected, ...). */
export class NothingToApplyError extends Error {
  readonly actionId: string;
  readonly status: string;

  constructor(actionId: string, status: string) {
    super(`action ${actionId} is ${status}`);
    this.actionId = actionId;
    this.status = status;
    this.name = 'NothingToApplyError';
  }
}

interface OnAction {
  readonly workspaceId: string;
  readonly accountId: string;
  readonly actionId: string;
  readonly meta: CommandMeta;
}

function address(command: OnAction): EventAddress {
  return streams.action(command.workspaceId, command.accountId, command.actionId);
}

/** An approve or reject, with the version of the action the client saw when it has one. */
interface OnSeenAction extends OnAction {
  /** The action's `version` as the client read it; absent to decide on whatever the action is now. */
  readonly expectedVersion?: string;
}

/**
 * Refuses unless the action waits for a person, and, when the command names the version the
 * client saw, unless it is still that version (ActionChangedError). Also called before an
 * edit is reviewed, so a changed action is refused before its edit is checked.
 */
export function awaitingApproval(command: OnSeenAction & { readonly edit?: unknown }, state: ActionState): void {
  if (!state.exists) throw new ActionNotFoundError(command.actionId);
  if (!AWAITING_APPROVAL.includes(state.status as never)) throw new ActionNotInQueueError(command.actionId, state.status);
  if (command.expectedVersion === undefined || retriesOwnEdit(command, state)) return;
  const current = actionVersion({ status: state.status, params: state.params, changedAt: state.changedAt });
  if (command.expectedVersion !== current) throw new ActionChangedError(command.actionId, command.expectedVersion, current, state.status);
}

/**
 * The command is an edit-and-approve sent again after its edit was stored and its approval
 * was not: the same actor, naming the version the action had before that edit (or none).
 */
export function retriesOwnEdit(command: OnSeenAction & { readonly edit?: unknown }, state: ActionState): boolean {
  const pending = state.editAwaitingApproval;
  if (!pending || command.edit === undefined || pending.actor !== actorKey(command.meta.actor)) return false;
  return command.expectedVersion === undefined || command.expectedVersion === pending.versionBefore;
}

/** A decision as a client asked for it: what makes two requests the same one. */
export interface DecisionRequest {
  readonly decision: 'approved' | 'rejected';
  readonly actor: CommandMeta['actor'];
  /** The approval's note, or the rejection's reason. */
  readonly text: string;
  /** The edit as the client sent it (`edit` of the body), for an edit-and-approve. */
  readonly edit?: unknown;
  readonly expectedVersion?: string;
}

/**
 * The request is one this caller already made and the log holds (its append's acknowledgement
 * was lost, and the client, told 503, sent it again): the same decision by the same actor,
 * with the same note or reason and the same edit (or none), naming the version the action had
 * before it (or before that edit), or no version. It records nothing and answers with the
 * action as it is now, instead of a 409 that reads as someone else's decision. Any other
 * request (another note, another edit) is a new decision, refused as before.
 */
export function retriesOwnDecision(state: ActionState, request: DecisionRequest): boolean {
  const last = state.lastDecision;
  if (!last || AWAITING_APPROVAL.includes(state.status as never)) return false;
  if (last.decision !== request.decision || last.actor !== actorKey(request.actor) || last.text !== request.text) return false;
  if (request.edit === undefined) return last.edit === null && (request.expectedVersion === undefined || request.expectedVersion === last.versionBefore);
  return (
    last.edit !== null &&
    isDeepStrictEqual(last.edit, request.edit) &&
    (request.expectedVersion === undefined || request.expectedVersion === last.versionBeforeEdit)
  );
}

export interface ApproveAction extends OnSeenAction {
  readonly type: 'ApproveAction';
  readonly note: string;
  /** The workspace's rule, read before the command (approve-action.ts): the key behind the proposal cannot approve it. */
  readonly requireDistinctApprover: boolean;
  /** The approver's edit, reviewed by the policy; absent to approve the action as it stands. */
  readonly edit?: ReviewedEdit;
}

/**
 * Approves a queued action, edited first when the command carries an edit: ActionEdited
 * (both versions) then ActionApproved, in one append, so what is approved is exactly what
 * the apply worker applies. An edit may only drop or re-match proposed keywords or change a
 * budget or target value (editedParams), and a version the policy blocks is refused.
 */
export function decideApproveAction(command: ApproveAction, state: ActionState) {
  const request = { decision: 'approved', actor: command.meta.actor, text: command.note, edit: command.edit?.edit, expectedVersion: command.expectedVersion } as const;
  if (retriesOwnDecision(state, request)) return [];
  awaitingApproval(command, state);
  const approver = command.meta.actor;
  if (command.requireDistinctApprover && approver.kind === 'api_key' && state.proposerKeyId === approver.id) {
    throw new DistinctApproverRequiredError(command.actionId, approver.id);
  }
  const approved = newEvent('ActionApproved', { note: command.note }, address(command), command.meta);
  if (!command.edit) return [approved];
  const { edit, after } = command.edit;
  // The same request again after its ActionEdited was stored without its ActionApproved: the
  // edit is in place (the review of it again gives the params the action has), so only the
  // approval is missing. Without this, the version the client saw is gone and the approver
  // could never finish; someone else could approve a version they did not choose.
  if (retriesOwnEdit(command, state) && isDeepStrictEqual(after.params, state.params)) return [approved];
  const expected = editedParams(state.kind, state.params, edit);
  if (!isDeepStrictEqual(expected, after.params)) {
    // The review read other params than the action has now: a caller's bug, never a client's input.
    throw new Error(`the reviewed edit of action ${command.actionId} does not match its current params`);
  }
  if (after.risk_tier === 'blocked') throw new EditBlockedByPolicyError(after.policy_reasons);
  const before = { summary: state.summary, params: state.params, based_on: state.basedOn, risk_tier: state.riskTier!, policy_reasons: state.policyReasons };
  return [newEvent('ActionEdited', { before, after, edit: { ...edit } }, address(command), command.meta), approved];
}

export interface RejectAction extends OnSeenAction {
  readonly type: 'RejectAction';
  readonly reason: string;
}

export function decideRejectAction(command: RejectAction, state: ActionState) {
  if (retriesOwnDecision(state, { decision: 'rejected', actor: command.meta.actor, text: command.reason, expectedVersion: command.expectedVersion })) return [];
  awaitingApproval(command, state);
  return [newEvent('ActionRejected', { reason: command.reason }, address(command), command.meta)];
}

/** Another apply worker's claim on the action is live: nobody else may apply it until the lease ends. */
export class ApplyClaimHeldError extends Error {
  readonly actionId: string;
  readonly holder: string;
  readonly leaseUntil: string;

  constructor(actionId: string, holder: string, leaseUntil: string) {
    super(`action ${actionId} is being applied by ${holder} (claim leased until ${leaseUntil})`);
    this.actionId = actionId;
    this.holder = holder;
    this.leaseUntil = leaseUntil;
    this.name = 'ApplyClaimHeldError';
  }
}

/** The worker's claim is no longer the action's claim (its lease ran out and another worker took over, or the attempt ended). */
export class ApplyClaimLostError extends Error {
  readonly actionId: string;
  readonly claimId: string;

  constructor(actionId: string, claimId: string) {
    super(`claim ${claimId} on action ${actionId} is no longer the current claim`);
    this.actionId = actionId;
    this.claimId = claimId;
    this.name = 'ApplyClaimLostError';
  }
}

const nowOf = (meta: CommandMeta) => meta.now ?? new Date();

/** A live claim held by someone: `applying` with a lease that has not run out. */
function liveClaim(state: ActionState, now: Date) {
  if (state.status !== 'applying' || state.claim === null || state.claim.leaseUntil === null) return null;
  return Date.parse(state.claim.leaseUntil) > now.getTime() ? state.claim : null;
}

export interface StartApply extends OnAction {
  readonly type: 'StartApply';
  readonly workerId: string;
  /** Fresh for every attempt; heartbeats and the finish must name it. */
  readonly claimId: string;
  readonly leaseMs: number;
}

/**
 * Claims an action for applying, for `leaseMs`. An action in `applying` whose claim is live
 * cannot be claimed again (ApplyClaimHeldError); once the lease ran out without a heartbeat,
 * its worker is taken to be dead and the change (idempotent) is retried under a new claim.
 * Deciding again for the claim the action holds appends nothing.
 */
export function decideStartApply(command: StartApply, state: ActionState) {
  // This very claim, stored though its worker never heard so (the append's acknowledgement was
  // lost and the command was decided again on a reload): the worker holds it and goes on. Refused
  // as another's, the action waited out its own lease and was taken over as a second attempt.
  if (state.exists && state.status === 'applying' && state.claim?.id === command.claimId) return [];
  if (!state.exists || !READY_TO_APPLY.includes(state.status as never)) throw new NothingToApplyError(command.actionId, state.status);
  // The last attempt failed for good: the action goes back to the queue (the worker records the
  // return that was not stored), never to another attempt of a change the platform refused.
  if (state.returnAwaited) throw new NothingToApplyError(command.actionId, state.status);
  const now = nowOf(command.meta);
  const held = liveClaim(state, now);
  if (held) throw new ApplyClaimHeldError(command.actionId, held.workerId, held.leaseUntil!);
  return [
    newEvent(
      'ActionApplyStarted',
      {
        worker_id: command.workerId,
        attempt: state.attempts + 1,
        claim_id: command.claimId,
        lease_until: new Date(now.getTime() + command.leaseMs).toISOString(),
      },
      address(command),
      command.meta,
    ),
  ];
}

export interface HeartbeatApply extends OnAction {
  readonly type: 'HeartbeatApply';
  readonly workerId: string;
  readonly claimId: string;
  readonly leaseMs: number;
}

/** Extends the lease of the worker's own claim; refused once the claim is not the action's claim any more. */
export function decideHeartbeatApply(command: HeartbeatApply, state: ActionState) {
  if (state.status !== 'applying' || state.claim?.id !== command.claimId) throw new ApplyClaimLostError(command.actionId, command.claimId);
  const leaseUntil = new Date(nowOf(command.meta).getTime() + command.leaseMs).toISOString();
  return [newEvent('ActionApplyHeartbeat', { worker_id: command.workerId, claim_id: command.claimId, lease_until: leaseUntil }, address(command), command.meta)];
}

export type ApplyResult =
  | { readonly kind: 'applied'; readonly partialFailures?: readonly PartialFailure[]; readonly appliedOperations?: readonly AppliedOperation[] }
  /** `refused`: the platform definitely refused the change (no retry can change its mind). */
  | { readonly kind: 'failed'; readonly error: string; readonly willRetry: boolean; readonly refused?: boolean }
  | { readonly kind: 'returned'; readonly reason: string };

export interface FinishApply extends OnAction {
  readonly type: 'FinishApply';
  readonly workerId: string;
  /** The claim the attempt ran under; null for a return decided before claiming (re-check, kill switch). */
  readonly claimId: string | null;
  readonly result: ApplyResult;
}

/**
 * Records how an apply attempt ended. Only the holder of the current claim can end an
 * attempt (ApplyClaimLostError otherwise: a worker whose lease ran out and was taken over
 * must not overwrite the new attempt). A return before claiming cannot pull the action
 * away from a live claim (ApplyClaimHeldError); a return for an action that already left
 * the apply path is a stale redelivery and records nothing.
 */
export function decideFinishApply(command: FinishApply, state: ActionState) {
  const { result } = command;
  if (command.claimId === null) {
    if (!READY_TO_APPLY.includes(state.status as never)) return [];
    if (result.kind !== 'returned') throw new ApplyClaimLostError(command.actionId, '(none)');
    const held = liveClaim(state, nowOf(command.meta));
    if (held) throw new ApplyClaimHeldError(command.actionId, held.workerId, held.leaseUntil!);
    return [newEvent('ActionReturnedToQueue', { reason: result.reason }, address(command), command.meta)];
  }
  if (state.status !== 'applying' || state.claim?.id !== command.claimId) {
    const rest = restOfEndedAttempt(command, state);
    if (rest) return rest;
    throw new ApplyClaimLostError(command.actionId, command.claimId);
  }
  if (result.kind === 'returned') return [newEvent('ActionReturnedToQueue', { reason: result.reason }, address(command), command.meta)];
  const attempt = state.attempts;
  if (result.kind === 'applied') {
    return [
      newEvent(
        'ActionApplied',
        {
          worker_id: command.workerId,
          attempt,
          ...(result.partialFailures?.length ? { partial_failures: result.partialFailures.slice(0, 100) } : {}),
          ...(result.appliedOperations?.length ? { applied_operations: result.appliedOperations.slice(0, 100) } : {}),
        },
        address(command),
        command.meta,
      ),
    ];
  }
  const failed = newEvent(
    'ActionApplyFailed',
    { worker_id: command.workerId, attempt, error: result.error, will_retry: result.willRetry },
    address(command),
    command.meta,
  );
  if (result.willRetry) return [failed];
  return [failed, newEvent('ActionReturnedToQueue', { reason: finalFailureReason(result) }, address(command), command.meta)];
}

function finalFailureReason(result: Extract<ApplyResult, { kind: 'failed' }>): string {
  return result.refused ? `the platform refused the change: ${result.error}` : `the platform kept failing: ${result.error}`;
}

/**
 * A finish of the claim whose attempt already ended, decided again because the append's
 * acknowledgement was lost (the events were stored): what of its outcome is not recorded yet,
 * none when all of it is; undefined when the recorded outcome is another one (then the claim
 * was lost). Without it the worker took the refusal for a takeover and left the action
 * `applying` for good.
 */
function restOfEndedAttempt(command: FinishApply, state: ActionState): ReturnType<typeof newEvent>[] | undefined {
  if (state.endedClaimId === null || state.endedClaimId !== command.claimId) return undefined;
  const { result } = command;
  const attemptOver = state.status === 'applying' && state.claim === null;
  switch (result.kind) {
    case 'applied':
      return state.status === 'applied' ? [] : undefined;
    case 'returned':
      return state.status === 'returned' ? [] : undefined;
    case 'failed':
      if (state.status === 'returned' && !result.willRetry) return [];
      if (!attemptOver) return undefined;
      // ActionApplyFailed is stored; a final failure's ActionReturnedToQueue may not be.
      return result.willRetry ? [] : [newEvent('ActionReturnedToQueue', { reason: finalFailureReason(result) }, address(command), command.meta)];
  }
}
