import { ProblemError } from '../../src/errors/problem-error.ts';
import type { EventEnvelope, UnsealedEvent } from '../../src/events/envelope.ts';
import type { AggregateRepository, LoadedAggregate } from '../../src/event-store/aggregate-repository.ts';
import { AppendConflictError } from '../../src/event-store/errors.ts';
import type { EventStore, StoredEvent } from '../../src/event-store/event-store.ts';

/** A decision: the events to append given the current state. Throws a ProblemError to refuse. */
export type Decide<C, S> = (command: C, state: S) => readonly UnsealedEvent[];

export interface CommandResult<S> {
  readonly appended: readonly StoredEvent[];
  /** State after the appended events. */
  readonly state: S;
  readonly position: LoadedAggregate<S>;
}

export interface HandleOptions {
  /** Attempts before a conflict is given up; each reloads state and decides again. */
  readonly maxAttempts?: number;
}

/** Every attempt lost a race on a hot aggregate: a 503 the client can retry. */
export class CommandContentionError extends ProblemError {
  constructor(readonly subject: string, readonly attempts: number, options?: { cause?: unknown }) {
    super(
      {
        type: 'service-unavailable',
        status: 503,
        title: 'Service temporarily unavailable',
        detail: `Too many concurrent changes to the same resource (${attempts} attempts); retry shortly.`,
        headers: { 'Retry-After': '1' },
      },
      options,
    );
  }
}

/**
 * Decider-style command handling (`decide(command, state) -> events`,
 * `evolve(state, event) -> state`) with optimistic concurrency: load, decide, append with
 * the expected subject sequence; on a conflict reload and decide again, up to a bound.
 * A decision that returns no events appends nothing and succeeds.
 *
 * @example
 * ```ts
 * const { appended } = await handleCommand(store, accounts, subject, command, decideStartRun, evolveAccount);
 * ```
 */
export async function handleCommand<C, S, E extends EventEnvelope>(
  store: EventStore,
  repository: AggregateRepository<S, E>,
  subject: string,
  command: C,
  decide: Decide<C, S>,
  evolve: (state: S, event: E) => S,
  options: HandleOptions = {},
): Promise<CommandResult<S>> {
  const maxAttempts = options.maxAttempts ?? 12;
  let lastConflict: AppendConflictError | undefined;
  for (let attempt = 1; attempt <= maxAttempts; attempt++) {
    const loaded = await repository.load(subject);
    const events = decide(command, loaded.state);
    if (events.length === 0) return { appended: [], state: loaded.state, position: loaded };
    try {
      const appended = await store.append(subject, events, loaded);
      const state = appended.reduce((s, stored) => evolve(s, stored.event as E), loaded.state);
      const last = appended[appended.length - 1]!;
      const position = { lastSequence: last.seq, lastHash: last.event.hash, state };
      repository.remember(subject, position, appended.length);
      return { appended, state, position };
    } catch (error) {
      if (!(error instanceof AppendConflictError)) throw error;
      lastConflict = error;
      // Jittered backoff spreads out writers that keep colliding on one hot aggregate.
      await new Promise((resolve) => setTimeout(resolve, Math.random() * Math.min(50, 2 ** attempt)));
    }
  }
  throw new CommandContentionError(subject, maxAttempts, { cause: lastConflict });
}
