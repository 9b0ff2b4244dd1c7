/** Codes of event-store errors, as a closed set (nats.js style). */
export const EventStoreErrorCode = {
  /** Another writer appended to the aggregate since it was loaded. */
  Conflict: 'conflict',
  /** The stream refused or could not take the write (not a conflict). */
  AppendFailed: 'append_failed',
  /** A stored message is not an event envelope. */
  Corrupt: 'corrupt',
  /**
   * The stream could not be reached (no responders while a cluster elects a leader, a timeout,
   * a lost connection); the same call may succeed in a moment. A read decided nothing. An append
   * that timed out may have been stored with only its acknowledgement lost: whoever retries it
   * decides again on state read afresh, with the same ids (the deciders append nothing for an
   * id they already hold), never with new ones (src/http/idempotency/idempotency-store.ts, abandon).
   */
  Unavailable: 'unavailable',
} as const;
export type EventStoreErrorCode = (typeof EventStoreErrorCode)[keyof typeof EventStoreErrorCode];

export class EventStoreError extends Error {
  readonly code: EventStoreErrorCode;

  constructor(code: EventStoreErrorCode, message: string, options?: { cause?: unknown }) {
    super(message, options);
    this.code = code;
    this.name = 'EventStoreError';
  }
}

/** The event log is not reachable right now; see {@link EventStoreErrorCode.Unavailable}. */
export class EventStoreUnavailableError extends EventStoreError {
  constructor(message: string, options?: { cause?: unknown }) {
    super(EventStoreErrorCode.Unavailable, message, options);
    this.name = 'EventStoreUnavailableError';
  }
}

/**
 * Optimistic concurrency lost: the subject's last sequence was not the expected one.
 * Command handling reloads state, decides again and retries a bounded number of times.
 */
export class AppendConflictError extends EventStoreError {
  readonly subject: string;
  readonly expectedSequence: number;

  constructor(subject: string, expectedSequence: number, options?: { cause?: unknown }) {
    super(EventStoreErrorCode.Conflict, `concurrent append to ${subject} (expected last sequence ${expectedSequence})`, options);
    this.subject = subject;
    this.expectedSequence = expectedSequence;
    this.name = 'AppendConflictError';
  }
}
