import { ProblemError } from '../../src/errors/problem-error.ts';
import { newEvent, type CommandMeta, type EventAddress } from '../shared/new-event.ts';
import { AWAITING_APPROVAL, READY_TO_APPLY, type ActionState } from './action-state.ts';

export class ActionNotFoundError extends ProblemError {
  constructor(actionId: string) {
    super({ type: 'action-not-found', status: 404, title: 'Action not found', detail: `No action ${actionId} in this account.` });
  }
}

export class ActionNotInQueueError extends ProblemError {
  constructor(actionId: string, status: string) {
    super({
      type: 'action-not-in-queue',
      status: 409,
      title: 'The action is not waiting for approval',
      detail: `Action ${actionId} is ${status}; only a queued (or returned) action can be approved or rejected.`,
      extensions: { action_status: status },
    });
  }
}

/** The apply worker has nothing to do for this action (already applied, rejected, ...). */
export class NothingToApplyError extends Error {
  constructor(readonly actionId: string, readonly status: string) {
    super(`action ${actionId} is ${status}`);
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
  return { workspaceId: command.workspaceId, accountId: command.accountId, aggregate: { type: 'action', id: command.actionId } };
}

function awaitingApproval(command: OnAction, state: ActionState): void {
  if (!state.exists) throw new ActionNotFoundError(command.actionId);
  if (!AWAITING_APPROVAL.includes(state.status as never)) throw new ActionNotInQueueError(command.actionId, state.status);
}

export interface ApproveAction extends OnAction {
  readonly note: string;
}

export function decideApproveAction(command: ApproveAction, state: ActionState) {
  awaitingApproval(command, state);
  return [newEvent('ActionApproved', { note: command.note }, address(command), command.meta)];
}

export interface RejectAction extends OnAction {
  readonly reason: string;
}

export function decideRejectAction(command: RejectAction, state: ActionState) {
  awaitingApproval(command, state);
  return [newEvent('ActionRejected', { reason: command.reason }, address(command), command.meta)];
}

export interface StartApply extends OnAction {
  readonly workerId: string;
}

/** Claims an action for applying. `applying` again means the previous attempt's worker died: the change is idempotent, so it is retried. */
export function decideStartApply(command: StartApply, state: ActionState) {
  if (!state.exists || !READY_TO_APPLY.includes(state.status as never)) throw new NothingToApplyError(command.actionId, state.status);
  return [newEvent('ActionApplyStarted', { worker_id: command.workerId, attempt: state.attempts + 1 }, address(command), command.meta)];
}

export type ApplyResult =
  | { readonly kind: 'applied' }
  | { readonly kind: 'failed'; readonly error: string; readonly willRetry: boolean }
  | { readonly kind: 'returned'; readonly reason: string };

export interface FinishApply extends OnAction {
  readonly workerId: string;
  readonly result: ApplyResult;
}

/** Records how an apply attempt ended. Only the attempt in progress can end; anything else is a stale redelivery. */
export function decideFinishApply(command: FinishApply, state: ActionState) {
  const { result } = command;
  if (result.kind === 'returned') {
    if (!READY_TO_APPLY.includes(state.status as never)) return [];
    return [newEvent('ActionReturnedToQueue', { reason: result.reason }, address(command), command.meta)];
  }
  if (state.status !== 'applying') return [];
  const attempt = state.attempts;
  if (result.kind === 'applied') {
    return [newEvent('ActionApplied', { worker_id: command.workerId, attempt }, address(command), command.meta)];
  }
  const failed = newEvent(
    'ActionApplyFailed',
    { worker_id: command.workerId, attempt, error: result.error, will_retry: result.willRetry },
    address(command),
    command.meta,
  );
  if (result.willRetry) return [failed];
  return [failed, newEvent('ActionReturnedToQueue', { reason: `the platform kept failing: ${result.error}` }, address(command), command.meta)];
}
