import type { DomainEvent, KeyScope } from '../../src/events/catalogue/index.ts';
import { AlreadyExistsError, KeyNotFoundError } from '../errors.ts';
import { streams } from '../../src/event-store/subjects.ts';
import { unknownCommand, type Decider } from '../shared/decider.ts';
import { newEvent, type CommandMeta } from '../shared/new-event.ts';

export interface KeyState {
  readonly exists: boolean;
  readonly scope: KeyScope | null;
  readonly revoked: boolean;
}

const keyFold = {
  stateVersion: 1,
  initialState: (): KeyState => ({ exists: false, scope: null, revoked: false }),
  evolve(state: KeyState, event: DomainEvent): KeyState {
    switch (event.type) {
      case 'ApiKeyIssued':
        return { exists: true, scope: event.data.scope, revoked: false };
      case 'ApiKeyRevoked':
        return { ...state, revoked: true };
      default:
        return state;
    }
  },
};

export interface IssueKey {
  readonly type: 'IssueKey';
  readonly workspaceId: string;
  readonly keyId: string;
  readonly name: string;
  readonly scope: KeyScope;
  readonly secretHash: string;
  readonly meta: CommandMeta;
}

export function decideIssueKey(command: IssueKey, state: KeyState) {
  if (state.exists) throw new AlreadyExistsError('API key', command.keyId);
  return [
    newEvent(
      'ApiKeyIssued',
      { name: command.name, scope: command.scope, secret_hash: command.secretHash },
      streams.key(command.workspaceId, command.keyId),
      command.meta,
    ),
  ];
}

export interface RevokeKey {
  readonly type: 'RevokeKey';
  readonly workspaceId: string;
  readonly keyId: string;
  readonly meta: CommandMeta;
}

/** Revoking twice is not an error: the key is revoked either way, and nothing is appended. */
export function decideRevokeKey(command: RevokeKey, state: KeyState) {
  if (!state.exists) throw new KeyNotFoundError(command.keyId);
  if (state.revoked) return [];
  return [
    newEvent(
      'ApiKeyRevoked',
      {},
      streams.key(command.workspaceId, command.keyId),
      command.meta,
    ),
  ];
}

export type KeyCommand = IssueKey | RevokeKey;

/** An API key: issued once, revoked at most once. */
export const keyDecider: Decider<KeyCommand, KeyState> = {
  name: 'key',
  ...keyFold,
  decide(command, state) {
    switch (command.type) {
      case 'IssueKey':
        return decideIssueKey(command, state);
      case 'RevokeKey':
        return decideRevokeKey(command, state);
      default:
        return unknownCommand(command);
    }
  },
  streamOf: (command) => streams.key(command.workspaceId, command.keyId),
};
