import { AppError, ErrorKind } from './app-error.ts';

/** One violation of a request's schema, in the shape clients get under `errors`. */
export interface InvalidParam {
  /** JSON pointer into the body (`/brief`) or the query (`/limit`): the machine-readable field. */
  readonly pointer: string;
  /** Plain words: what was wrong and what to send instead. */
  readonly message: string;
}

/** The request (body, query or path) breaks its schema; `errors` lists every violation. */
export class ValidationError extends AppError {
  readonly kind = ErrorKind.Validation;
  readonly errors: readonly InvalidParam[];

  constructor(detail: string, errors: readonly InvalidParam[] = []) {
    super('validation-error', detail, { details: { errors } });
    this.errors = errors;
  }
}

/** A backing service cannot answer now; retrying after `retryAfterSeconds` will likely work. */
export class ServiceUnavailableError extends AppError {
  readonly kind = ErrorKind.Unavailable;

  constructor(detail: string, retryAfterSeconds = 5) {
    super('service-unavailable', detail, { retryAfterSeconds });
  }
}
