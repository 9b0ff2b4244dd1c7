import { Router } from '@koa/router';
import type { Context, Middleware } from 'koa';
import { authenticate, principalOf } from '../../auth/authenticate.ts';
import type { KeyDirectory } from '../../auth/key-directory.ts';
import type { Principal } from '../../auth/scopes.ts';
import { readJsonBody } from '../json-body.ts';
import { readOptionalJsonBody } from './optional-json-body.ts';
import { koaPath, resolveLimits, type RouteDefinition, type RouteLimits, type RouteRequest } from './route-definition.ts';
import { bodyValidator, pathParameterValidator, queryValidator } from './request-validators.ts';

export interface MountOptions {
  /** Needed by routes with a body. */
  readonly limits?: RouteLimits;
  /** Needed as soon as one route is not public. */
  readonly keys?: KeyDirectory;
}

/** Only /api routes refuse unknown query parameters: probes and /metrics take whatever a scraper appends. */
function validatesQuery(path: string): boolean {
  return path.startsWith('/api/');
}

/**
 * Mounts routes of the table on one koa router: authentication and scope from `access`,
 * path parameters (a value that cannot exist is the resource's 404), the query (422 naming
 * each unknown or bad parameter), and a body reader that validates against the route's
 * schema when the handler asks for it.
 *
 * @example
 * ```ts
 * const router = mountRoutes(RUN_ROUTES, api, { limits: api.config, keys: api.keys });
 * ```
 */
export function mountRoutes<D>(routes: readonly RouteDefinition<D>[], deps: D, options: MountOptions): Router {
  const router = new Router({ sensitive: true });
  for (const route of routes) {
    const middleware: Middleware[] = [];
    if (route.access !== 'public') {
      if (!options.keys) throw new Error(`${route.operationId} needs an API key, but no key directory was given`);
      // Authentication and the scope check in one layer: one async frame fewer on every API request.
      middleware.push(authenticate(options.keys, route.access));
    }
    const params = Object.entries(route.pathParameters ?? {}).map(([name, p]) => [name, pathParameterValidator(p.schema, p.notFound)] as const);
    const query = validatesQuery(route.path) ? queryValidator(route.query ?? {}, route.queryMessages) : null;
    const limits = options.limits;
    if (route.body && !limits) throw new Error(`${route.operationId} reads a body, but no limits were given`);
    const body = route.body && limits ? bodyValidator(resolveLimits(route.body.schema, limits), route.body.messages) : null;
    const absentIsEmptyObject = route.body?.absentIsEmptyObject ?? !route.body?.required;
    const handler = route.handler(deps);

    middleware.push(async (ctx: Context) => {
      const routerParams = (ctx as Context & { params: Record<string, string> }).params;
      for (const [name, validate] of params) validate(routerParams[name] ?? '');
      const request: RouteRequest<unknown, unknown> = {
        get principal(): Principal {
          return principalOf(ctx);
        },
        params: routerParams,
        query: query ? query(ctx.query) : ctx.query,
        body: async () => {
          if (!body || !limits) throw new Error(`${route.operationId} declares no body`);
          return body(absentIsEmptyObject ? await readOptionalJsonBody(ctx, limits.bodyLimitBytes) : await readJsonBody(ctx, limits.bodyLimitBytes));
        },
      };
      await handler(ctx, request);
    });
    router.register(koaPath(route.path), [route.method.toUpperCase()], middleware);
  }
  return router;
}
