import type { Commands } from '../command-bus.ts';
import { loadWorkspace } from '../queries.ts';
import type { CommandResult } from '../shared/handle.ts';
import { actionDecider } from './action-decider.ts';
import type { ApproveAction } from './action-lifecycle.ts';
import type { ActionState } from './action-state.ts';

/**
 * Approving needs two aggregates: the workspace says whether the proposer may approve
 * (distinct-approver rule), the action decides. The rule is read first; a change of the
 * rule racing an approval is decided by whichever the approval read, as before.
 *
 * @example
 * ```ts
 * await approveAction(commands, { workspaceId, accountId, actionId, note: '', meta });
 * ```
 */
export async function approveAction(
  commands: Commands,
  command: Omit<ApproveAction, 'type' | 'requireDistinctApprover'>,
): Promise<CommandResult<ActionState>> {
  const workspace = await loadWorkspace(commands.aggregates, command.workspaceId);
  return commands.handle(actionDecider, { ...command, type: 'ApproveAction', requireDistinctApprover: workspace.state.requireDistinctApprover });
}
