import type { DomainEvent } from '../../src/events/catalogue/index.ts';
import { AlreadyExistsError, PauseInThePastError, WorkspaceNotFoundError } from '../errors.ts';
import { streams } from '../../src/event-store/subjects.ts';
import { unknownCommand, type Decider } from '../shared/decider.ts';
import { newEvent, type CommandMeta } from '../shared/new-event.ts';

export interface KillSwitch {
  readonly engaged: boolean;
  readonly reason: string;
  readonly since: string | null;
}

export interface WorkspaceState {
  readonly exists: boolean;
  readonly name: string;
  readonly killSwitch: KillSwitch;
  /** The key that proposed an action (or started its run) cannot approve it. */
  readonly requireDistinctApprover: boolean;
  /** No agent worker starts a queued run of the workspace before this time (ISO 8601); null: not paused. */
  readonly runStartsPausedUntil: string | null;
}

const workspaceFold = {
  stateVersion: 4,
  initialState: (): WorkspaceState => ({
    exists: false,
    name: '',
    killSwitch: { engaged: false, reason: '', since: null },
    requireDistinctApprover: false,
    runStartsPausedUntil: null,
  }),
  evolve(state: WorkspaceState, event: DomainEvent): WorkspaceState {
    switch (event.type) {
      case 'WorkspaceCreated':
        return { ...state, exists: true, name: event.data.name };
      case 'KillSwitchEngaged':
        return { ...state, killSwitch: { engaged: true, reason: event.data.reason, since: event.time } };
      case 'KillSwitchReleased':
        return { ...state, killSwitch: { engaged: false, reason: event.data.reason, since: event.time } };
      case 'DistinctApproverRequirementSet':
        return { ...state, requireDistinctApprover: event.data.required };
      case 'RunStartsPaused':
        return { ...state, runStartsPausedUntil: event.data.until };
      case 'RunStartsResumed':
        return { ...state, runStartsPausedUntil: null };
      default:
        return state;
    }
  },
};

export interface CreateWorkspace {
  readonly type: 'CreateWorkspace';
  readonly workspaceId: string;
  readonly name: string;
  readonly meta: CommandMeta;
}

export function decideCreateWorkspace(command: CreateWorkspace, state: WorkspaceState) {
  if (state.exists) throw new AlreadyExistsError('Workspace', command.workspaceId);
  return [
    newEvent(
      'WorkspaceCreated',
      { name: command.name },
      streams.workspace(command.workspaceId),
      command.meta,
    ),
  ];
}

export interface SetKillSwitch {
  readonly type: 'SetKillSwitch';
  readonly workspaceId: string;
  readonly engaged: boolean;
  readonly reason: string;
  readonly meta: CommandMeta;
}

/** Engaging an engaged switch (or releasing a released one) appends nothing. */
export function decideSetKillSwitch(command: SetKillSwitch, state: WorkspaceState) {
  if (!state.exists) throw new WorkspaceNotFoundError(command.workspaceId);
  if (state.killSwitch.engaged === command.engaged) return [];
  const address = streams.workspace(command.workspaceId);
  return command.engaged
    ? [newEvent('KillSwitchEngaged', { reason: command.reason }, address, command.meta)]
    : [newEvent('KillSwitchReleased', { reason: command.reason }, address, command.meta)];
}

export interface SetDistinctApprover {
  readonly type: 'SetDistinctApprover';
  readonly workspaceId: string;
  readonly required: boolean;
  readonly meta: CommandMeta;
}

/** Turns the distinct-approver rule on or off; setting it to what it is appends nothing. */
export function decideSetDistinctApprover(command: SetDistinctApprover, state: WorkspaceState) {
  if (!state.exists) throw new WorkspaceNotFoundError(command.workspaceId);
  if (state.requireDistinctApprover === command.required) return [];
  return [
    newEvent(
      'DistinctApproverRequirementSet',
      { required: command.required },
      streams.workspace(command.workspaceId),
      command.meta,
    ),
  ];
}

export interface PauseRunStarts {
  readonly type: 'PauseRunStarts';
  readonly workspaceId: string;
  /** ISO 8601; must be in the future of `now`. */
  readonly until: string;
  readonly reason: string;
  readonly now: string;
  readonly meta: CommandMeta;
}

export interface ResumeRunStarts {
  readonly type: 'ResumeRunStarts';
  readonly workspaceId: string;
  readonly reason: string;
  readonly meta: CommandMeta;
}

/** Pausing again moves the end of the pause; a time that has passed is refused. */
export function decidePauseRunStarts(command: PauseRunStarts, state: WorkspaceState) {
  if (!state.exists) throw new WorkspaceNotFoundError(command.workspaceId);
  if (!(Date.parse(command.until) > Date.parse(command.now))) throw new PauseInThePastError(command.until);
  if (state.runStartsPausedUntil === command.until) return [];
  const address = streams.workspace(command.workspaceId);
  return [newEvent('RunStartsPaused', { until: command.until, reason: command.reason }, address, command.meta)];
}

/** Resuming a workspace that is not paused appends nothing. */
export function decideResumeRunStarts(command: ResumeRunStarts, state: WorkspaceState) {
  if (!state.exists) throw new WorkspaceNotFoundError(command.workspaceId);
  if (state.runStartsPausedUntil === null) return [];
  const address = streams.workspace(command.workspaceId);
  return [newEvent('RunStartsResumed', { reason: command.reason }, address, command.meta)];
}

/** Milliseconds until the workspace's runs may start, or 0 when they may start now. */
export function runStartsPausedForMs(state: Pick<WorkspaceState, 'runStartsPausedUntil'>, now: number): number {
  if (state.runStartsPausedUntil === null) return 0;
  return Math.max(0, Date.parse(state.runStartsPausedUntil) - now);
}

export type WorkspaceCommand = CreateWorkspace | SetKillSwitch | SetDistinctApprover | PauseRunStarts | ResumeRunStarts;

/**
 * The workspace aggregate: its existence, the kill switch and the approval rules.
 *
 * @example
 * ```ts
 * await commands.handle(workspaceDecider, { type: 'SetKillSwitch', workspaceId, engaged: true, reason, meta });
 * ```
 */
export const workspaceDecider: Decider<WorkspaceCommand, WorkspaceState> = {
  name: 'workspace',
  ...workspaceFold,
  decide(command, state) {
    switch (command.type) {
      case 'CreateWorkspace':
        return decideCreateWorkspace(command, state);
      case 'SetKillSwitch':
        return decideSetKillSwitch(command, state);
      case 'SetDistinctApprover':
        return decideSetDistinctApprover(command, state);
      case 'PauseRunStarts':
        return decidePauseRunStarts(command, state);
      case 'ResumeRunStarts':
        return decideResumeRunStarts(command, state);
      default:
        return unknownCommand(command);
    }
  },
  streamOf: (command) => streams.workspace(command.workspaceId),
};
