import type { ActionProposedData } from '../../src/events/catalogue/index.ts';
import { newEvent, type CommandMeta } from '../shared/new-event.ts';
import type { ActionState } from './action-state.ts';
import { streams } from '../../src/event-store/subjects.ts';

export interface ProposeAction {
  readonly type: 'ProposeAction';
  readonly workspaceId: string;
  readonly accountId: string;
  readonly proposal: ActionProposedData;
  readonly meta: CommandMeta;
}

/** The first event of an action. Proposing the same action id again is a retried append: nothing more is written. */
export function decideProposeAction(command: ProposeAction, state: ActionState) {
  if (state.exists) return [];
  return [
    newEvent(
      'ActionProposed',
      command.proposal,
      streams.action(command.workspaceId, command.accountId, command.proposal.action_id),
      command.meta,
    ),
  ];
}
