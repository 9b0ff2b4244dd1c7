import { sql, type Kysely, type Transaction } from 'kysely';
import type { Database } from '../../src/db/schema.ts';
import type { RawStoredMessage } from '../../src/event-store/event-store.ts';
import type { JetStreamEventStore as EventStore } from '../../src/event-store/jetstream-event-store.ts';
import { admitWithSeals, type AdmissionSeals, type SealRecorder } from './admission-seals.ts';
import { applyIsolating, unguardedThenGuarded, type BatchEntry } from './apply-isolating.ts';
import { writeCheckpoint } from './checkpoints.ts';
import { createOwnedTables, ownedTables } from './chain-heads.ts';
import type { Projection } from './projection.ts';
import { withShadowSchema } from './shadow-schema-lock.ts';
import { sqlStateOf } from './apply-failure.ts';

/**
 * Events a fold applies in one transaction, as the live projector's batch: 2,000 rebuilt the
 * benchmark's 100,000 runs events about 25% faster than 1,000 (52,000–57,000 against
 * 40,000–46,000 events a second, alternating runs); 4,000 was no faster than 2,000 within noise.
 */
const FOLD_BATCH = 2000;

/** Batches a fold reads ahead of its oldest uncommitted one (the memory of a few batches). */
const FOLD_BATCHES_AHEAD = 2;

export interface RebuildOptions {
  readonly db: Kysely<Database>;
  readonly store: EventStore;
  /** Live schema (DATABASE_SCHEMA); the rebuild works in `<schema>_rebuild` beside it. */
  readonly schema: string;
  /** Subject filter covering the whole stream. */
  readonly filterSubject: string;
  readonly projection: Projection;
  /** Events a transaction (default {@link FOLD_BATCH}). */
  readonly batchSize?: number;
  /** Called after every batch with events applied so far and the target sequence. */
  readonly onProgress?: (applied: number, target: number) => void;
  /** Blocks sealed before are believed from their seals (admission-seals.ts), and the blocks admitted whole are sealed. */
  readonly seals?: AdmissionSeals;
  /** Called once when another rebuild of the schema holds the shadow schema: this one waits for it to end. */
  readonly onWait?: () => void;
}

export interface RebuildResult {
  readonly events: number;
  readonly lastSeq: number;
  /** Events parked in the quarantine instead of applied (the live projector parks the same ones). */
  readonly parked: number;
  readonly durationMs: number;
}

/**
 * Postgres errors a swap transaction is tried again for: a deadlock (40P01) or serialization
 * failure (40001) Postgres chose it to end, and the checkpoint row held by someone else at the
 * moment it asked (55P03, see {@link swapIn}). Nothing of the fold is lost by them: the swap
 * starts again from the folded tables.
 */
const SWAP_RETRYABLE = new Set(['40P01', '40001', '55P03']);

/** Swap attempts before a rebuild gives up (the backoffs between them add up to about 5 s). */
const SWAP_ATTEMPTS = 10;

/** The wait before swap attempt n + 1: 50 ms doubling, at most 1 s. */
const swapBackoffMs = (attempt: number) => Math.min(1000, 50 * 2 ** attempt);

/**
 * A rebuild folded the log but could not swap the new tables in: the live tables, checkpoint and
 * quarantine are as they were, and the shadow schema is dropped. Running it again is safe.
 */
export class RebuildSwapError extends Error {
  readonly code: string | undefined;
  constructor(projection: string, attempts: number, cause: unknown) {
    const code = sqlStateOf(cause) ?? undefined;
    const reason = cause instanceof Error ? cause.message : String(cause);
    super(
      `the rebuild of ${projection} could not swap its new tables in after ${attempts} attempt${attempts === 1 ? '' : 's'} ` +
        `(${reason}${code ? `, SQLSTATE ${code}` : ''}); the live tables, checkpoint and quarantine are unchanged; run it again`,
      { cause },
    );
    this.name = 'RebuildSwapError';
    this.code = code;
  }
}

/**
 * The session holding the rebuild's lock (withShadowSchema) ended during the fold: another
 * rebuild may have used the shadow schema since. Nothing was swapped in; running it again is safe.
 */
export class RebuildLockLostError extends Error {
  constructor(projection: string) {
    super(`the rebuild of ${projection} lost its lock on the shadow schema (its Postgres session ended) before the swap; nothing was swapped in; run it again`);
    this.name = 'RebuildLockLostError';
  }
}


/**
 * Rebuilds a projection from sequence 1 into fresh tables in a shadow schema while the
 * live projection keeps serving, then swaps them in (see {@link swapIn}): it applies the events
 * that arrived meanwhile, moves the new tables into the live schema, sets the checkpoint and
 * removes the projection's quarantine rows the fold did not park again. Readers see the old
 * tables or the new ones, never a mix. A swap Postgres ends with a deadlock or serialization
 * failure is tried again (without folding again); whatever ends the rebuild, the shadow schema
 * is dropped, and the live tables, checkpoint and quarantine change only if the swap commits.
 *
 * Rebuilds of one schema run one at a time: a second one waits for the first (`onWait`).
 *
 * @throws RebuildSwapError when every swap attempt failed that way.
 */
export async function rebuildProjection(options: RebuildOptions): Promise<RebuildResult> {
  const shadow = `${options.schema}_rebuild`;
  // One rebuild of a schema at a time: each drops and fills the shadow schema (see withShadowSchema).
  return withShadowSchema(options.db, shadow, (held) => rebuildIn(shadow, options, held), { onWait: options.onWait });
}

async function rebuildIn(shadow: string, options: RebuildOptions, held: () => Promise<boolean>): Promise<RebuildResult> {
  const { db, schema, projection } = options;
  const batchSize = options.batchSize ?? FOLD_BATCH;
  const started = Date.now();

  let outcome: { ok: true; value: RebuildResult } | { ok: false; error: unknown };
  try {
    const folded = await foldIntoSchema({
      db,
      store: options.store,
      schema: shadow,
      filterSubject: options.filterSubject,
      projection,
      batchSize,
      onProgress: options.onProgress,
      quarantineSchema: schema,
      seals: options.seals,
    });
    for (let attempt = 1; ; attempt++) {
      try {
        // The lock's session ended during the fold: another rebuild may have dropped and filled the
        // shadow schema since, and its tables must not be swapped in under this fold's checkpoint.
        if (!(await held())) throw new RebuildLockLostError(projection.name);
        const swapped = await swapIn(options, shadow, folded);
        outcome = { ok: true, value: { ...swapped, durationMs: Date.now() - started } };
        break;
      } catch (error) {
        if (!SWAP_RETRYABLE.has(sqlStateOf(error) ?? '')) throw error;
        if (attempt >= SWAP_ATTEMPTS) throw new RebuildSwapError(projection.name, attempt, error);
        await new Promise((resolve) => setTimeout(resolve, swapBackoffMs(attempt)));
      }
    }
  } catch (error) {
    outcome = { ok: false, error };
  }
  try {
    await sql`drop schema if exists ${sql.id(shadow)} cascade`.execute(db);
  } catch (error) {
    // The rebuild's own failure says more than the clean-up's.
    if (outcome.ok) throw error;
  }
  if (!outcome.ok) throw outcome.error;
  return outcome.value;
}

/**
 * The swap, in one transaction: lock the live tables, lock the checkpoint row, fold the events
 * that arrived since the fold into the shadow tables, move them into the live schema, write the
 * checkpoint, and remove the projection's quarantine rows up to that sequence the fold did not
 * park again (stale: the new fold applies them, or no longer sees them).
 *
 * The lock order cannot deadlock with the live projector: the swap waits (for readers and for
 * a projector transaction writing the tables) only while it holds nothing, and holding the tables
 * it never waits for the checkpoint row (NOWAIT: 55P03, and the swap is tried again). The fast
 * path (tables, then the checkpoint row at its end) finishes before the swap takes the tables; the
 * careful path, a quarantine retry and a start-up reset (checkpoint row, then tables) finish before
 * the swap's next attempt. A projection whose projector writes several tables can still meet the
 * swap holding one of them and wanting another: Postgres ends one side (40P01), and either side
 * tries again.
 */
async function swapIn(options: RebuildOptions, shadow: string, folded: FoldResult): Promise<Omit<RebuildResult, 'durationMs'>> {
  const { db, store, schema, projection, filterSubject } = options;
  return db.transaction().execute(async (trx) => {
    let { applied, lastSeq, parked } = folded;
    const parkedSeqs = [...folded.parkedSeqs];
    const tables = ownedTables(projection);
    const { rows: live } = await sql<{ table: string }>`
      select c.relname as table from pg_class c join pg_namespace n on n.oid = c.relnamespace
      where n.nspname = ${schema} and c.relname = any(${tables}::text[]) and c.relkind in ('r', 'p')
    `.execute(trx);
    if (live.length > 0) {
      const names = tables.filter((table) => live.some((row) => row.table === table)).map((table) => sql.id(schema, table));
      await sql`lock table ${sql.join(names)} in access exclusive mode`.execute(trx);
    }
    await sql`select 1 from ${sql.id(schema, 'projection_checkpoints')} where projection = ${projection.name} for update nowait`.execute(trx);
    const head = await store.lastSequence();
    const tail: RawStoredMessage[] = [];
    for await (const raw of store.readRaw(filterSubject, lastSeq + 1, head)) tail.push(raw);
    if (tail.length > 0) {
      await sql`set local search_path to ${sql.id(shadow)}`.execute(trx);
      const { parked: tailParked } = await applyIsolating(trx, projection, await admitAll(store, tail, 0, options.seals), { quarantineSchema: schema });
      lastSeq = tail[tail.length - 1]!.seq;
      applied += tail.length - tailParked.length;
      parked += tailParked.length;
      parkedSeqs.push(...tailParked.map((event) => event.seq));
    }
    await sql`set local search_path to ${sql.id(schema)}, public`.execute(trx);
    for (const table of tables) {
      await sql`drop table if exists ${sql.id(schema, table)} cascade`.execute(trx);
      await sql`alter table ${sql.id(shadow, table)} set schema ${sql.id(schema)}`.execute(trx);
    }
    await writeCheckpoint(trx, projection.name, { version: projection.version, lastSeq });
    // The quarantine holds what this fold parked, and nothing else of the projection up to lastSeq.
    await sql`
      delete from ${sql.id(schema, 'event_quarantine')}
      where projection = ${projection.name} and seq <= ${lastSeq} and not (seq = any(${parkedSeqs.map(String)}::bigint[]))
    `.execute(trx);
    return { events: applied, lastSeq, parked };
  });
}

export interface FoldOptions {
  readonly db: Kysely<Database>;
  readonly store: EventStore;
  /** A schema of its own: dropped and created afresh. */
  readonly schema: string;
  readonly filterSubject: string;
  readonly projection: Projection;
  /** Fold events up to this sequence (default: the stream's head when the fold starts). */
  readonly uptoSeq?: number;
  readonly batchSize?: number;
  readonly onProgress?: (seq: number, target: number) => void;
  /**
   * Where to park events that cannot be applied (the live schema, for a rebuild). Unset:
   * they are skipped without a record, as `audit verify` does in its read-only fold.
   */
  readonly quarantineSchema?: string;
  /** As in {@link RebuildOptions.seals}; `audit verify` leaves it out and checks every event. */
  readonly seals?: AdmissionSeals;
}

/** One projection of a {@link foldProjectionsIntoSchema}, and how far to fold it. */
export interface FoldTarget {
  readonly projection: Projection;
  readonly uptoSeq: number;
}

export interface FoldResult {
  readonly applied: number;
  readonly lastSeq: number;
  readonly parked: number;
  /** The sequences of the events it parked, in stream order. */
  readonly parkedSeqs: readonly number[];
}

/**
 * Folds the event log from sequence 1 into fresh tables of a projection in `schema`, in
 * stream order, one transaction a batch, reading and admitting the next batch while the
 * transaction of the one before runs. Used by the rebuild (which then swaps them in).
 */
export async function foldIntoSchema(options: FoldOptions): Promise<FoldResult> {
  const { projection, uptoSeq, ...rest } = options;
  const folded = await foldProjectionsIntoSchema({ ...rest, targets: [{ projection, uptoSeq: uptoSeq ?? (await options.store.lastSequence()) }] });
  return folded.get(projection.name)!;
}

/**
 * Like {@link foldIntoSchema} for several projections at once, each up to its own sequence,
 * over one read and one admission of the log: each batch is applied to every projection that
 * still wants it, in a transaction of its own (side by side), and batches commit in stream
 * order. `audit verify` folds every read model this way, where a fold per projection read and
 * admitted the whole log once for each.
 *
 * @example
 * const folded = await foldProjectionsIntoSchema({ db, store, schema: 'audit_shadow', filterSubject,
 *   targets: [{ projection: runsProjection, uptoSeq: 1200 }, { projection: identityProjection, uptoSeq: 1180 }] });
 * folded.get('runs'); // { applied, lastSeq, parked }
 */
export async function foldProjectionsIntoSchema(
  options: Omit<FoldOptions, 'projection' | 'uptoSeq'> & { readonly targets: readonly FoldTarget[] },
): Promise<Map<string, FoldResult>> {
  const { db, store, schema, filterSubject, targets } = options;
  const batchSize = options.batchSize ?? FOLD_BATCH;
  await sql`drop schema if exists ${sql.id(schema)} cascade`.execute(db);
  await sql`create schema ${sql.id(schema)}`.execute(db);
  for (const { projection } of targets) await inSchema(db, schema, (trx) => createOwnedTables(trx, projection));
  const target = Math.max(0, ...targets.map((t) => t.uptoSeq));
  const results = new Map(targets.map((t) => [t.projection.name, { applied: 0, lastSeq: 0, parked: 0, parkedSeqs: [] as number[] }]));
  let batch: RawStoredMessage[] = [];
  const recorder = options.seals?.recorder();
  /** The admission of the newest batch: batches are admitted one after another, in stream order (the seal recorder needs them so). */
  let admitting: Promise<unknown> = Promise.resolve();
  /** The transactions of the newest batch: each batch waits for the one before, so they commit in stream order. */
  let committing: Promise<void> = Promise.resolve();
  /** Batches read and not yet committed, oldest first. */
  const inFlight: Promise<void>[] = [];
  const isolating = { quarantineSchema: options.quarantineSchema, park: options.quarantineSchema !== undefined };
  const applyTo = async ({ projection, uptoSeq }: FoldTarget, messages: readonly RawStoredMessage[], entries: readonly BatchEntry[]) => {
    // The batch's messages up to the target's sequence: all of them but in the target's last batch.
    let wanted = messages.length;
    while (wanted > 0 && messages[wanted - 1]!.seq > uptoSeq) wanted--;
    if (wanted === 0) return;
    const part = wanted === entries.length ? entries : entries.slice(0, wanted);
    const { parked } = await unguardedThenGuarded((unguarded) => inSchema(db, schema, (trx) => applyIsolating(trx, projection, part, { ...isolating, unguarded })));
    const result = results.get(projection.name)!;
    result.applied += wanted - parked.length;
    result.parked += parked.length;
    for (const event of parked) result.parkedSeqs.push(event.seq);
    result.lastSeq = messages[wanted - 1]!.seq;
  };
  const apply = async (messages: readonly RawStoredMessage[], entries: readonly BatchEntry[]) => {
    // Every transaction of the batch ends before a failure is the fold's: the caller drops the schema next.
    const outcomes = await Promise.allSettled(targets.map((t) => applyTo(t, messages, entries)));
    const failed = outcomes.find((outcome) => outcome.status === 'rejected');
    if (failed) throw failed.reason;
    options.onProgress?.(messages[messages.length - 1]!.seq, target);
  };
  // Reading, admitting and committing overlap: while a batch's transactions run, the next
  // batch is admitted (its seals looked up in Postgres) and the one after it read, instead
  // of the reader waiting for every commit.
  const flush = async () => {
    if (batch.length === 0) return;
    const messages = batch;
    batch = [];
    const entries = admitting.then(() => admitAll(store, messages, target - messages[messages.length - 1]!.seq, options.seals, recorder));
    admitting = entries;
    // Its failure reaches the fold through `committing`, which takes it up only after the batch before has committed.
    entries.catch(() => undefined);
    // After the batch before has committed, even when this admission failed: the fold ends with nothing of it still running.
    committing = committing.then(() => entries).then((admitted) => apply(messages, admitted));
    // Awaited when the reader is too far ahead, or at the end: its failure is the fold's.
    committing.catch(() => undefined);
    inFlight.push(committing);
    if (inFlight.length > FOLD_BATCHES_AHEAD) await inFlight.shift();
  };
  if (target > 0) {
    for await (const raw of store.readRaw(filterSubject, 1, target)) {
      batch.push(raw);
      if (batch.length >= batchSize) await flush();
    }
  }
  await flush();
  await committing;
  return results;
}

/**
 * The same admission the live projector applies, so a rebuild parks the same events; a fold
 * far behind the head keeps no verdicts for other readers, as a projector catching up does.
 */
async function admitAll(store: EventStore, messages: readonly RawStoredMessage[], behindHead = 0, seals?: AdmissionSeals, recorder?: SealRecorder): Promise<BatchEntry[]> {
  const verdicts = await admitWithSeals(
    messages.map((raw) => ({ seq: raw.seq, subject: raw.subject, data: raw.data })),
    { admission: store.admission, seals, recorder, behindHead, admitInFull: (rest) => store.admission.tryAdmitBatch(rest, { behindHead }) },
  );
  return messages.map((raw, index) => ({ result: verdicts[index]!, payload: raw.data }));
}

async function inSchema<T>(db: Kysely<Database>, schema: string, work: (trx: Transaction<Database>) => Promise<T>): Promise<T> {
  return db.transaction().execute(async (trx) => {
    await sql`set local search_path to ${sql.id(schema)}`.execute(trx);
    return work(trx);
  });
}
