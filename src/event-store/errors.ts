/** Codes of event-store errors, as a closed set (nats.js style). */
export const EventStoreErrorCode = {
  /** Another writer appended to the aggregate since it was loaded. */
  Conflict: 'conflict',
  /** The stream refused or could not take the write (not a conflict). */
  AppendFailed: 'append_failed',
  /** A stored message is not an event envelope. */
  Corrupt: 'corrupt',
} as const;
export type EventStoreErrorCode = (typeof EventStoreErrorCode)[keyof typeof EventStoreErrorCode];

export class EventStoreError extends Error {
  constructor(readonly code: EventStoreErrorCode, message: string, options?: { cause?: unknown }) {
    super(message, options);
    this.name = 'EventStoreError';
  }
}

/**
 * Optimistic concurrency lost: the subject's last sequence was not the expected one.
 * Command handling reloads state, decides again and retries a bounded number of times.
 */
export class AppendConflictError extends EventStoreError {
  constructor(readonly subject: string, readonly expectedSequence: number, options?: { cause?: unknown }) {
    super(EventStoreErrorCode.Conflict, `concurrent append to ${subject} (expected last sequence ${expectedSequence})`, options);
    this.name = 'AppendConflictError';
  }
}
