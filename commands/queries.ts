import type { LoadedAggregate } from '../src/event-store/aggregate-repository.ts';
import { streams, type SubjectAddress } from '../src/event-store/subjects.ts';
import { accountDecider } from './account/account-decider.ts';
import type { AccountState } from './account/account-state.ts';
import { actionDecider } from './action/action-decider.ts';
import type { ActionState } from './action/action-state.ts';
import { keyDecider, type KeyState } from './key/key-decider.ts';
import { quotaDecider, type QuotaState } from './quota/auto-apply-quota.ts';
import type { Aggregates } from './shared/aggregates.ts';
import { behindLeader, MAX_STALE_RELOADS, STALE_RELOAD_DELAY_MS } from './shared/handle.ts';
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

/**
 * The workspace as the stream's leader has it: read again while the read came from a replica
 * behind it (direct gets on an R3 stream may be answered by any replica). For the kill switch
 * right before a change goes live or takes an auto-apply slot: an engage acknowledged a moment
 * ago must not be missed there. One request to the leader more than {@link loadWorkspace}.
 */
export function loadWorkspaceFromLeader(aggregates: Aggregates, workspaceId: string): Promise<LoadedAggregate<WorkspaceState>> {
  return loadFromLeader(aggregates, streams.workspace(workspaceId), () => loadWorkspace(aggregates, workspaceId));
}

/**
 * `load()` again while what it read does not `settle` and the read came from a replica behind
 * the stream's leader (direct gets on an R3 stream may be answered by any replica), at most
 * MAX_STALE_RELOADS times: the state the leader has, for a decision taken outside `handle()`
 * (which confirms its own). Without `settle`, any read behind the leader is read again.
 *
 * @example
 * const account = await loadFromLeader(aggregates, streams.account(ws, acc), () => loadAccount(aggregates, ws, acc),
 *   (state) => state.activeRun?.runId === runId);
 */
export async function loadFromLeader<S>(
  aggregates: Aggregates,
  stream: SubjectAddress,
  load: () => Promise<LoadedAggregate<S>>,
  settle: (state: S) => boolean = () => false,
): Promise<LoadedAggregate<S>> {
  const subject = aggregates.subjectOf(stream);
  for (let reloads = 0; ; reloads++) {
    const loaded = await load();
    if (settle(loaded.state) || reloads >= MAX_STALE_RELOADS || !(await behindLeader(aggregates, subject, loaded.lastSequence))) return loaded;
    await new Promise((resolve) => setTimeout(resolve, STALE_RELOAD_DELAY_MS));
  }
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
