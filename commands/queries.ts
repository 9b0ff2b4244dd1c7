import type { LoadedAggregate } from '../src/event-store/aggregate-repository.ts';
import { streams } from '../src/event-store/subjects.ts';
import { accountDecider } from './account/account-decider.ts';
import type { AccountState } from './account/account-state.ts';
import { actionDecider } from './action/action-decider.ts';
import type { ActionState } from './action/action-state.ts';
import { keyDecider, type KeyState } from './key/key-decider.ts';
import { quotaDecider, type QuotaState } from './quota/auto-apply-quota.ts';
import type { Aggregates } from './shared/aggregates.ts';
import { workspaceDecider, type WorkspaceState } from './workspace/workspace-decider.ts';

/*
 * Reads of decision state, for callers that must know it before acting (a route checking
 * an account exists, a worker re-checking the kill switch). They share the command side's
 * cache but decide nothing; a decision is only ever taken inside `decide`.
 */

/** @example const { state } = await loadWorkspace(aggregates, workspaceId); if (state.killSwitch.engaged) ... */
export function loadWorkspace(aggregates: Aggregates, workspaceId: string): Promise<LoadedAggregate<WorkspaceState>> {
  return aggregates.load(workspaceDecider, streams.workspace(workspaceId));
}

export function loadKey(aggregates: Aggregates, workspaceId: string, keyId: string): Promise<LoadedAggregate<KeyState>> {
  return aggregates.load(keyDecider, streams.key(workspaceId, keyId));
}

export function loadAccount(aggregates: Aggregates, workspaceId: string, accountId: string): Promise<LoadedAggregate<AccountState>> {
  return aggregates.load(accountDecider, streams.account(workspaceId, accountId));
}

export function loadAction(aggregates: Aggregates, workspaceId: string, accountId: string, actionId: string): Promise<LoadedAggregate<ActionState>> {
  return aggregates.load(actionDecider, streams.action(workspaceId, accountId, actionId));
}

/** @param day UTC day, `yyyy-mm-dd`. */
export function loadQuota(aggregates: Aggregates, workspaceId: string, accountId: string, day: string): Promise<LoadedAggregate<QuotaState>> {
  return aggregates.load(quotaDecider, streams.quota(workspaceId, accountId, day));
}
