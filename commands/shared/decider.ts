import type { UnsealedEvent } from '../../src/events/envelope.ts';
import type { DomainEvent } from '../../src/events/catalogue/index.ts';
import type { SubjectAddress } from '../../src/event-store/subjects.ts';

/** Every command names itself: `decide` switches on it, exhaustively. */
export interface Command<T extends string = string> {
  readonly type: T;
}

/**
 * One aggregate's decision logic (after Emmett's Decider): a pure `decide(command, state)`
 * that returns the events to append or throws to refuse, a pure `evolve(state, event)`
 * that folds them, the state before the first event, and `streamOf`, which names the
 * aggregate (its subject) a command is decided on. `handle` (handle.ts) does the I/O.
 *
 * @example
 * ```ts
 * await commands.handle(keyDecider, { type: 'RevokeKey', workspaceId, keyId, meta });
 * ```
 */
export interface Decider<C extends Command, S, E extends DomainEvent = DomainEvent> {
  /** For logs and errors. */
  readonly name: string;
  /** Bump when the state's shape changes: older snapshots are then refolded. */
  readonly stateVersion: number;
  initialState(): S;
  evolve(state: S, event: E): S;
  decide(command: C, state: S): readonly UnsealedEvent[];
  streamOf(command: C): SubjectAddress;
  /** Attempts before a lost race is given up (default 12): hot aggregates allow more. */
  readonly maxAttempts?: number;
  /**
   * Commands first decided on the state this process remembers, without the read of the
   * subject's newest event (`preferRemembered` in handle.ts): for a hot path where this process
   * is usually the one that last wrote the subject. Safe for any command, since the append's
   * expected sequence proves the state current and a refusal is always decided again on a
   * fresh load; it only costs a wasted append where another process wrote since.
   */
  readonly decideOnRemembered?: (command: C) => boolean;
}

/** The state type of a decider. */
export type StateOf<D> = D extends Decider<Command, infer S> ? S : never;
/** The command union of a decider. */
export type CommandOf<D> = D extends Decider<infer C, unknown> ? C : never;

/**
 * Compile-time exhaustiveness: a `switch` on `command.type` whose default reaches here
 * missed a case. Pass the command (or, for a one-command union, which TypeScript does not
 * narrow to never, its `type`).
 */
export function unknownCommand(command: never): never {
  const type = typeof command === 'object' && command !== null ? (command as { type?: unknown }).type : command;
  throw new TypeError(`no decision for command ${JSON.stringify(type)}`);
}
