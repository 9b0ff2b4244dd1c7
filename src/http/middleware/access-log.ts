import type { Middleware } from 'koa';
import type { Logger } from '../../log/logger.ts';
import { requestIdOf } from './request-id.ts';

/**
 * One log line per request. Only method, path (without query, which may carry tokens),
 * status, duration and request id: headers and bodies can hold secrets and personal data.
 */
/** Receives every finished request; `route` is the matched route template, never the raw path. */
export type RequestObserver = (method: string, route: string, status: number, seconds: number) => void;

export function accessLog(logger: Logger, observe?: RequestObserver): Middleware {
  return async (ctx, next) => {
    const started = process.hrtime.bigint();
    let escapedStatus: number | undefined;
    try {
      await next();
    } catch (error) {
      // The error handler sits inside this middleware, so this is only a safety net; koa answers 500.
      escapedStatus = 500;
      throw error;
    } finally {
      const durationMs = Number(process.hrtime.bigint() - started) / 1e6;
      const route = (ctx as { _matchedRoute?: string })._matchedRoute ?? 'unmatched';
      observe?.(ctx.method, typeof route === 'string' ? route : 'unmatched', escapedStatus ?? ctx.status, durationMs / 1000);
      // Below info (e.g. LOG_LEVEL=warn) the line is not even built.
      if (logger.isLevelEnabled('info')) logger.info(
        {
          method: ctx.method,
          path: ctx.path,
          status: escapedStatus ?? ctx.status,
          duration_ms: Math.round(durationMs * 1000) / 1000,
          request_id: requestIdOf(ctx),
        },
        'http request',
      );
    }
  };
}
