import type { WorkspaceState } from './workspace-decider.ts';

/**
 * Whether the workspace's kill switch stops auto-applied changes, and the reason recorded
 * when it does: the one rule both the proposal (queue instead of auto-applying) and the apply
 * worker (return an auto-applied action before it goes live) follow.
 *
 * @example
 * ```ts
 * const stopped = killSwitchStop(workspace.state);
 * if (stopped) return returnToQueue(stopped);
 * ```
 */
export function killSwitchStop(workspace: Pick<WorkspaceState, 'killSwitch'>): string | null {
  return workspace.killSwitch.engaged ? 'the workspace kill switch is engaged' : null;
}
