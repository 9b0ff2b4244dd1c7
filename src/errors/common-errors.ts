import { ProblemError } from './problem-error.ts';

/** One JSON Schema violation, in the shape clients get under `errors`. */
export interface InvalidParam {
  readonly pointer: string;
  readonly message: string;
}

export class ValidationError extends ProblemError {
  constructor(detail: string, errors: readonly InvalidParam[] = []) {
    super({ type: 'validation-error', status: 422, title: 'Request body is invalid', detail, extensions: { errors } });
  }
}

export class MalformedJsonError extends ProblemError {
  constructor(detail: string) {
    super({ type: 'malformed-json', status: 400, title: 'Request body is not valid JSON', detail });
  }
}

export class PayloadTooLargeError extends ProblemError {
  constructor(limitBytes: number) {
    super({
      type: 'payload-too-large',
      status: 413,
      title: 'Request body is too large',
      detail: `The body exceeds the limit of ${limitBytes} bytes.`,
      extensions: { limit_bytes: limitBytes },
    });
  }
}

export class UnsupportedMediaTypeError extends ProblemError {
  constructor(received: string | undefined) {
    super({
      type: 'unsupported-media-type',
      status: 415,
      title: 'Content-Type must be application/json',
      detail: received ? `Received Content-Type '${received}'.` : 'The request has a body but no Content-Type.',
    });
  }
}

export class RouteNotFoundError extends ProblemError {
  constructor(method: string, path: string) {
    super({ type: 'not-found', status: 404, title: 'Not found', detail: `No resource at ${method} ${path}.` });
  }
}

export class MethodNotAllowedError extends ProblemError {
  constructor(method: string, allowed: readonly string[]) {
    super({
      type: 'method-not-allowed',
      status: 405,
      title: 'Method not allowed',
      detail: `${method} is not allowed here; allowed: ${allowed.join(', ')}.`,
      headers: { Allow: allowed.join(', ') },
    });
  }
}

export class ServiceUnavailableError extends ProblemError {
  constructor(detail: string, retryAfterSeconds = 5) {
    super(
      { type: 'service-unavailable', status: 503, title: 'Service temporarily unavailable', detail, headers: { 'Retry-After': String(retryAfterSeconds) } },
    );
  }
}

/** Anything unexpected. The detail never leaks internals; the log has them under the request id. */
export class InternalError extends ProblemError {
  constructor(requestId: string) {
    super({ type: 'internal', status: 500, title: 'Internal error', detail: `Unexpected fault; quote request id ${requestId}.` });
  }
}
