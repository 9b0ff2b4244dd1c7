import { ErrorKind } from '../../errors/app-error.ts';
import { HttpOnlyError } from '../problems/http-errors.ts';
import { PROCESSING_LEASE_SECONDS } from './processing-lease.ts';

export class InvalidIdempotencyKeyError extends HttpOnlyError {
  readonly kind = ErrorKind.Validation;

  constructor(reason = 'it holds another character (a space or a control) or is longer') {
    super('invalid-idempotency-key', `Idempotency-Key must be 1 to 255 visible ASCII characters (! to ~, no space); ${reason}.`);
  }
}

export class IdempotencyKeyReusedError extends HttpOnlyError {
  readonly kind = ErrorKind.Conflict;

  constructor() {
    super('idempotency-key-reused', 'This Idempotency-Key was first used with another request body; use a new key for a new request.');
  }
}

export class IdempotentRequestInProgressError extends HttpOnlyError {
  readonly kind = ErrorKind.Contention;

  /** @param retryAfterSeconds when the first request's claim ends at the latest (it may finish sooner). */
  constructor(retryAfterSeconds = 1) {
    super('idempotent-request-in-progress', `Retry after the first request has finished (at the latest in ${retryAfterSeconds} s).`, { retryAfterSeconds });
  }
}

/**
 * A retry took over a request whose first attempt stopped before answering, and the read
 * model is too far behind to tell whether that attempt created its run (or action). The
 * claim is kept, so the next retry takes it over again and decides with the same id.
 */
export class TakeoverUndecidedError extends HttpOnlyError {
  readonly kind = ErrorKind.Contention;

  /** @param retryAfterSeconds when this takeover's own claim ends (a whole lease: it was just taken). */
  constructor(retryAfterSeconds = PROCESSING_LEASE_SECONDS) {
    super(
      'idempotent-request-in-progress',
      `The first attempt of this request stopped before answering, and whether it got as far as its result cannot be told yet; retry in ${retryAfterSeconds} s with the same Idempotency-Key.`,
      { retryAfterSeconds },
    );
  }
}
