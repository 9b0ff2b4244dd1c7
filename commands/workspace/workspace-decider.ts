import type { DomainEvent } from '../../src/events/catalogue/index.ts';
import { AlreadyExistsError, WorkspaceNotFoundError } from '../errors.ts';
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
}

export const workspaceFolder = {
  stateVersion: 3,
  initialState: (): WorkspaceState => ({ exists: false, name: '', killSwitch: { engaged: false, reason: '', since: null }, requireDistinctApprover: false }),
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
      default:
        return state;
    }
  },
};

export interface CreateWorkspace {
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
      { workspaceId: command.workspaceId, accountId: null, aggregate: { type: 'workspace', id: command.workspaceId } },
      command.meta,
    ),
  ];
}

export interface SetKillSwitch {
  readonly workspaceId: string;
  readonly engaged: boolean;
  readonly reason: string;
  readonly meta: CommandMeta;
}

/** Engaging an engaged switch (or releasing a released one) appends nothing. */
export function decideSetKillSwitch(command: SetKillSwitch, state: WorkspaceState) {
  if (!state.exists) throw new WorkspaceNotFoundError(command.workspaceId);
  if (state.killSwitch.engaged === command.engaged) return [];
  const address = { workspaceId: command.workspaceId, accountId: null, aggregate: { type: 'workspace' as const, id: command.workspaceId } };
  return command.engaged
    ? [newEvent('KillSwitchEngaged', { reason: command.reason }, address, command.meta)]
    : [newEvent('KillSwitchReleased', { reason: command.reason }, address, command.meta)];
}

export interface SetDistinctApprover {
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
      { workspaceId: command.workspaceId, accountId: null, aggregate: { type: 'workspace', id: command.workspaceId } },
      command.meta,
    ),
  ];
}
