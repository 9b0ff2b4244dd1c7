import type { Router, RouterContext } from '@koa/router';
import type { Middleware } from 'koa';
import { HttpStatusError, MethodNotAllowedError } from './problems/http-errors.ts';

/** Placeholder thrown by the router; replaced below once the request's allowed methods are known. */
class MethodMismatch extends Error {}

/**
 * `router.allowedMethods()` answering with problems: 405 with `Allow` when the path
 * exists under other methods, 501 for methods the router does not know at all.
 * The router's `methodNotAllowed` factory gets no context, so the real error, which
 * needs the allowed methods for its `Allow` header, is built here.
 */
export function allowedMethods(router: Router): Middleware {
  const middleware = router.allowedMethods({
    throw: true,
    methodNotAllowed: () => new MethodMismatch(),
    notImplemented: () => new HttpStatusError(501, 'The request method is not supported by this server.'),
  });
  return async (ctx, next) => {
    const routerCtx = ctx as RouterContext;
    try {
      await middleware(routerCtx, next);
    } catch (error) {
      if (!(error instanceof MethodMismatch)) throw error;
      const allowed = new Set((routerCtx.matched ?? []).flatMap((layer) => layer.methods));
      throw new MethodNotAllowedError(ctx.method, [...allowed]);
    }
  };
}
