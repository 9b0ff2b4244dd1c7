import {
  JetStreamApiCodes,
  JetStreamApiError,
  type JetStreamClient,
  type JetStreamManager,
} from '@nats-io/jetstream';
import { headers as natsHeaders } from '@nats-io/nats-core';
import { GENESIS_HASH, type EventEnvelope, type UnsealedEvent } from '../events/envelope.ts';
import { sealEvent } from '../events/event-hash.ts';
import { eventValidator, type EventValidator } from '../events/event-validator.ts';
import { EventAdmission, type AdmissionResult } from '../events/event-admission.ts';
import type { EventSigner } from '../events/signing/event-signer.ts';
import { AppendConflictError, EventStoreError, EventStoreErrorCode, EventStoreUnavailableError } from './errors.ts';
import { isNatsUnavailable } from './nats-unavailable.ts';
import { lastMatchingSeq, orderedRead, type ReadStall } from './ordered-read.ts';
import {
  EMPTY_POSITION,
  EVENT_TYPE_HEADER,
  EVENT_VERSION_HEADER,
  parseEvent,
  type EventStore,
  type RawStoredMessage,
  type StoredEvent,
  type SubjectPosition,
} from './event-store.ts';

const CONFLICT_CODES = new Set<number>([
  JetStreamApiCodes.StreamWrongLastSequence,
  JetStreamApiCodes.StreamWrongLastSequenceUnknown,
]);

/** Messages {@link JetStreamEventStore.firstGenesisSeqOf} looks at before it gives up on a subject (each a direct get). */
const MAX_MESSAGES_BEFORE_GENESIS = 1_000;

/** Gaps up to this many events are read with direct gets; longer ones with an ordered consumer. */
const DIRECT_READ_LIMIT = 32;

export interface EventStoreOptions {
  /** Checks every event before it is appended (default: the catalogue's validator). */
  readonly validator?: EventValidator;
  /**
   * What reads believe. Each store gets its own: the signature check depends on this
   * stream's keys and activation point, so it must not be shared across streams.
   */
  readonly admission?: EventAdmission;
  /** Signs every append; absent only for read-only use (an offline audit) and legacy-shaped test fixtures. */
  readonly signer?: EventSigner;
  /** Told when an ordered read stalled and went on with a new consumer (its server went away). */
  readonly onReadStall?: (stall: ReadStall) => void;
  /** How often a waiting read checks for a stall (tests shorten it). */
  readonly readStallCheckMs?: number;
}

let currentTurn: Promise<void> | undefined;

/**
 * Resolves in this event-loop turn's check phase, once for every append waiting on it. nats.js
 * writes what was queued since its last write at the next microtask, so an append published
 * straight from a request's own I/O callback costs a socket write (and a wake-up of
 * nats-server) of its own. Published together after the turn's I/O, the appends of every
 * request that arrived in that turn leave in one write. Measured with 32 connections creating
 * runs: nats-server CPU per POST 50-60 µs instead of 120-150, and 0.29-0.32 of the bare koa
 * route's throughput instead of 0.21-0.25 (bench/http-api.bench.ts, section 2). An idle
 * process waits for nothing: the check phase follows the poll phase that ran the request.
 */
function publishTurn(): Promise<void> {
  return (currentTurn ??= new Promise<void>((resolve) =>
    setImmediate(() => {
      currentTurn = undefined;
      resolve();
    }),
  ));
}

/**
 * The event log on one JetStream stream. Appends are chained by hash per aggregate and
 * guarded by the subject's expected last sequence, so two writers deciding on the same
 * state cannot both succeed.
 *
 * Reads come in three kinds. The `*Checked` reads go through this store's admission, which
 * refuses what cannot be believed (not JSON, schema, hostile text, foreign subject, bad or
 * missing signature) as a value, not a throw. `readRaw`, `followRaw` and `rawAt` return the
 * stored bytes to a caller that admits them itself (projectors, history, SSE, audit).
 * `readFiltered`, `readSubject`, `lastOf`, `at`, `follow` and `positionOf` believe the bytes
 * as stored: they are for tests and benchmark baselines, never for a decision (the write
 * model takes its position from believed events, src/event-store/aggregate-repository.ts).
 *
 * @example
 * ```ts
 * const { state, ...position } = await repository.load(subject); // believed events only
 * await store.append(subject, decide(command, state), position); // AppendConflictError on a race
 * ```
 */
export class JetStreamEventStore implements EventStore {
  private readonly validator: EventValidator;
  /** How the `*Checked` reads decide what to believe (schema, clean text, subject, authenticity). */
  readonly admission: EventAdmission;

  private readonly signer: EventSigner | undefined;
  private readonly readStallOptions: { readonly onStall?: (stall: ReadStall) => void; readonly stallCheckMs?: number };

  private readonly js: JetStreamClient;
  private readonly jsm: JetStreamManager;
  readonly streamName: string;

  constructor(
    js: JetStreamClient,
    jsm: JetStreamManager,
    streamName: string,
    options: EventStoreOptions = {},
  ) {
    this.js = js;
    this.jsm = jsm;
    this.streamName = streamName;
    this.validator = options.validator ?? eventValidator();
    this.admission = options.admission ?? new EventAdmission({ validator: this.validator });
    this.signer = options.signer;
    this.readStallOptions = { onStall: options.onReadStall, stallCheckMs: options.readStallCheckMs };
  }

  /**
   * Appends events to one aggregate subject. The first must find the subject at
   * `expected.lastSequence`; each next one expects its predecessor, so no other writer
   * can interleave. NATS 2.9 has no atomic batch: a crash between two of them leaves a
   * prefix, which is why commands decide one event per aggregate where they can.
   *
   * @throws AppendConflictError when the subject moved since `expected` was read.
   */
  async append<E extends EventEnvelope>(
    subject: string,
    events: readonly UnsealedEvent[],
    expected: SubjectPosition,
  ): Promise<StoredEvent<E>[]> {
    const stored: StoredEvent<E>[] = [];
    let position = expected;
    for (const unsealed of events) {
      this.validator.assertValid(unsealed);
      const event = sealEvent(unsealed, position.lastHash, this.signer) as E;
      const headers = natsHeaders();
      headers.set(EVENT_TYPE_HEADER, event.type);
      headers.set(EVENT_VERSION_HEADER, String(event.version));
      let seq: number;
      try {
        await publishTurn();
        const ack = await this.js.publish(subject, JSON.stringify(event), {
          msgID: event.id,
          headers,
          expect: { lastSubjectSequence: position.lastSequence, streamName: this.streamName },
        });
        seq = ack.seq;
      } catch (error) {
        if (error instanceof JetStreamApiError && CONFLICT_CODES.has(error.code)) {
          throw new AppendConflictError(subject, position.lastSequence, { cause: error });
        }
        if (isNatsUnavailable(error)) throw new EventStoreUnavailableError(`append to ${subject} failed: ${String(error)}`, { cause: error });
        throw new EventStoreError(EventStoreErrorCode.AppendFailed, `append to ${subject} failed: ${String(error)}`, {
          cause: error,
        });
      }
      stored.push({ seq, subject, event });
      position = { lastSequence: seq, lastHash: event.hash };
    }
    return stored;
  }

  /** The last event of a subject, or null when it has none. One round trip. */
  async lastOf(subject: string): Promise<StoredEvent | null> {
    const message = await this.jsm.direct.getMessage(this.streamName, { last_by_subj: subject });
    return message ? { seq: message.seq, subject: message.subject, event: parseEvent(message.data, message.seq) } : null;
  }

  /** Like {@link lastOf}, with a bad last event surfaced as a value instead of thrown. */
  async lastOfChecked(subject: string): Promise<AdmissionResult | null> {
    let message: Awaited<ReturnType<typeof this.jsm.direct.getMessage>>;
    try {
      message = await this.jsm.direct.getMessage(this.streamName, { last_by_subj: subject });
    } catch (error) {
      if (isNatsUnavailable(error)) throw new EventStoreUnavailableError(`reading the last event of ${subject} failed: ${String(error)}`, { cause: error });
      throw error;
    }
    return message ? this.admission.tryAdmit(message) : null;
  }

  async positionOf(subject: string): Promise<SubjectPosition> {
    const last = await this.lastOf(subject);
    return last ? { lastSequence: last.seq, lastHash: last.event.hash } : EMPTY_POSITION;
  }

  /** The event at a stream sequence, or null. */
  async at(seq: number): Promise<StoredEvent | null> {
    const message = await this.jsm.streams.getMessage(this.streamName, { seq });
    return message ? { seq: message.seq, subject: message.subject, event: parseEvent(message.data, message.seq) } : null;
  }

  /** The stored bytes at a stream sequence, unparsed, or null. */
  async rawAt(seq: number): Promise<RawStoredMessage | null> {
    const message = await this.jsm.streams.getMessage(this.streamName, { seq });
    return message ? { seq: message.seq, subject: message.subject, text: message.string(), data: message.data } : null;
  }

  async leaderLastSequenceOf(subject: string): Promise<number> {
    // Not a direct get: STREAM.MSG.GET is answered by the stream leader, never by a replica.
    try {
      return (await this.jsm.streams.getMessage(this.streamName, { last_by_subj: subject }))?.seq ?? 0;
    } catch (error) {
      if (error instanceof JetStreamApiError && error.code === JetStreamApiCodes.NoMessageFound) return 0;
      throw error;
    }
  }

  /** The stream's last sequence (0 when empty). */
  async lastSequence(): Promise<number> {
    const info = await this.jsm.streams.info(this.streamName);
    return info.state.last_seq;
  }

  /**
   * Events of one subject with sequence in (afterSeq, uptoSeq], in order. `uptoSeq` must be
   * a sequence known to exist on the subject (its last one, usually), so the read ends.
   */
  async *readSubject(subject: string, afterSeq: number, uptoSeq: number): AsyncGenerator<StoredEvent> {
    for await (const message of this.readSubjectRaw(subject, afterSeq, uptoSeq)) {
      yield { seq: message.seq, subject: message.subject, event: parseEvent(message.data, message.seq) };
    }
  }

  /** Like {@link readSubject}, with bad events surfaced as values (see {@link readFilteredChecked}). */
  async *readSubjectChecked(subject: string, afterSeq: number, uptoSeq: number): AsyncGenerator<AdmissionResult> {
    for await (const message of this.readSubjectRaw(subject, afterSeq, uptoSeq)) yield this.admission.tryAdmit(message);
  }

  private async *readSubjectRaw(subject: string, afterSeq: number, uptoSeq: number): AsyncGenerator<{ seq: number; subject: string; data: Uint8Array }> {
    if (uptoSeq <= afterSeq) return;
    let cursor = afterSeq + 1;
    for (let read = 0; read < DIRECT_READ_LIMIT; read++) {
      const message = await this.nextOnSubject(subject, cursor);
      if (!message || message.seq > uptoSeq) return;
      yield { seq: message.seq, subject: message.subject, data: message.data };
      if (message.seq === uptoSeq) return;
      cursor = message.seq + 1;
    }
    yield* this.readRaw(subject, cursor, uptoSeq);
  }

  /**
   * Like {@link readFiltered}, but every message goes through admission and a bad one
   * (not JSON, schema, foreign subject, bad text, untrusted) arrives as a value with its
   * sequence and reason, so one corrupt event cannot end a reader.
   */
  async *readFilteredChecked(filter: string, fromSeq: number, uptoSeq?: number): AsyncGenerator<AdmissionResult> {
    for await (const raw of this.readRaw(filter, fromSeq, uptoSeq)) {
      yield this.admission.tryAdmit({ seq: raw.seq, subject: raw.subject, data: raw.data });
    }
  }

  /** Like {@link follow}, with bad events surfaced as values (see {@link readFilteredChecked}). */
  async *followChecked(filter: string, fromSeq: number, signal: AbortSignal): AsyncGenerator<AdmissionResult> {
    for await (const message of this.followRaw(filter, fromSeq, signal)) {
      yield this.admission.tryAdmit(message);
    }
  }

  /**
   * Every event matching `filter` from `fromSeq` through `uptoSeq` (default: the last event
   * the filter matches when the read starts), through an ordered consumer: gap-free, in
   * order, and it survives reconnects.
   */
  async *readFiltered(filter: string, fromSeq: number, uptoSeq?: number): AsyncGenerator<StoredEvent> {
    for await (const raw of this.readRaw(filter, fromSeq, uptoSeq)) {
      let event: EventEnvelope;
      try {
        event = JSON.parse(raw.text) as EventEnvelope;
      } catch (error) {
        throw new EventStoreError(EventStoreErrorCode.Corrupt, `stream sequence ${raw.seq} is not JSON`, { cause: error });
      }
      yield { seq: raw.seq, subject: raw.subject, event };
    }
  }

  /**
   * Every event matching `filter` from stream sequence `fromSeq` on, and then each new one
   * as it is appended, until `signal` aborts. Ordered and gap-free (an ordered consumer),
   * through reconnects. To start at a time, resolve it with {@link firstSeqAtOrAfter}.
   */
  async *follow(filter: string, fromSeq: number, signal: AbortSignal): AsyncGenerator<StoredEvent> {
    for await (const message of this.followRaw(filter, fromSeq, signal)) {
      yield { seq: message.seq, subject: message.subject, event: parseEvent(message.data, message.seq) };
    }
  }

  /**
   * Every message matching `filter` from `fromSeq` on, then each new one, unparsed, until
   * `signal` aborts. An abort that lands while the consumer is being created is seen too:
   * the consumer is deleted at once, so a reader that goes away during setup (an SSE client
   * disconnecting) leaves no consumer behind on the server.
   */
  async *followRaw(filter: string, fromSeq: number, signal: AbortSignal): AsyncGenerator<RawStoredMessage> {
    for await (const message of orderedRead(this.js, this.jsm, this.streamName, { filter, fromSeq, signal, batch: 256, ...this.readStallOptions })) {
      if (signal.aborted) return;
      yield { seq: message.seq, subject: message.subject, text: message.string(), data: message.data };
    }
  }

  /** The sequence of the first message still stored on a subject, or null when it has none. One round trip. */
  async firstSeqOf(subject: string): Promise<number | null> {
    return (await this.nextOnSubject(subject, 1))?.seq ?? null;
  }

  /**
   * The sequence of the event that starts `subject`'s chain: its first stored message that is
   * believed (admitted) and names the genesis hash, or null when none of the first
   * {@link MAX_MESSAGES_BEFORE_GENESIS} is. A message published raw before it (junk, a copy
   * from another subject, a forgery) is passed over, so it cannot make the genuine first event
   * look like a replay of itself (src/events/subject-chains.ts).
   */
  async firstGenesisSeqOf(subject: string): Promise<number | null> {
    let from = 1;
    for (let looked = 0; looked < MAX_MESSAGES_BEFORE_GENESIS; looked++) {
      const message = await this.nextOnSubject(subject, from);
      if (!message) return null;
      const admitted = this.admission.tryAdmit({ seq: message.seq, subject: message.subject, data: message.data });
      if (admitted.ok && admitted.stored.event.prev_hash === GENESIS_HASH) return message.seq;
      from = message.seq + 1;
    }
    return null;
  }

  /** The first message on `subject` at or after `seq` (a direct get), or null; NATS down is EventStoreUnavailableError. */
  private async nextOnSubject(subject: string, seq: number) {
    try {
      return await this.jsm.direct.getMessage(this.streamName, { seq, next_by_subj: subject });
    } catch (error) {
      if (isNatsUnavailable(error)) throw new EventStoreUnavailableError(`reading ${subject} failed: ${String(error)}`, { cause: error });
      throw error;
    }
  }

  /** The stream's first stored sequence (1 until retention removes messages; last + 1 when empty). */
  async firstSequence(): Promise<number> {
    return (await this.jsm.streams.info(this.streamName)).state.first_seq;
  }

  /**
   * The first stream sequence stored at or after `time` (head + 1 when none is). A binary
   * search over message timestamps: nats.js's ordered consumer drops `opt_start_time`
   * when it (re)creates itself, and 2.9 has no direct get by time.
   */
  async firstSeqAtOrAfter(time: Date): Promise<number> {
    const { state } = await this.jsm.streams.info(this.streamName);
    let low = state.first_seq;
    let high = state.last_seq + 1;
    while (low < high) {
      const middle = Math.floor((low + high) / 2);
      const message = await this.jsm.streams.getMessage(this.streamName, { seq: middle });
      if (message && message.time.getTime() >= time.getTime()) high = middle;
      else low = middle + 1;
    }
    return low;
  }

  /** Like readFiltered, without parsing: `audit verify` must see exactly what is stored. */
  async *readRaw(filter: string, fromSeq: number, uptoSeq?: number): AsyncGenerator<RawStoredMessage> {
    // Where the read ends is decided up front, from the last message the filter matches:
    // nats-server 2.9 over-counts num_pending for wildcard filters, so "nothing pending"
    // cannot be trusted to end a read (it left history pages waiting forever).
    const lastMatching = await lastMatchingSeq(this.jsm, this.streamName, filter);
    if (lastMatching === 0) return;
    const end = Math.min(uptoSeq ?? lastMatching, lastMatching);
    if (end < fromSeq) return;
    for await (const message of orderedRead(this.js, this.jsm, this.streamName, { filter, fromSeq, endSeq: end, batch: 512, ...this.readStallOptions })) {
      yield { seq: message.seq, subject: message.subject, text: message.string(), data: message.data };
    }
  }
}

