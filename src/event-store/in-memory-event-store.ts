import type { EventEnvelope, UnsealedEvent } from '../events/envelope.ts';
import { sealEvent } from '../events/event-hash.ts';
import { eventValidator, type EventValidator } from '../events/event-validator.ts';
import { EventAdmission, type AdmissionResult } from '../events/event-admission.ts';
import type { EventSigner } from '../events/signing/event-signer.ts';
import { AppendConflictError } from './errors.ts';
import { EMPTY_POSITION, parseEvent, type EventStore, type StoredEvent, type SubjectPosition } from './event-store.ts';

/** JetStream's default duplicate window (the stream's `duplicate_window`, 2 minutes). */
const DEFAULT_DUPLICATE_WINDOW_MS = 120_000;

interface StoredMessage {
  readonly seq: number;
  readonly subject: string;
  readonly data: Uint8Array;
}

export interface InMemoryEventStoreOptions {
  readonly validator?: EventValidator;
  readonly admission?: EventAdmission;
  readonly signer?: EventSigner;
  /** How long an event id is remembered for de-duplication (default 2 minutes, as JetStream). */
  readonly duplicateWindowMs?: number;
  /** The clock of the duplicate window (tests move it). */
  readonly clock?: () => number;
}

/**
 * An {@link EventStore} in one process's memory, for specifications that must run without
 * NATS. It keeps the JetStream store's semantics (test/event-store/event-store-contract.ts
 * runs the same cases against both): one stream-wide sequence, an append must find the
 * subject at the expected last sequence (else AppendConflictError), a repeated event id
 * inside the duplicate window is not stored again and answers with the first copy's
 * sequence, events are validated, sealed and chained by hash, and checked reads go through
 * admission. Appends of one call are applied together: no other append can interleave.
 *
 * @example
 * ```ts
 * const store = new InMemoryEventStore();
 * await store.append(subject, [event], EMPTY_POSITION);
 * ```
 */
export class InMemoryEventStore implements EventStore {
  readonly admission: EventAdmission;
  private readonly validator: EventValidator;
  private readonly signer: EventSigner | undefined;
  private readonly duplicateWindowMs: number;
  private readonly clock: () => number;

  private readonly messages: StoredMessage[] = [];
  private readonly bySubject = new Map<string, StoredMessage[]>();
  /** Event id → sequence of its first copy and when it was stored. */
  private readonly seenIds = new Map<string, { readonly seq: number; readonly at: number }>();

  constructor(options: InMemoryEventStoreOptions = {}) {
    this.validator = options.validator ?? eventValidator();
    this.admission = options.admission ?? new EventAdmission({ validator: this.validator });
    this.signer = options.signer;
    this.duplicateWindowMs = options.duplicateWindowMs ?? DEFAULT_DUPLICATE_WINDOW_MS;
    this.clock = options.clock ?? Date.now;
  }

  async append<E extends EventEnvelope>(subject: string, events: readonly UnsealedEvent[], expected: SubjectPosition): Promise<StoredEvent<E>[]> {
    // A microtask boundary, as the network gives: concurrent callers interleave between awaits, never inside one.
    await Promise.resolve();
    const stored: StoredEvent<E>[] = [];
    let position = expected;
    for (const unsealed of events) {
      this.validator.assertValid(unsealed);
      const event = sealEvent(unsealed, position.lastHash, this.signer) as E;
      const now = this.clock();
      const duplicate = this.seenIds.get(event.id);
      if (duplicate && now - duplicate.at < this.duplicateWindowMs) {
        stored.push({ seq: duplicate.seq, subject, event });
        position = { lastSequence: duplicate.seq, lastHash: event.hash };
        continue;
      }
      const onSubject = this.bySubject.get(subject) ?? [];
      const last = onSubject[onSubject.length - 1]?.seq ?? 0;
      if (last !== position.lastSequence) throw new AppendConflictError(subject, position.lastSequence);
      const message = { seq: this.messages.length + 1, subject, data: new TextEncoder().encode(JSON.stringify(event)) };
      this.messages.push(message);
      onSubject.push(message);
      this.bySubject.set(subject, onSubject);
      this.seenIds.set(event.id, { seq: message.seq, at: now });
      stored.push({ seq: message.seq, subject, event });
      position = { lastSequence: message.seq, lastHash: event.hash };
    }
    return stored;
  }

  async lastOf(subject: string): Promise<StoredEvent | null> {
    const last = this.lastMessage(subject);
    return last ? { seq: last.seq, subject: last.subject, event: parseEvent(last.data, last.seq) } : null;
  }

  async leaderLastSequenceOf(subject: string): Promise<number> {
    return this.lastMessage(subject)?.seq ?? 0;
  }

  async lastOfChecked(subject: string): Promise<AdmissionResult | null> {
    const last = this.lastMessage(subject);
    return last ? this.admission.tryAdmit(last) : null;
  }

  async positionOf(subject: string): Promise<SubjectPosition> {
    const last = await this.lastOf(subject);
    return last ? { lastSequence: last.seq, lastHash: last.event.hash } : EMPTY_POSITION;
  }

  async lastSequence(): Promise<number> {
    return this.messages.length;
  }

  async *readSubject(subject: string, afterSeq: number, uptoSeq: number): AsyncGenerator<StoredEvent> {
    for (const message of this.between(subject, afterSeq, uptoSeq)) {
      yield { seq: message.seq, subject: message.subject, event: parseEvent(message.data, message.seq) };
    }
  }

  async *readSubjectChecked(subject: string, afterSeq: number, uptoSeq: number): AsyncGenerator<AdmissionResult> {
    for (const message of this.between(subject, afterSeq, uptoSeq)) yield this.admission.tryAdmit(message);
  }

  /**
   * Stores bytes as they are, bypassing validation, sealing and the concurrency check: what a
   * forger with publish rights on the stream could do. For specifications of how readers
   * treat a corrupt or forged message.
   */
  appendRaw(subject: string, data: Uint8Array | string): number {
    const message = { seq: this.messages.length + 1, subject, data: typeof data === 'string' ? new TextEncoder().encode(data) : data };
    this.messages.push(message);
    this.bySubject.set(subject, [...(this.bySubject.get(subject) ?? []), message]);
    return message.seq;
  }

  private lastMessage(subject: string): StoredMessage | undefined {
    const onSubject = this.bySubject.get(subject);
    return onSubject?.[onSubject.length - 1];
  }

  private between(subject: string, afterSeq: number, uptoSeq: number): StoredMessage[] {
    return (this.bySubject.get(subject) ?? []).filter((message) => message.seq > afterSeq && message.seq <= uptoSeq);
  }
}
