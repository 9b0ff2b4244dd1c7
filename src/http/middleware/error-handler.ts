import type { Context, Middleware } from 'koa';
import { isAppError, type AppError } from '../../errors/app-error.ts';
import { unavailableError } from '../../errors/infrastructure-errors.ts';
import type { Logger } from '../../log/logger.ts';
import { writeProblem } from '../problem-response.ts';
import { HttpStatusError, InternalError } from '../problems/http-errors.ts';
import { toHttpProblem } from '../problems/problem-mapping.ts';
import { requestIdOf } from './request-id.ts';
import { CONSOLE_SECURITY_HEADERS } from '../console/console-headers.ts';

/** Shape of http-errors (used by `ctx.throw`, @koa/router and raw-body). */
interface HttpLikeError {
  readonly status: number;
  readonly expose: boolean;
  readonly message: string;
  readonly headers?: unknown;
}

function isHttpLikeError(error: unknown): error is HttpLikeError {
  if (typeof error !== 'object' || error === null) return false;
  const { status, expose } = error as Partial<HttpLikeError>;
  return typeof status === 'number' && Number.isInteger(status) && status >= 400 && status <= 599 && typeof expose === 'boolean';
}

function stringHeaders(headers: unknown): Record<string, string> | undefined {
  if (typeof headers !== 'object' || headers === null) return undefined;
  const entries = Object.entries(headers).filter((entry): entry is [string, string] => typeof entry[1] === 'string');
  return entries.length > 0 ? Object.fromEntries(entries) : undefined;
}

/**
 * Turns every error into a problem response, so clients only ever see RFC 9457 bodies
 * and never a stack trace. Unexpected errors are logged in full under the request id
 * that the client is told to quote.
 */
export function errorHandler(options: { logger: Logger; publicBaseUrl: string }): Middleware {
  const { logger, publicBaseUrl } = options;
  return async (ctx, next) => {
    try {
      await next();
    } catch (error) {
      const requestId = requestIdOf(ctx);
      const problem = toAppError(error, ctx, requestId, logger);
      if (ctx.headerSent || !ctx.writable) {
        logger.warn({ request_id: requestId, problem: problem.code }, 'error after response started; cannot send problem');
        // The access log and the metrics count what was answered, or would have been: koa's
        // default status (404) would count a 429 or a 5xx of a client that left as "not found".
        if (!ctx.headerSent) ctx.status = toHttpProblem(problem).status;
        return;
      }
      keepOnlyEnvelopeHeaders(ctx);
      writeProblem(ctx, problem, { publicBaseUrl, requestId });
    }
  };
}

function toAppError(error: unknown, ctx: Context, requestId: string, logger: Logger): AppError {
  const where = { request_id: requestId, method: ctx.method, path: ctx.path };
  if (isAppError(error)) {
    if (toHttpProblem(error).status >= 500) logger.warn({ ...where, err: error, problem: error.code }, 'request failed with a server-side problem');
    return error;
  }
  if (isHttpLikeError(error)) {
    if (error.status >= 500) logger.error({ ...where, err: error }, 'request failed with a server error');
    // `expose` is false for 5xx and for messages not meant for clients.
    return error.expose
      ? new HttpStatusError(error.status, error.message, stringHeaders(error.headers))
      : new HttpStatusError(error.status);
  }
  const unavailable = unavailableError(error);
  if (unavailable) {
    logger.warn({ ...where, err: error instanceof Error ? error.message : String(error) }, 'backing service unavailable; answered 503');
    return unavailable;
  }
  logger.error({ ...where, err: error }, 'unhandled error');
  return new InternalError(requestId);
}

/**
 * Headers that describe the request, not the handler's answer: they stay on a problem response.
 * So do the console's security headers (CONSOLE_SECURITY_HEADERS): set for every path under
 * /console, they belong on its 404 and 503 problems too.
 */
const ENVELOPE_HEADERS = new Set([
  'x-request-id',
  'ratelimit',
  'ratelimit-policy',
  ...Object.keys(CONSOLE_SECURITY_HEADERS).map((name) => name.toLowerCase()),
]);

/** Headers a handler set before failing (Content-Disposition, caching…) must not leak onto the problem. */
function keepOnlyEnvelopeHeaders(ctx: Context): void {
  for (const name of ctx.res.getHeaderNames()) {
    if (!ENVELOPE_HEADERS.has(name)) ctx.res.removeHeader(name);
  }
}
