import type { Middleware } from 'koa';
import { RouteNotFoundError } from '../problems/http-errors.ts';

/**
 * Turns "nothing answered" into a 404 problem. It wraps the routers instead of sitting
 * at the end of the chain: a terminal middleware that throws would fire before the
 * routers' `allowedMethods` (which act after `next()` returns) could answer 405.
 */
export function routeNotFound(): Middleware {
  return async (ctx, next) => {
    await next();
    if (ctx.status === 404 && ctx.body == null) throw new RouteNotFoundError(ctx.method, ctx.path);
  };
}
