import type { Middleware } from 'koa';

/**
 * Headers every `/api/` answer carries, problems included (set once the error handler has
 * answered, which keeps only the request's envelope headers on a problem):
 * - `Cache-Control: no-store` unless the route set its own: answers are per API key (an
 *   account's data, a problem naming it), so no cache on the way may keep one; a route that
 *   may be cached (a terminal run, the public documents) says so itself.
 * - `X-Content-Type-Options: nosniff`: a JSON answer holding text a model or a platform wrote
 *   is never sniffed into something a browser would run.
 * The GET fast lanes write the same headers themselves (src/http/fast-lane.ts). An answer
 * already streaming (server-sent events) has sent its headers, and keeps them.
 */
export const API_RESPONSE_HEADERS = ['X-Content-Type-Options', 'nosniff'] as const;

export function apiResponseHeaders(): Middleware {
  return async (ctx, next) => {
    await next();
    if (!ctx.path.startsWith('/api/') || ctx.headerSent) return;
    if (!ctx.res.hasHeader('Cache-Control')) ctx.set('Cache-Control', 'no-store');
    ctx.set(API_RESPONSE_HEADERS[0], API_RESPONSE_HEADERS[1]);
  };
}
