import type { DomainEvent } from '../../src/events/catalogue/index.ts';
import { AlreadyExistsError } from '../errors.ts';
import { newEvent, type CommandMeta } from '../shared/new-event.ts';

export interface WorkspaceState {
  readonly exists: boolean;
  readonly name: string;
}

export const workspaceFolder = {
  stateVersion: 1,
  initialState: (): WorkspaceState => ({ exists: false, name: '' }),
  evolve(state: WorkspaceState, event: DomainEvent): WorkspaceState {
    return event.type === 'WorkspaceCreated' ? { exists: true, name: event.data.name } : state;
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
