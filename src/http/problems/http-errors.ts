import { STATUS_CODES } from 'node:http';
import { AppError, ErrorKind, type AppErrorOptions } from '../../errors/app-error.ts';

/**
 * Errors only HTTP can have (a method the path does not take, a body that is not JSON, a
 * rate limit on requests): they live at the edge and may carry response headers.
 */
export abstract class HttpOnlyError extends AppError {
  /** Response headers beyond the ones the mapping derives (Retry-After), e.g. RateLimit. */
  readonly headers: Readonly<Record<string, string>>;

  constructor(code: string, message: string, options: AppErrorOptions & { headers?: Readonly<Record<string, string>> } = {}) {
    super(code, message, options);
    this.headers = options.headers ?? {};
  }
}

export class MalformedJsonError extends HttpOnlyError {
  readonly kind = ErrorKind.Validation;

  constructor(detail: string) {
    super('malformed-json', detail);
  }
}

export class PayloadTooLargeError extends HttpOnlyError {
  readonly kind = ErrorKind.Validation;

  constructor(limitBytes: number) {
    super('payload-too-large', `The body exceeds the limit of ${limitBytes} bytes.`, { details: { limit_bytes: limitBytes } });
  }
}

export class UnsupportedMediaTypeError extends HttpOnlyError {
  readonly kind = ErrorKind.Validation;

  private constructor(detail: string) {
    super('unsupported-media-type', detail);
  }

  /** A body whose Content-Type is not JSON in UTF-8, or has none. */
  static forContentType(received: string | undefined): UnsupportedMediaTypeError {
    return new UnsupportedMediaTypeError(
      received ? `Received Content-Type '${received}'; send application/json.` : 'The request has a body but no Content-Type; send application/json.',
    );
  }

  /** A body in a content coding (gzip, br…): its bytes are not JSON as they are (RFC 9110 §8.4.1 answers 415). */
  static forContentEncoding(received: string): UnsupportedMediaTypeError {
    return new UnsupportedMediaTypeError(`Received Content-Encoding '${received}'; send the body uncompressed, without a Content-Encoding header.`);
  }

  /** A body in a transfer coding other than chunked (`gzip, chunked`…), which the parser does not undo. */
  static forTransferEncoding(received: string): UnsupportedMediaTypeError {
    return new UnsupportedMediaTypeError(`Received Transfer-Encoding '${received}'; send the body uncompressed, with Content-Length or Transfer-Encoding: chunked alone.`);
  }
}

export class RouteNotFoundError extends HttpOnlyError {
  readonly kind = ErrorKind.NotFound;

  constructor(method: string, path: string) {
    super('not-found', `No resource at ${method} ${path}.`);
  }
}

export class MethodNotAllowedError extends HttpOnlyError {
  readonly kind = ErrorKind.IllegalState;

  constructor(method: string, allowed: readonly string[]) {
    super('method-not-allowed', `${method} is not allowed here; allowed: ${allowed.join(', ')}.`, { headers: { Allow: allowed.join(', ') } });
  }
}

/** Anything unexpected. The detail never leaks internals; the log has them under the request id. */
export class InternalError extends HttpOnlyError {
  readonly kind = ErrorKind.IllegalState;

  constructor(requestId: string) {
    super('internal', `Unexpected fault; quote request id ${requestId}.`);
  }
}

/**
 * A bare HTTP status (from `ctx.throw`, the router or raw-body) that has no error class of
 * its own; its slug is `http-<status>` and its status is kept as is.
 */
export class HttpStatusError extends HttpOnlyError {
  readonly kind: ErrorKind;
  readonly status: number;

  constructor(status: number, detail?: string, headers?: Readonly<Record<string, string>>) {
    super(`http-${status}`, detail ?? STATUS_CODES[status] ?? 'Error', { headers });
    this.status = status;
    this.kind = status >= 500 ? ErrorKind.Unavailable : ErrorKind.Validation;
  }
}
