import type { KeyScope, RunErrorCode, RunUsage, AgentIdentity } from '../../src/events/catalogue/index.ts';
import { AccountNotFoundError, RunInProgressError, RunNotCancelableError } from '../errors.ts';
import { newEvent, type CommandMeta, type EventAddress } from '../shared/new-event.ts';
import type { AccountState } from './account-state.ts';

/**
 * The run lifecycle is decided on the account's aggregate: RunQueued, RunStarted,
 * RunCanceled, RunSucceeded and RunFailed all append to the account's subject with its
 * expected sequence, which makes "one active run per account" and "started or canceled,
 * never both" exact under any concurrency.
 */
function accountAddress(workspaceId: string, accountId: string): EventAddress {
  return { workspaceId, accountId, aggregate: { type: 'account', id: accountId } };
}

export interface StartRun {
  readonly type: 'StartRun';
  readonly workspaceId: string;
  readonly accountId: string;
  readonly runId: string;
  readonly brief: string;
  readonly autoApply: boolean;
  readonly keyId: string;
  readonly scope: KeyScope;
  readonly meta: CommandMeta;
}

/** Queues a run. Re-deciding for a run that is already the active one appends nothing (a retried request). */
export function decideStartRun(command: StartRun, state: AccountState) {
  if (!state.exists || state.workspaceId !== command.workspaceId) throw new AccountNotFoundError(command.accountId);
  const active = state.activeRun;
  // Queued already (and maybe over since): a retry of the request that queued it, not a second run.
  if (active?.runId === command.runId || state.recentRunIds.includes(command.runId)) return [];
  if (active) throw new RunInProgressError(command.accountId, active.runId, active.status);
  return [
    newEvent(
      'RunQueued',
      { run_id: command.runId, brief: command.brief, auto_apply: command.autoApply, key_id: command.keyId, scope: command.scope },
      accountAddress(command.workspaceId, command.accountId),
      command.meta,
    ),
  ];
}

export interface CancelRun {
  readonly type: 'CancelRun';
  readonly workspaceId: string;
  readonly accountId: string;
  readonly runId: string;
  /** Status the read model showed; only used to word the refusal of a run that is not active. */
  readonly knownStatus: string;
  readonly meta: CommandMeta;
}

export function decideCancelRun(command: CancelRun, state: AccountState) {
  const active = state.activeRun;
  if (active?.runId !== command.runId) {
    // Not the active run: it has ended (the read model knew of it, so it exists).
    const status = command.knownStatus === 'queued' || command.knownStatus === 'running' ? 'finished' : command.knownStatus;
    throw new RunNotCancelableError(command.runId, status);
  }
  if (active.status === 'running') throw new RunNotCancelableError(command.runId, 'running');
  return [newEvent('RunCanceled', { run_id: command.runId }, accountAddress(command.workspaceId, command.accountId), command.meta)];
}

/** Why a worker could not claim a run; the worker acknowledges the message and moves on. */
export class RunNotClaimableError extends Error {
  readonly runId: string;
  readonly reason: 'not_queued';

  constructor(runId: string, reason: 'not_queued') {
    super(`run ${runId} is no longer queued`);
    this.runId = runId;
    this.reason = reason;
    this.name = 'RunNotClaimableError';
  }
}

export interface ClaimRun {
  readonly type: 'ClaimRun';
  readonly workspaceId: string;
  readonly accountId: string;
  readonly runId: string;
  readonly workerId: string;
  readonly agent: AgentIdentity;
  readonly meta: CommandMeta;
}

/**
 * Starts a queued run for one worker. Re-deciding for the worker that already holds the run
 * appends nothing: its claim was stored though the worker never heard so (the append's
 * acknowledgement was lost in a failover and the command was decided again on a reload), and
 * the worker must go on to run it rather than drop a run that nobody else may take.
 */
export function decideClaimRun(command: ClaimRun, state: AccountState) {
  const active = state.activeRun;
  if (active?.runId === command.runId && active.status === 'running' && active.workerId === command.workerId) return [];
  if (active?.runId !== command.runId || active.status !== 'queued') throw new RunNotClaimableError(command.runId, 'not_queued');
  return [
    newEvent(
      'RunStarted',
      { run_id: command.runId, worker_id: command.workerId, agent: command.agent },
      accountAddress(command.workspaceId, command.accountId),
      command.meta,
    ),
  ];
}

export type RunOutcome =
  | { readonly kind: 'succeeded'; readonly text: string; readonly truncated: boolean; readonly usage: RunUsage; readonly durationMs: number }
  | {
      readonly kind: 'failed';
      readonly code: RunErrorCode;
      readonly message: string;
      readonly text: string;
      readonly truncated: boolean;
      readonly usage: RunUsage;
      readonly durationMs: number | null;
    };

export interface FinishRun {
  readonly type: 'FinishRun';
  readonly workspaceId: string;
  readonly accountId: string;
  readonly runId: string;
  readonly outcome: RunOutcome;
  /** Worker that must own the run; null lets a run fail straight from queued (key revoked, account not connected). */
  readonly workerId: string | null;
  readonly meta: CommandMeta;
}

/** Ends the active run. A run that already ended is left as it is (a redelivered finish). */
export function decideFinishRun(command: FinishRun, state: AccountState) {
  const active = state.activeRun;
  if (active?.runId !== command.runId) return [];
  if (command.workerId !== null && active.workerId !== command.workerId) return [];
  const address = accountAddress(command.workspaceId, command.accountId);
  const { outcome } = command;
  if (outcome.kind === 'succeeded') {
    return [
      newEvent(
        'RunSucceeded',
        { run_id: command.runId, text: outcome.text, truncated: outcome.truncated, usage: outcome.usage, duration_ms: outcome.durationMs },
        address,
        command.meta,
      ),
    ];
  }
  return [
    newEvent(
      'RunFailed',
      {
        run_id: command.runId,
        error: { code: outcome.code, message: outcome.message },
        text: outcome.text,
        truncated: outcome.truncated,
        usage: outcome.usage,
        duration_ms: outcome.durationMs,
      },
      address,
      command.meta,
    ),
  ];
}
