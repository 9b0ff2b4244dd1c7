import { AppError, ErrorKind } from '../../src/errors/app-error.ts';
import type { LoadedAggregate } from '../../src/event-store/aggregate-repository.ts';
import { AppendConflictError, EventStoreError, EventStoreErrorCode } from '../../src/event-store/errors.ts';
import { rideThroughOutage } from './outage.ts';
import { EMPTY_POSITION, type StoredEvent } from '../../src/event-store/event-store.ts';
import type { DomainEvent } from '../../src/events/catalogue/index.ts';
import type { UnsealedEvent } from '../../src/events/envelope.ts';
import type { Aggregates } from './aggregates.ts';
import type { Command, Decider } from './decider.ts';

export interface CommandResult<S> {
  readonly appended: readonly StoredEvent[];
  /** State after the appended events. */
  readonly state: S;
  readonly position: LoadedAggregate<S>;
}

export interface HandleOptions {
  /** Attempts before a conflict is given up; each reloads state and decides again (default: the decider's, else 12). */
  readonly maxAttempts?: number;
  /**
   * Decide first on the state this process remembers for the subject, without the round trip
   * (default: the decider's `decideOnRemembered` for the command)
   * that asks the store for its newest event: for a writer that is usually the subject's only
   * one (a worker recording its run's tool calls). The append's expected sequence proves the
   * state was current; when it was not (a conflict), or the remembered state refuses or decides
   * nothing, the command is handled as usual from a fresh load, so no outcome ever rests on a
   * stale state.
   */
  readonly preferRemembered?: boolean;
  /**
   * With `preferRemembered`, when this process remembers nothing for the subject: decide on the
   * decider's initial state at the subject's start, for an aggregate the caller knows to be new (a
   * run's transcript, begun by the worker that claimed the run). The append, which expects an empty
   * subject, proves it; on a subject that is not empty it conflicts and the command is handled from
   * a fresh load, as above.
   */
  readonly presumeNew?: boolean;
  /**
   * How long to wait out an unreachable event log before failing (default: the aggregates'
   * policy — fail at once for the API's, {@link OUTAGE_RIDE_THROUGH_MS} for background work).
   */
  readonly outageRideThroughMs?: number;
}

const DEFAULT_MAX_ATTEMPTS = 12;
/** Reloads of state found behind the stream leader before a refusal; a replica catches up in milliseconds. */
export const MAX_STALE_RELOADS = 5;
export const STALE_RELOAD_DELAY_MS = 20;

/** Whether the leader has an event of `subject` after `lastSequence` (false when it cannot say). */
export async function behindLeader(aggregates: Aggregates, subject: string, lastSequence: number): Promise<boolean> {
  try {
    return (await aggregates.store.leaderLastSequenceOf(subject)) > lastSequence;
  } catch {
    return false; // the refusal stands as decided (an outage is reported by the next request)
  }
}

export { OUTAGE_RIDE_THROUGH_MS } from './outage.ts';

/** Every attempt lost a race on a hot aggregate: the caller can retry in a second. */
export class CommandContentionError extends AppError {
  readonly kind = ErrorKind.Contention;
  readonly subject: string;
  readonly attempts: number;

  constructor(subject: string, attempts: number, options?: { cause?: unknown }) {
    super('service-unavailable', `Too many concurrent changes to the same resource (${attempts} attempts); retry shortly.`, {
      retryAfterSeconds: 1,
      cause: options?.cause,
    });
    this.subject = subject;
    this.attempts = attempts;
  }
}

/**
 * Handles one command on its aggregate with optimistic concurrency: load the state of
 * `decider.streamOf(command)`, decide, append with the expected subject sequence; on a
 * conflict reload and decide again (jittered backoff), up to a bound, then
 * CommandContentionError. A decision that returns no events appends nothing and succeeds.
 * Refusals are whatever `decide` throws. Both are decided again on a reload while the state
 * was read from a replica behind the stream's leader.
 *
 * @example
 * ```ts
 * const { appended, state } = await handle(aggregates, accountDecider, { type: 'CancelRun', ...ids, knownStatus, meta });
 * ```
 */
export async function handle<C extends Command, S>(
  aggregates: Aggregates,
  decider: Decider<C, S>,
  command: C,
  options: HandleOptions = {},
): Promise<CommandResult<S>> {
  const maxAttempts = options.maxAttempts ?? decider.maxAttempts ?? DEFAULT_MAX_ATTEMPTS;
  const subject = aggregates.subjectOf(decider.streamOf(command));
  const repository = aggregates.repositoryOf(decider);
  if (options.preferRemembered ?? decider.decideOnRemembered?.(command) ?? false) {
    const remembered = repository.remembered(subject) ?? (options.presumeNew ? { ...EMPTY_POSITION, state: decider.initialState() } : null);
    const fast = remembered && (await appendOnRemembered(aggregates, decider, command, subject, remembered));
    if (fast) {
      repository.remember(subject, fast.position, fast.appended.length);
      return fast;
    }
  }
  let lastConflict: AppendConflictError | undefined;
  let outageSince: number | undefined;
  let staleReloads = 0;
  const rideThroughMs = options.outageRideThroughMs ?? aggregates.outageRideThroughMs;
  for (let attempt = 1; attempt <= maxAttempts; attempt++) {
    let loaded: Awaited<ReturnType<typeof repository.load>>;
    try {
      loaded = await repository.load(subject);
    } catch (error) {
      outageSince = await rideThroughOutage(error, outageSince, rideThroughMs);
      attempt--;
      continue;
    }
    let events: readonly UnsealedEvent[];
    let refused: { readonly refusal: unknown } | undefined;
    try {
      events = decider.decide(command, loaded.state);
    } catch (refusal) {
      events = [];
      refused = { refusal };
    }
    if (events.length === 0) {
      // Reads may be answered by a replica of the stream that is behind its leader (a client that
      // just saw its run end elsewhere would be told the run is still in progress; an engage of the
      // kill switch decided on state from before its release would find it engaged and do nothing).
      // A refusal, or a decision that nothing is to be done, stands only on state the leader has
      // nothing newer than; otherwise decide again on a reload.
      if (staleReloads < MAX_STALE_RELOADS && (await behindLeader(aggregates, subject, loaded.lastSequence))) {
        staleReloads++;
        attempt--;
        await new Promise((resolve) => setTimeout(resolve, STALE_RELOAD_DELAY_MS));
        continue;
      }
      if (refused) throw refused.refusal;
      return { appended: [], state: loaded.state, position: loaded };
    }
    try {
      const appended = await aggregates.store.append<DomainEvent>(subject, events, loaded);
      const state = appended.reduce((s, stored) => decider.evolve(s, stored.event), loaded.state);
      const last = appended[appended.length - 1]!;
      const position = { lastSequence: last.seq, lastHash: last.event.hash, state };
      repository.remember(subject, position, appended.length);
      return { appended, state, position };
    } catch (error) {
      if (!(error instanceof AppendConflictError)) {
        outageSince = await rideThroughOutage(error, outageSince, rideThroughMs);
        attempt--;
        continue;
      }
      lastConflict = error;
      // Jittered backoff spreads out writers that keep colliding on one hot aggregate.
      await new Promise((resolve) => setTimeout(resolve, Math.random() * Math.min(50, 2 ** attempt)));
    }
  }
  throw new CommandContentionError(subject, maxAttempts, { cause: lastConflict });
}

/** One attempt on a remembered state: the result, or null to handle the command from a fresh load. */
async function appendOnRemembered<C extends Command, S>(
  aggregates: Aggregates,
  decider: Decider<C, S>,
  command: C,
  subject: string,
  remembered: LoadedAggregate<S>,
): Promise<CommandResult<S> | null> {
  let events: readonly UnsealedEvent[];
  try {
    events = decider.decide(command, remembered.state);
  } catch {
    return null; // a refusal must come from the current state, not a remembered one
  }
  if (events.length === 0) return null;
  try {
    const appended = await aggregates.store.append<DomainEvent>(subject, events, remembered);
    const state = appended.reduce((s, stored) => decider.evolve(s, stored.event), remembered.state);
    const last = appended[appended.length - 1]!;
    return { appended, state, position: { lastSequence: last.seq, lastHash: last.event.hash, state } };
  } catch (error) {
    // A conflict, or an unreachable log: the usual path reloads (and rides the outage through).
    if (error instanceof AppendConflictError) return null;
    if (error instanceof EventStoreError && error.code === EventStoreErrorCode.Unavailable) return null;
    throw error;
  }
}

/** The stream sequence of a command's last appended event, or null when it appended nothing. */
export function lastSeqOf(result: { appended: readonly Pick<StoredEvent, 'seq'>[] }): number | null {
  const last = result.appended[result.appended.length - 1];
  return last ? last.seq : null;
}
