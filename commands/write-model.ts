import type { DomainEvent } from '../src/events/catalogue/index.ts';
import { AggregateRepository } from '../src/event-store/aggregate-repository.ts';
import type { EventStore, StoredEvent } from '../src/event-store/event-store.ts';
import type { SnapshotStore } from '../src/event-store/snapshot-store.ts';
import type { Subjects } from '../src/event-store/subjects.ts';
import { accountFolder, type AccountState } from './account/account-state.ts';
import { decideCreateAccount, type CreateAccount } from './account/create-account.ts';
import { decideRecordPlatformChanges, type RecordPlatformChanges } from './account/record-platform-changes.ts';
import {
  decideCancelRun,
  decideClaimRun,
  decideFinishRun,
  decideStartRun,
  type CancelRun,
  type ClaimRun,
  type FinishRun,
  type StartRun,
} from './account/run-lifecycle.ts';
import { decideIssueKey, decideRevokeKey, keyFolder, type IssueKey, type KeyState, type RevokeKey } from './key/key-decider.ts';
import { actionFolder, type ActionState } from './action/action-state.ts';
import { decideProposeAction, type ProposeAction } from './action/propose-action.ts';
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
} from './action/action-lifecycle.ts';
import {
  decideReserveAutoApplySlot,
  quotaAggregateId,
  quotaFolder,
  type QuotaState,
  type ReserveAutoApplySlot,
} from './quota/auto-apply-quota.ts';
import { decideRecordToolCall, transcriptFolder, type RecordToolCall, type TranscriptState } from './run/transcript.ts';
import { handleCommand, type CommandResult, type Decide } from './shared/command-handler.ts';
import {
  decideCreateWorkspace,
  decideSetDistinctApprover,
  decideSetKillSwitch,
  workspaceFolder,
  type CreateWorkspace,
  type SetDistinctApprover,
  type SetKillSwitch,
  type WorkspaceState,
} from './workspace/workspace-decider.ts';

/**
 * Every way state can change, in one place: each method loads one aggregate, decides,
 * and appends with optimistic concurrency. Callers (HTTP routes, workers, the CLI) never
 * append events themselves.
 */
export class WriteModel {
  readonly workspaces: AggregateRepository<WorkspaceState, DomainEvent>;
  readonly keys: AggregateRepository<KeyState, DomainEvent>;
  readonly accounts: AggregateRepository<AccountState, DomainEvent>;
  readonly transcripts: AggregateRepository<TranscriptState, DomainEvent>;
  readonly actions: AggregateRepository<ActionState, DomainEvent>;
  readonly quotas: AggregateRepository<QuotaState, DomainEvent>;

  constructor(
    readonly store: EventStore,
    readonly subjects: Subjects,
    snapshots: SnapshotStore | null,
  ) {
    this.workspaces = new AggregateRepository(store, snapshots, workspaceFolder);
    this.keys = new AggregateRepository(store, snapshots, keyFolder);
    this.accounts = new AggregateRepository(store, snapshots, accountFolder);
    this.transcripts = new AggregateRepository(store, snapshots, transcriptFolder);
    this.actions = new AggregateRepository(store, snapshots, actionFolder);
    this.quotas = new AggregateRepository(store, snapshots, quotaFolder);
  }

  workspaceSubject(workspaceId: string): string {
    return this.subjects.forAggregate({ workspaceId, accountId: null, aggregate: { type: 'workspace', id: workspaceId } });
  }

  keySubject(workspaceId: string, keyId: string): string {
    return this.subjects.forAggregate({ workspaceId, accountId: null, aggregate: { type: 'key', id: keyId } });
  }

  accountSubject(workspaceId: string, accountId: string): string {
    return this.subjects.forAggregate({ workspaceId, accountId, aggregate: { type: 'account', id: accountId } });
  }

  runSubject(workspaceId: string, accountId: string, runId: string): string {
    return this.subjects.forAggregate({ workspaceId, accountId, aggregate: { type: 'run', id: runId } });
  }

  actionSubject(workspaceId: string, accountId: string, actionId: string): string {
    return this.subjects.forAggregate({ workspaceId, accountId, aggregate: { type: 'action', id: actionId } });
  }

  quotaSubject(workspaceId: string, accountId: string, day: string): string {
    return this.subjects.forAggregate({ workspaceId, accountId, aggregate: { type: 'quota', id: quotaAggregateId(accountId, day) } });
  }

  createWorkspace(command: CreateWorkspace): Promise<CommandResult<WorkspaceState>> {
    return handleCommand(this.store, this.workspaces, this.workspaceSubject(command.workspaceId), command, decideCreateWorkspace, workspaceFolder.evolve);
  }

  issueKey(command: IssueKey): Promise<CommandResult<KeyState>> {
    return handleCommand(this.store, this.keys, this.keySubject(command.workspaceId, command.keyId), command, decideIssueKey, keyFolder.evolve);
  }

  revokeKey(command: RevokeKey): Promise<CommandResult<KeyState>> {
    return handleCommand(this.store, this.keys, this.keySubject(command.workspaceId, command.keyId), command, decideRevokeKey, keyFolder.evolve);
  }

  createAccount(command: CreateAccount): Promise<CommandResult<AccountState>> {
    return this.onAccount(command, decideCreateAccount);
  }

  startRun(command: StartRun): Promise<CommandResult<AccountState>> {
    return this.onAccount(command, decideStartRun);
  }

  cancelRun(command: CancelRun): Promise<CommandResult<AccountState>> {
    return this.onAccount(command, decideCancelRun);
  }

  claimRun(command: ClaimRun): Promise<CommandResult<AccountState>> {
    return this.onAccount(command, decideClaimRun);
  }

  finishRun(command: FinishRun): Promise<CommandResult<AccountState>> {
    return this.onAccount(command, decideFinishRun);
  }

  recordPlatformChanges(command: RecordPlatformChanges): Promise<CommandResult<AccountState>> {
    return this.onAccount(command, decideRecordPlatformChanges);
  }

  recordToolCall(command: RecordToolCall): Promise<CommandResult<TranscriptState>> {
    const subject = this.runSubject(command.workspaceId, command.accountId, command.call.run_id);
    return handleCommand(this.store, this.transcripts, subject, command, decideRecordToolCall, transcriptFolder.evolve);
  }

  proposeAction(command: ProposeAction): Promise<CommandResult<ActionState>> {
    const subject = this.actionSubject(command.workspaceId, command.accountId, command.proposal.action_id);
    return handleCommand(this.store, this.actions, subject, command, decideProposeAction, actionFolder.evolve);
  }

  setKillSwitch(command: SetKillSwitch): Promise<CommandResult<WorkspaceState>> {
    return handleCommand(this.store, this.workspaces, this.workspaceSubject(command.workspaceId), command, decideSetKillSwitch, workspaceFolder.evolve);
  }

  setDistinctApprover(command: SetDistinctApprover): Promise<CommandResult<WorkspaceState>> {
    return handleCommand(this.store, this.workspaces, this.workspaceSubject(command.workspaceId), command, decideSetDistinctApprover, workspaceFolder.evolve);
  }

  reserveAutoApplySlot(command: ReserveAutoApplySlot): Promise<CommandResult<QuotaState>> {
    const subject = this.quotaSubject(command.workspaceId, command.accountId, command.day);
    // Many proposals race for the same day's slots: allow more attempts than usual.
    return handleCommand(this.store, this.quotas, subject, command, decideReserveAutoApplySlot, quotaFolder.evolve, { maxAttempts: 200 });
  }

  /** Reads the workspace's approval rules (distinct approver) and decides on the action. */
  async approveAction(command: ApproveAction): Promise<CommandResult<ActionState>> {
    const workspace = await this.workspaces.load(this.workspaceSubject(command.workspaceId));
    return this.onAction({ ...command, requireDistinctApprover: workspace.state.requireDistinctApprover }, decideApproveAction);
  }

  rejectAction(command: RejectAction): Promise<CommandResult<ActionState>> {
    return this.onAction(command, decideRejectAction);
  }

  startApply(command: StartApply): Promise<CommandResult<ActionState>> {
    return this.onAction(command, decideStartApply);
  }

  heartbeatApply(command: HeartbeatApply): Promise<CommandResult<ActionState>> {
    return this.onAction(command, decideHeartbeatApply);
  }

  finishApply(command: FinishApply): Promise<CommandResult<ActionState>> {
    return this.onAction(command, decideFinishApply);
  }

  private onAction<C extends { workspaceId: string; accountId: string; actionId: string }>(
    command: C,
    decide: Decide<C, ActionState>,
  ): Promise<CommandResult<ActionState>> {
    const subject = this.actionSubject(command.workspaceId, command.accountId, command.actionId);
    return handleCommand(this.store, this.actions, subject, command, decide, actionFolder.evolve);
  }

  private onAccount<C extends { workspaceId: string; accountId: string }>(
    command: C,
    decide: Decide<C, AccountState>,
  ): Promise<CommandResult<AccountState>> {
    return handleCommand(this.store, this.accounts, this.accountSubject(command.workspaceId, command.accountId), command, decide, accountFolder.evolve);
  }
}

export function lastSeqOf(result: { appended: readonly Pick<StoredEvent, 'seq'>[] }): number | null {
  const last = result.appended[result.appended.length - 1];
  return last ? last.seq : null;
}
