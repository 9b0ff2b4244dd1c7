import { sql, type Kysely } from 'kysely';
import { foldProjectionsIntoSchema } from '../../projections/runtime/rebuild.ts';
import { withShadowSchema } from '../../projections/runtime/shadow-schema-lock.ts';
import type { Projection } from '../../projections/runtime/projection.ts';
import type { Database } from '../db/schema.ts';
import { GENESIS_HASH, type EventEnvelope } from '../events/envelope.ts';
import { recomputeStoredEventHash } from '../events/event-hash.ts';
import { EventSchemaError, eventValidator, type EventValidator } from '../events/event-validator.ts';
import type { JetStreamEventStore as EventStore } from '../event-store/jetstream-event-store.ts';
import type { Subjects } from '../event-store/subjects.ts';
import { EventVerifier, type Verdict } from '../events/signing/event-verifier.ts';
import type { EventSigning } from '../events/signing/event-signing.ts';
import { UntrustedEventError } from '../events/signing/untrusted-event-error.ts';

export const DISCREPANCY_KINDS = [
  'not_an_event',
  'schema_invalid',
  'subject_mismatch',
  'hash_mismatch',
  'chain_broken',
  'read_model_mismatch',
  'unsigned',
  'unknown_key',
  'bad_signature',
] as const;
export type DiscrepancyKind = (typeof DISCREPANCY_KINDS)[number];

export interface Discrepancy {
  readonly kind: DiscrepancyKind;
  /** Stream sequence of the offending event (for a read model: of the row's last event, or 0). */
  readonly seq: number;
  readonly subject: string;
  readonly detail: string;
}

export interface VerifyReport {
  readonly events: number;
  readonly subjects: number;
  readonly lastSeq: number;
  readonly readModelsChecked: readonly string[];
  readonly discrepancy: Discrepancy | null;
  readonly durationMs: number;
  /** Events whose signature verified (0 when signatures were not checked). */
  readonly signedEvents: number;
  /** Unsigned events accepted as legacy: stored before signing began with key `legacyBeforeKeyId`. */
  readonly legacyEvents: number;
  readonly legacyBeforeKeyId: string | null;
}

export interface VerifyOptions {
  readonly store: EventStore;
  readonly subjects: Subjects;
  /** Only this account's subjects. */
  readonly accountId?: string;
  /** Start here; chains are then checked from each subject's first event at or after it. */
  readonly fromSeq?: number;
  /** Compare these read models with a fresh fold (only for a whole-stream check from sequence 1). */
  readonly readModels?: { readonly db: Kysely<Database>; readonly schema: string; readonly projections: readonly Projection[] };
  readonly onProgress?: (phase: string, done: number, total: number) => void;
  /** Checks every event's signature (after its hash and chain); without one, signatures are not checked. */
  readonly verifier?: EventVerifier;
}

/**
 * The verifier an audit checks signatures with: the keys and activation point this process
 * believes, and nothing remembered (each signature is checked once).
 */
export function auditVerifier({ keys, verifier }: EventSigning): EventVerifier {
  return new EventVerifier(keys, verifier.activation, { rememberVerified: false });
}

/**
 * Signature checks an audit keeps in flight: enough to keep libuv's thread pool (4 threads
 * unless UV_THREADPOOL_SIZE says otherwise) busy while the next events are read and checked.
 */
const SIGNATURES_IN_FLIGHT = 64;

/** Where a read of the log stands: what a report counts when it stops there. */
interface ReadPosition {
  readonly events: number;
  readonly subjects: number;
  readonly lastSeq: number;
}

interface PendingSignature {
  readonly check: Promise<Verdict>;
  readonly event: EventEnvelope;
  readonly subject: string;
  /** The read as it stood at this event (its sequence is `lastSeq`). */
  readonly at: ReadPosition;
}

/** What readChainHeads judges an event by. */
interface HeadJudge {
  readonly validator: EventValidator;
  readonly subjects: Subjects;
  readonly verifier?: EventVerifier;
}

/**
 * The hash each subject's chain ends with at `uptoSeq`, following the chains as the main read
 * does, so that what was published raw before the range (a replayed copy, junk, a forgery)
 * cannot stand in for a subject's last event: an event moves its subject's head only when it
 * is sound (JSON, schema, subject, its own hash) and continues the head, or starts a subject
 * not seen yet (with its genesis hash, or as the first sound event of a subject whose start
 * is no longer stored). Only the final head of each subject has its signature checked (with a
 * verifier): a later event that continued a head vouches for it through its `prev_hash`. A
 * subject whose final head does not verify is read again with every head checked, so a forged
 * event that took a head is passed over. Counted in `heads` progress.
 */
async function readChainHeads(
  store: VerifyOptions['store'],
  filter: string,
  uptoSeq: number,
  heads: Map<string, string>,
  judge: HeadJudge,
  onProgress: VerifyOptions['onProgress'],
): Promise<void> {
  // Where each head was read, not the event: a log of a million run subjects would hold a
  // million envelopes. The final heads are read again to check their signatures.
  const headSeqs = new Map<string, number>();
  const follow = (seq: number, subject: string, event: EventEnvelope): void => {
    const current = heads.get(subject);
    if (current !== undefined && event.prev_hash !== current) return;
    heads.set(subject, event.hash);
    headSeqs.set(subject, seq);
  };
  let read = 0;
  for await (const raw of store.readRaw(filter, 1, uptoSeq)) {
    if (++read % 5000 === 0) onProgress?.('heads', raw.seq, uptoSeq);
    const event = soundEventOf(raw, judge);
    if (event) follow(raw.seq, raw.subject, event);
  }
  const { verifier } = judge;
  if (!verifier) return;
  for (const [subject, seq] of [...headSeqs]) {
    const raw = await store.rawAt(seq);
    const event = raw && raw.subject === subject ? soundEventOf(raw, judge) : null;
    if (event && believedBy(verifier, event, subject, seq)) continue;
    heads.delete(subject);
    headSeqs.delete(subject);
    for await (const raw of store.readRaw(subject, 1, uptoSeq)) {
      const candidate = soundEventOf(raw, judge);
      if (candidate && believedBy(verifier, candidate, subject, raw.seq)) follow(raw.seq, subject, candidate);
    }
  }
}

/** The event a stored message holds when it is sound on its own (not yet its signature), else null. */
function soundEventOf(raw: { readonly subject: string; readonly text: string }, { validator, subjects }: HeadJudge): EventEnvelope | null {
  try {
    const event = JSON.parse(raw.text) as EventEnvelope;
    validator.assertValid(event);
    if (typeof event.hash !== 'string' || typeof event.prev_hash !== 'string') return null;
    if (subjects.forAggregate({ workspaceId: event.workspace_id, accountId: event.account_id, aggregate: event.aggregate }) !== raw.subject) return null;
    return recomputeStoredEventHash(raw.text, event) === event.hash ? event : null;
  } catch {
    return null;
  }
}

function believedBy(verifier: EventVerifier, event: EventEnvelope, subject: string, seq: number): boolean {
  try {
    verifier.verdict(event, subject, seq);
    return true;
  } catch (error) {
    if (error instanceof UntrustedEventError) return false;
    throw error;
  }
}

/**
 * Replays the event log and checks what an auditor needs to trust it: every message is an
 * event valid against its schema, sits on the subject its envelope names, hashes to its
 * `hash`, links to the previous event of its aggregate and, given a verifier, carries a valid
 * signature by a known key (or is legacy: unsigned before signing began); then that every read model
 * equals a fresh fold of the log. Stops at the first discrepancy and reports it with its
 * stream sequence.
 */
export async function verifyEventLog(options: VerifyOptions): Promise<VerifyReport> {
  const started = Date.now();
  const { store, subjects } = options;
  const fromSeq = Math.max(1, options.fromSeq ?? 1);
  const filter = options.accountId ? `${subjects.prefix}.v1.*.${options.accountId}.>` : subjects.all;
  const head = await store.lastSequence();
  const lastHash = new Map<string, string>();
  const validator = eventValidator();
  let events = 0;
  let lastSeq = 0;
  let signedEvents = 0;
  let legacyEvents = 0;
  const report = (discrepancy: Discrepancy | null, readModelsChecked: string[] = [], at: ReadPosition = { events, subjects: lastHash.size, lastSeq }): VerifyReport => ({
    ...at,
    readModelsChecked,
    discrepancy,
    durationMs: Date.now() - started,
    signedEvents,
    legacyEvents,
    legacyBeforeKeyId: legacyEvents > 0 ? (options.verifier?.activation?.keyId ?? null) : null,
  });
  /**
   * Signature checks under way in libuv's thread pool, oldest first. They are settled in
   * stream order, and every other discrepancy waits for those before it, so the report names
   * the first discrepancy of the log, with the counts as they were there.
   */
  const signatures: PendingSignature[] = [];
  const settleOldest = async (): Promise<VerifyReport | null> => {
    const { check, at, subject, event } = signatures.shift()!;
    try {
      const verdict = await check;
      if (verdict.kind === 'signed') signedEvents++;
      else legacyEvents++;
      return null;
    } catch (error) {
      if (!(error instanceof UntrustedEventError)) throw error;
      const kind = ({ unsigned: 'unsigned', 'unknown-key': 'unknown_key', 'bad-signature': 'bad_signature' } as const)[error.code];
      return report({ kind, seq: at.lastSeq, subject, detail: `event ${event.id} (${event.type}): ${error.reason}` }, [], at);
    }
  };
  /** The first signature refusal among the checks under way, if any. */
  const firstRefusal = async (): Promise<VerifyReport | null> => {
    while (signatures.length > 0) {
      const refused = await settleOldest();
      if (refused) return refused;
    }
    return null;
  };
  /** Stops at an event's own discrepancy, unless a signature before it was refused. */
  const stopAt = async (discrepancy: Discrepancy): Promise<VerifyReport> => (await firstRefusal()) ?? report(discrepancy);

  // From a later sequence, each subject's chain continues from the last event before it:
  // follow the chains of the log before the range, or a replayed copy that is the first event
  // of its subject in the range would go unnoticed.
  const headsBefore = new Map<string, string>();
  if (fromSeq > 1) await readChainHeads(store, filter, fromSeq - 1, headsBefore, { validator, subjects, verifier: options.verifier }, options.onProgress);

  for await (const raw of store.readRaw(filter, fromSeq, head)) {
    events++;
    lastSeq = raw.seq;
    if (events % 5000 === 0) options.onProgress?.('events', raw.seq, head);
    let event: EventEnvelope;
    try {
      event = JSON.parse(raw.text) as EventEnvelope;
    } catch {
      return stopAt({ kind: 'not_an_event', seq: raw.seq, subject: raw.subject, detail: 'the message is not JSON' });
    }
    try {
      validator.assertValid(event);
      if (typeof event.hash !== 'string' || typeof event.prev_hash !== 'string') throw new EventSchemaError(String(event.type), ['hash or prev_hash missing']);
    } catch (error) {
      const detail = error instanceof Error ? error.message : String(error);
      return stopAt({ kind: 'schema_invalid', seq: raw.seq, subject: raw.subject, detail });
    }
    let expectedSubject: string;
    try {
      expectedSubject = subjects.forAggregate({ workspaceId: event.workspace_id, accountId: event.account_id, aggregate: event.aggregate });
    } catch {
      expectedSubject = '(no valid subject)';
    }
    if (expectedSubject !== raw.subject) {
      return stopAt({ kind: 'subject_mismatch', seq: raw.seq, subject: raw.subject, detail: `the envelope belongs on ${expectedSubject}` });
    }
    let recomputed: string;
    try {
      recomputed = recomputeStoredEventHash(raw.text, event);
    } catch (error) {
      // The canonical JSON has no form for some values (a lone surrogate): such an event cannot be the one that was hashed.
      const detail = `event ${event.id} (${event.type}) cannot be hashed: ${error instanceof Error ? error.message : String(error)}`;
      return stopAt({ kind: 'hash_mismatch', seq: raw.seq, subject: raw.subject, detail });
    }
    if (recomputed !== event.hash) {
      return stopAt({ kind: 'hash_mismatch', seq: raw.seq, subject: raw.subject, detail: `event ${event.id} (${event.type}) does not hash to its recorded hash: its content was altered` });
    }
    const previous = lastHash.get(raw.subject) ?? headsBefore.get(raw.subject) ?? GENESIS_HASH;
    if (event.prev_hash !== previous) {
      return stopAt({
        kind: 'chain_broken',
        seq: raw.seq,
        subject: raw.subject,
        detail: `event ${event.id} (${event.type}) links to ${event.prev_hash.slice(0, 12)}…, but the previous event of its aggregate hashes to ${previous.slice(0, 12)}…: an event was inserted, removed or reordered`,
      });
    }
    lastHash.set(raw.subject, event.hash);
    headsBefore.delete(raw.subject);
    if (options.verifier) {
      const check = options.verifier.verdictOffThread(event, raw.subject, raw.seq);
      // Settled in stream order by settleOldest; a refusal is not an unhandled rejection meanwhile.
      check.catch(() => undefined);
      signatures.push({ check, event, subject: raw.subject, at: { events, subjects: lastHash.size, lastSeq: raw.seq } });
      if (signatures.length > SIGNATURES_IN_FLIGHT) {
        const refused = await settleOldest();
        if (refused) return refused;
      }
    }
  }
  const refused = await firstRefusal();
  if (refused) return refused;
  options.onProgress?.('events', head, head);

  const checked: string[] = [];
  if (options.readModels && !options.accountId && fromSeq === 1) {
    const { db, schema, projections } = options.readModels;
    const mismatch = await compareReadModels({ db, schema, store, subjects, projections, onProgress: options.onProgress });
    checked.push(...projections.slice(0, mismatch ? mismatch.index + 1 : projections.length).map((projection) => projection.name));
    if (mismatch) return report(mismatch.discrepancy, checked);
  }
  return report(null, checked);
}

/**
 * Folds the log into fresh tables, each projection up to its live checkpoint (all read in one
 * snapshot with the live rows), in one read and one admission of the log, and compares them
 * with the live tables row by row, projection by projection.
 * @returns the first projection (in the given order) whose rows differ, with how
 */
/** What comparing the read models reads: the live schema and its projections, and the log. */
interface ReadModelComparison {
  readonly db: Kysely<Database>;
  readonly schema: string;
  readonly store: EventStore;
  readonly subjects: Subjects;
  readonly projections: readonly Projection[];
  readonly onProgress: VerifyOptions['onProgress'];
}

async function compareReadModels(comparison: ReadModelComparison): Promise<{ readonly index: number; readonly discrepancy: Discrepancy } | null> {
  const { db, schema, onProgress } = comparison;
  const shadow = `${schema}_verify`;
  // Another audit of the schema folds into the same shadow schema: this one waits for it.
  return withShadowSchema(db, shadow, async (held) => {
    const compared = await compareReadModelsIn(shadow, comparison);
    // The lock's session ended meanwhile: another audit may have filled the shadow schema under this one.
    if (!(await held())) throw new Error(`the audit lost its lock on ${shadow} (its Postgres session ended) while it compared the read models; run it again`);
    return compared;
  }, {
    onWait: () => onProgress?.('wait for another audit', 0, 1),
  });
}

async function compareReadModelsIn(
  shadow: string,
  { db, schema, store, subjects, projections, onProgress }: ReadModelComparison,
): Promise<{ readonly index: number; readonly discrepancy: Discrepancy } | null> {
  const snapshot = await db
    .transaction()
    .setIsolationLevel('repeatable read')
    .execute(async (trx) => {
      const taken: { checkpoint: number; live: Record<string, string[]> }[] = [];
      for (const projection of projections) {
        const row = await trx.selectFrom('projection_checkpoints').select('last_seq').where('projection', '=', projection.name).executeTakeFirst();
        const live: Record<string, string[]> = {};
        for (const table of projection.tables) live[table] = await dumpTable(trx, schema, table);
        taken.push({ checkpoint: row?.last_seq ?? 0, live });
      }
      return taken;
    });
  try {
    await foldProjectionsIntoSchema({
      db,
      store,
      schema: shadow,
      filterSubject: subjects.all,
      targets: projections.map((projection, index) => ({ projection, uptoSeq: snapshot[index]!.checkpoint })),
      onProgress: (seq, target) => onProgress?.('fold read models', seq, target),
    });
    for (const [index, projection] of projections.entries()) {
      const { checkpoint, live } = snapshot[index]!;
      for (const table of projection.tables) {
        const fresh = await dumpTable(db, shadow, table);
        const liveRows = live[table]!;
        // Multiset difference in linear time: rows are canonical JSON strings.
        const onlyLive = multisetMinus(liveRows, fresh);
        const onlyFresh = multisetMinus(fresh, liveRows);
        if (onlyLive.length > 0 || onlyFresh.length > 0) {
          return { index, discrepancy: describeMismatch(projection.name, table, checkpoint, onlyLive, onlyFresh) };
        }
      }
    }
    return null;
  } finally {
    await sql`drop schema if exists ${sql.id(shadow)} cascade`.execute(db);
  }
}

/** Names the first differing row by its key and lists the columns that differ, live vs. expected. */
function describeMismatch(projection: string, table: string, checkpoint: number, onlyLive: string[], onlyFresh: string[]): Discrepancy {
  const live = onlyLive.map((r) => JSON.parse(r) as Record<string, unknown>);
  const fresh = onlyFresh.map((r) => JSON.parse(r) as Record<string, unknown>);
  const keyOf = (row: Record<string, unknown>) => String(row.id ?? row.event_id ?? JSON.stringify(row));
  const first = live[0] ?? fresh[0]!;
  const counterpart = (live[0] ? fresh : live).find((row) => keyOf(row) === keyOf(first));
  const show = (value: unknown) => JSON.stringify(value)?.slice(0, 120) ?? 'undefined';
  let detail: string;
  if (!counterpart) {
    detail = live[0] ? `row ${keyOf(first)} exists in the read model but not in a fresh fold` : `row ${keyOf(first)} is missing from the read model`;
  } else {
    const [liveRow, freshRow] = live[0] ? [first, counterpart] : [counterpart, first];
    const columns = Object.keys({ ...liveRow, ...freshRow }).filter((c) => JSON.stringify(liveRow[c]) !== JSON.stringify(freshRow[c]));
    detail = `row ${keyOf(first)}: ${columns.map((c) => `${c} is ${show(liveRow[c])}, a fresh fold gives ${show(freshRow[c])}`).join('; ')}`;
  }
  const seq = Number(first.last_seq ?? first.seq ?? 0);
  return {
    kind: 'read_model_mismatch',
    seq,
    subject: `${projection}.${table}`,
    detail: `${detail} (${Math.max(onlyLive.length, onlyFresh.length)} row(s) differ from a fresh fold up to sequence ${checkpoint})`,
  };
}

/** The rows of `a` not matched one-to-one by a row of `b`. */
function multisetMinus(a: readonly string[], b: readonly string[]): string[] {
  const counts = new Map<string, number>();
  for (const row of b) counts.set(row, (counts.get(row) ?? 0) + 1);
  const rest: string[] = [];
  for (const row of a) {
    const left = counts.get(row) ?? 0;
    if (left > 0) counts.set(row, left - 1);
    else rest.push(row);
  }
  return rest;
}

/** A table's rows as canonical JSON strings, sorted, so two tables compare as multisets. */
async function dumpTable(db: Kysely<any>, schema: string, table: string): Promise<string[]> {
  const result = await sql<{ row: string }>`select row_to_json(t)::jsonb::text as row from ${sql.id(schema, table)} t`.execute(db);
  return result.rows.map((r) => r.row).sort();
}
