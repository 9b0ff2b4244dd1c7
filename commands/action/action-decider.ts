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
  },
  streamOf: (command) => streams.action(command.workspaceId, command.accountId, actionIdOf(command)),
};
