import { STATUS_CODES } from 'node:http';
import { ErrorKind, type AppError } from '../../errors/app-error.ts';
import { HttpOnlyError, HttpStatusError } from './http-errors.ts';
import { isProblemSlug, PROBLEM_CATALOGUE } from './problem-catalogue.ts';

/** What a problem response is made of, before the request's instance and id are added. */
export interface HttpProblem {
  readonly status: number;
  /** The slug; the `type` URI is `<PUBLIC_BASE_URL>/problems/<slug>`. */
  readonly slug: string;
  readonly title: string;
  readonly detail: string;
  readonly extensions: Readonly<Record<string, unknown>>;
  readonly headers: Readonly<Record<string, string>>;
}

/** The status of a kind whose code is not in the catalogue. */
const STATUS_OF_KIND: Readonly<Record<ErrorKind, number>> = {
  [ErrorKind.NotFound]: 404,
  [ErrorKind.Conflict]: 409,
  [ErrorKind.Validation]: 422,
  [ErrorKind.IllegalState]: 409,
  [ErrorKind.Contention]: 503,
  [ErrorKind.Unavailable]: 503,
  [ErrorKind.Unauthenticated]: 401,
  [ErrorKind.Forbidden]: 403,
  [ErrorKind.LimitExceeded]: 429,
};

/**
 * The one place an error becomes HTTP: status and title from the problem catalogue (by
 * code), falling back on the kind; Retry-After from `retryAfterSeconds`; the headers a
 * status implies (WWW-Authenticate on 401/403) and an edge error's own (Allow, RateLimit).
 *
 * @example
 * ```ts
 * toHttpProblem(new RunNotFoundError(id)); // { status: 404, slug: 'run-not-found', title: 'Run not found', ... }
 * ```
 */
export function toHttpProblem(error: AppError): HttpProblem {
  const entry = isProblemSlug(error.code) ? PROBLEM_CATALOGUE[error.code] : undefined;
  const status = error instanceof HttpStatusError ? error.status : (entry?.status ?? STATUS_OF_KIND[error.kind]);
  const headers: Record<string, string> = { ...authenticateHeader(error) };
  if (error instanceof HttpOnlyError) Object.assign(headers, error.headers);
  if (error.retryAfterSeconds !== undefined) headers['Retry-After'] = String(error.retryAfterSeconds);
  return {
    status,
    slug: error.code,
    title: entry?.title ?? STATUS_CODES[status] ?? 'Error',
    detail: error.message,
    extensions: error.details,
    headers,
  };
}

/** RFC 6750 §3: a refused bearer token is answered with the challenge, and the scope that was missing. */
function authenticateHeader(error: AppError): Record<string, string> {
  if (error.kind === ErrorKind.Unauthenticated) return { 'WWW-Authenticate': 'Bearer realm="api"' };
  if (error.code === 'insufficient-scope') {
    const scope = String(error.details.required_scope);
    return { 'WWW-Authenticate': `Bearer realm="api", error="insufficient_scope", scope="${scope}"` };
  }
  return {};
}
