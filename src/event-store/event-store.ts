import { GENESIS_HASH, type EventEnvelope, type UnsealedEvent } from '../events/envelope.ts';
import type { AdmissionResult } from '../events/event-admission.ts';
import { AppendConflictError, EventStoreError, EventStoreErrorCode } from './errors.ts';
import type { StoredEvent } from './stored-event.ts';

export type { StoredEvent } from './stored-event.ts';

/** Where an aggregate's subject stands: the optimistic-concurrency expectation of the next append. */
export interface SubjectPosition {
  readonly lastSequence: number;
  readonly lastHash: string;
}

export const EMPTY_POSITION: SubjectPosition = { lastSequence: 0, lastHash: GENESIS_HASH };

/** Header names other than Nats-Msg-Id; consumers may route on them without parsing the body. */
export const EVENT_TYPE_HEADER = 'Ads-Event-Type';
export const EVENT_VERSION_HEADER = 'Ads-Event-Version';

/**
 * What command handling needs from an event log: append to one aggregate subject with
 * optimistic concurrency, and read that subject back. Implemented on JetStream
 * (`jetstream-event-store.ts`, production) and in memory (`in-memory-event-store.ts`,
 * specifications); both keep the same semantics, checked by one contract test
 * (test/event-store/event-store-contract.ts):
 *
 * - the first appended event must find the subject at `expected.lastSequence`, else
 *   {@link AppendConflictError}; each next event of the same call expects its predecessor;
 * - sequences are stream-wide, increasing, shared by all subjects;
 * - an event whose id was appended before (within the de-duplication window) is not stored
 *   again: the append answers with the sequence of the first copy;
 * - the `*Checked` reads go through admission and surface a bad message as a value.
 *
 * @example
 * ```ts
 * const position = await store.positionOf(subject);
 * await store.append(subject, [event], position); // AppendConflictError if another writer got there first
 * ```
 */
export interface EventStore {
  /** @throws AppendConflictError when the subject moved since `expected` was read. */
  append<E extends EventEnvelope>(subject: string, events: readonly UnsealedEvent[], expected: SubjectPosition): Promise<StoredEvent<E>[]>;
  /** The last event of a subject as stored, or null when it has none. Not for decisions. */
  lastOf(subject: string): Promise<StoredEvent | null>;
  /** The last message of a subject through admission, or null when it has none. */
  lastOfChecked(subject: string): Promise<AdmissionResult | null>;
  /** The subject's position as stored (EMPTY_POSITION when it has no event). */
  positionOf(subject: string): Promise<SubjectPosition>;
  /** The stream's last sequence (0 when empty). */
  lastSequence(): Promise<number>;
  /**
   * The subject's last sequence as the stream's leader has it (0 when none): what a read that
   * may have been answered by a replica behind the leader is checked against before a refusal.
   */
  leaderLastSequenceOf(subject: string): Promise<number>;
  /** Events of one subject with sequence in (afterSeq, uptoSeq], in order, as stored. */
  readSubject(subject: string, afterSeq: number, uptoSeq: number): AsyncIterable<StoredEvent>;
  /** Like {@link readSubject}, through admission. */
  readSubjectChecked(subject: string, afterSeq: number, uptoSeq: number): AsyncIterable<AdmissionResult>;
}

/** A stored message before parsing: what an auditor checks. */
export interface RawStoredMessage {
  readonly seq: number;
  readonly subject: string;
  readonly text: string;
  /** The exact bytes (`text` has invalid UTF-8 replaced by U+FFFD). */
  readonly data: Uint8Array;
}

export function parseEvent(data: Uint8Array, seq: number): EventEnvelope {
  try {
    return JSON.parse(new TextDecoder().decode(data)) as EventEnvelope;
  } catch (error) {
    throw new EventStoreError(EventStoreErrorCode.Corrupt, `stream sequence ${seq} is not JSON`, { cause: error });
  }
}

export function isConflict(error: unknown): error is AppendConflictError {
  return error instanceof AppendConflictError;
}
