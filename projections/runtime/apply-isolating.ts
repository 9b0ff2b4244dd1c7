import { sql, type RawBuilder, type Transaction } from 'kysely';
import type { Database } from '../../src/db/schema.ts';
import { InadmissibleCode, type AdmissionResult } from '../../src/events/event-admission.ts';
import type { StoredEvent } from '../../src/event-store/event-store.ts';
import { ApplyFailureKind, classifyApplyFailure, sqlStateOf } from './apply-failure.ts';
import { chainBrokenDetail } from '../../src/events/subject-chains.ts';
import { checkChains } from './chain-heads.ts';
import type { Projection } from './projection.ts';
import { parkEvent, type ParkedEvent } from './quarantine.ts';
import { inSavepoint } from './savepoint.ts';

/** A message of a batch after admission, with its bytes kept for the quarantine. */
export interface BatchEntry {
  readonly result: AdmissionResult;
  readonly payload: Uint8Array;
}

/** What applyIsolating did in the caller's transaction (nothing of it committed yet). */
export interface IsolatedBatch {
  /** The events it parked, in order. */
  readonly parked: ParkedEvent[];
  /** The new head hash of each subject the batch moved (none when the chains were not checked). */
  readonly movedHeads: ReadonlyMap<string, string>;
  /**
   * The statement that writes `movedHeads` (null when none moved): already executed, unless
   * the caller asked to execute it itself (`writeHeads: false`).
   */
  readonly headsUpsert: RawBuilder<unknown> | null;
}

export interface IsolatingOptions {
  /** Schema of the quarantine table when the transaction's search path is elsewhere (rebuild). */
  readonly quarantineSchema?: string;
  /** False to skip bad events without recording them (audit verify's read-only fold). */
  readonly park?: boolean;
  /**
   * False for an event already taken into its subject's chain when it was first seen (one
   * Postgres refused, retried from the quarantine): checking it again would find its own hash
   * at the head and refuse it as a replay.
   */
  readonly checkChain?: boolean;
  /** Chain heads the caller knows to be current; those subjects' heads are not read. */
  readonly knownHeads?: ReadonlyMap<string, string>;
  /** False: the moved heads are not written here; the caller executes `headsUpsert` itself (one round trip fewer when it joins a statement of its own). */
  readonly writeHeads?: boolean;
  /**
   * Apply the batch without savepoints (see ApplyContext): any failure then aborts the
   * caller's transaction and is thrown, and the caller applies the batch again without this
   * option, which isolates what Postgres refuses.
   */
  readonly unguarded?: boolean;
}

/**
 * Applies a batch in the caller's transaction so that one bad event cannot hold back the
 * rest: inadmissible messages are parked, the admitted events are applied together inside
 * a savepoint, and if Postgres refuses that for a data reason (see apply-failure.ts) the
 * savepoint is rolled back and the events are applied one at a time, each in its own
 * savepoint, parking exactly the ones Postgres refuses alone. Stream order is kept.
 * Transient failures are rethrown: the caller rolls back and retries the whole batch.
 *
 * @example
 * const { parked, movedHeads } = await applyIsolating(trx, projection, entries, { knownHeads });
 */
export async function applyIsolating(
  trx: Transaction<Database>,
  projection: Projection,
  entries: readonly BatchEntry[],
  options: IsolatingOptions = {},
): Promise<IsolatedBatch> {
  const parked: ParkedEvent[] = [];
  const park = async (entry: ParkedEvent) => {
    parked.push(entry);
    if (options.park !== false) await parkEvent(trx, entry, options.quarantineSchema);
  };
  const believable: { stored: StoredEvent; payload: Uint8Array }[] = [];
  for (const { result, payload } of entries) {
    if (result.ok) believable.push({ stored: result.stored, payload });
    else await park({ projection: projection.name, seq: result.corrupt.seq, subject: result.corrupt.subject, code: result.corrupt.code, error: result.corrupt.error, payload });
  }
  // A validly signed event that does not continue its subject's hash chain is a replay or an
  // insertion (see chain-heads.ts); it is parked like any other event that cannot be believed.
  const chains =
    options.checkChain === false
      ? { continuing: believable, broken: [], moved: new Map<string, string>(), headsUpsert: null }
      : await checkChains(trx, projection, believable, options.knownHeads, { write: options.writeHeads !== false });
  const done = (): IsolatedBatch => ({ parked, movedHeads: chains.moved, headsUpsert: chains.headsUpsert });
  for (const { entry, expected } of chains.broken) {
    await park({
      projection: projection.name,
      seq: entry.stored.seq,
      subject: entry.stored.subject,
      code: InadmissibleCode.ChainBroken,
      error: chainBrokenDetail(String(entry.stored.event.prev_hash), expected),
      payload: entry.payload,
    });
  }
  // Events the projection has no use for need no savepoint and no statement of their own.
  const admitted = projection.handles ? chains.continuing.filter((entry) => projection.handles!(entry.stored.event)) : chains.continuing;
  if (admitted.length === 0) return done();
  if (options.unguarded) {
    await projection.apply(trx, admitted.map((a) => a.stored), { guarded: false });
    return done();
  }

  const whole = await inSavepoint(trx, 'apply_batch', () => projection.apply(trx, admitted.map((a) => a.stored)));
  if (whole === null) return done();
  if (classifyApplyFailure(whole) === ApplyFailureKind.Transient) throw whole;
  for (const { stored, payload } of admitted) {
    const failure = await inSavepoint(trx, 'apply_one', () => projection.apply(trx, [stored]));
    if (failure === null) continue;
    if (classifyApplyFailure(failure) === ApplyFailureKind.Transient) throw failure;
    await park({
      projection: projection.name,
      seq: stored.seq,
      subject: stored.subject,
      code: InadmissibleCode.Refused,
      error: `Postgres refused it (SQLSTATE ${sqlStateOf(failure)}): ${failure instanceof Error ? failure.message : String(failure)}`,
      payload,
    });
  }
  return done();
}

/**
 * The rule every caller of an unguarded apply follows: try the batch unguarded (no savepoints,
 * in a transaction `attempt` opens), and when Postgres refuses anything in it (the events'
 * fault, class 22/23), try it again guarded in a new transaction, where applyIsolating parks
 * exactly what Postgres refuses. Any other failure is thrown as it is.
 *
 * @example
 * await unguardedThenGuarded((unguarded) => db.transaction().execute((trx) => applyIsolating(trx, projection, entries, { unguarded })));
 */
export async function unguardedThenGuarded<T>(attempt: (unguarded: boolean) => Promise<T>): Promise<T> {
  try {
    return await attempt(true);
  } catch (error) {
    if (classifyApplyFailure(error) !== ApplyFailureKind.Deterministic) throw error;
    return attempt(false);
  }
}
