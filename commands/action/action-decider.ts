import type { UnsealedEvent } from '../../src/events/envelope.ts';
import { streams } from '../../src/event-store/subjects.ts';
import { unknownCommand, type Decider } from '../shared/decider.ts';
import {
  decideApproveAction,
  decideFinishApply,
  decideHeartbeatApply,
  decideRejectAction,
  decideStartApply,
  type ApproveAction,
  type FinishApply,
  type HeartbeatApply,
  type RejectAction,
  type StartApply,
} from './action-lifecycle.ts';
import { actionFold, type ActionState } from './action-state.ts';
import { decideProposeAction, type ProposeAction } from './propose-action.ts';

export type ActionCommand = ProposeAction | ApproveAction | RejectAction | StartApply | HeartbeatApply | FinishApply;

function actionIdOf(command: ActionCommand): string {
  return command.type === 'ProposeAction' ? command.proposal.action_id : command.actionId;
}

function decideAction(command: ActionCommand, state: ActionState): UnsealedEvent[] {
  switch (command.type) {
    case 'ProposeAction':
      return decideProposeAction(command, state);
    case 'ApproveAction':
      return decideApproveAction(command, state);
    case 'RejectAction':
      return decideRejectAction(command, state);
    case 'StartApply':
      return decideStartApply(command, state);
    case 'HeartbeatApply':
      return decideHeartbeatApply(command, state);
    case 'FinishApply':
      return decideFinishApply(command, state);
    default:
      return unknownCommand(command);
  }
}

/**
 * The events with times strictly after the action's last change and each other (a millisecond
 * later where the clock did not move, or another process's clock is behind): an action's
 * version hashes the time of its last change with its status and params (action-version.ts),
 * so two changes back to the same status and params within one millisecond would otherwise
 * give a version a client read before them, and a decision on it would pass.
 */
function laterThanLastChange(events: UnsealedEvent[], changedAt: string | null): UnsealedEvent[] {
  let floor = changedAt === null ? Number.NEGATIVE_INFINITY : Date.parse(changedAt);
  return events.map((event) => {
    const at = Math.max(Date.parse(event.time), floor + 1);
    floor = at;
    return at === Date.parse(event.time) ? event : { ...event, time: new Date(at).toISOString() };
  });
}

/**
 * A proposed change to an ad account, from proposal through approval to applying.
 *
 * @example
 * ```ts
 * await commands.handle(actionDecider, { type: 'RejectAction', workspaceId, accountId, actionId, reason, meta });
 * ```
 */
export const actionDecider: Decider<ActionCommand, ActionState> = {
  name: 'action',
  ...actionFold,
  decide(command, state) {
    return laterThanLastChange(decideAction(command, state), state.changedAt);
  },
  streamOf: (command) => streams.action(command.workspaceId, command.accountId, actionIdOf(command)),
};
