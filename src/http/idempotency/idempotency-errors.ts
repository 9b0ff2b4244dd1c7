import { ProblemError } from '../../errors/problem-error.ts';

export class InvalidIdempotencyKeyError extends ProblemError {
  constructor() {
    super({
      type: 'invalid-idempotency-key',
      status: 400,
      title: 'Idempotency-Key is invalid',
      detail: 'Idempotency-Key must be 1 to 255 printable ASCII characters.',
    });
  }
}

export class IdempotencyKeyReusedError extends ProblemError {
  constructor() {
    super({
      type: 'idempotency-key-reused',
      status: 422,
      title: 'Idempotency-Key was used with a different request',
      detail: 'This Idempotency-Key was first used with another request body; use a new key for a new request.',
    });
  }
}

export class IdempotentRequestInProgressError extends ProblemError {
  constructor() {
    super({
      type: 'idempotent-request-in-progress',
      status: 409,
      title: 'A request with this Idempotency-Key is still being processed',
      detail: 'Retry after the first request has finished.',
      headers: { 'Retry-After': '1' },
    });
  }
}
