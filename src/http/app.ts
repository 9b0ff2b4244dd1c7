import type { Router } from '@koa/router';
import Koa, { type Middleware } from 'koa';
import type { Config } from '../config/config.ts';
import type { Logger } from '../log/logger.ts';
import { allowedMethods } from './allowed-methods.ts';
import { fastLaneGateFor, fastLaneHandler, fastLaneOf, type FastLane, type FastLaneRunnerOptions } from './fast-lane.ts';
import { consoleRouter, consoleSecurityHeaders } from './console/console-routes.ts';
import { createHealthRouter, type ReadinessAudience, type ReadinessCheck } from './health-routes.ts';
import { rejectHostileQuery } from './hostile-text-guard.ts';
import { accessLog, type RequestObserver } from './middleware/access-log.ts';
import { errorHandler } from './middleware/error-handler.ts';
import { requestId, requestIdOf } from './middleware/request-id.ts';
import { apiResponseHeaders } from './middleware/api-response-headers.ts';
import { routeNotFound } from './middleware/route-not-found.ts';
import { problemPagesRouter } from './problems/problem-pages.ts';

export interface HttpAppOptions {
  readonly config: Config;
  readonly logger: Logger;
  readonly routers: readonly Router[];
  readonly readiness: readonly ReadinessCheck[];
  /** Sees every finished request (metrics). */
  readonly observeRequest?: RequestObserver;
  /** Who sees /readyz's per-check details; loopback only when not given. */
  readonly readinessAudience?: ReadinessAudience;
  /** Run inside the error handler, before any route (the rate limiter). */
  readonly beforeRoutes?: readonly Middleware[];
  /**
   * Whether the problem-type pages and the console are served (default true). A process without
   * the http role serves only health and metrics: it holds no API keys and answers no client.
   */
  readonly publicPages?: boolean;
}

/**
 * Koa with GET fast lanes (src/http/fast-lane.ts) in front: a request a lane answers never
 * reaches koa; every other one goes through koa unchanged.
 */
class KoaWithFastLanes extends Koa {
  readonly #fastLanes: FastLaneRunnerOptions;

  constructor(fastLanes: FastLaneRunnerOptions) {
    super({ proxy: false });
    this.#fastLanes = fastLanes;
  }

  override callback(): ReturnType<Koa['callback']> {
    const koa = super.callback();
    const handler = fastLaneHandler(this.#fastLanes, koa as Parameters<typeof fastLaneHandler>[1]);
    return handler as ReturnType<Koa['callback']>;
  }
}

const CLIENT_GONE_CODES: ReadonlySet<string> = new Set(['ERR_STREAM_PREMATURE_CLOSE', 'ECONNRESET', 'EPIPE', 'ERR_STREAM_DESTROYED']);

/** The send failed because the client closed its connection. */
function clientLeft(error: unknown, ctx: Koa.Context): boolean {
  const code = (error as { code?: unknown } | null)?.code;
  return typeof code === 'string' && CLIENT_GONE_CODES.has(code) && (ctx.req.destroyed || ctx.res.destroyed || ctx.req.socket?.destroyed === true);
}

/**
 * Assembles the Koa app: request id → API response headers → access log → error handler → the
 * console's security headers (on every /console answer, 405 and 429 included) → rate limiter →
 * 404 fallback → health routes, problem pages and the console (static) → feature routers (each
 * followed by its 405/501 handling).
 * The order matters: the access log must see the status the error handler set, and
 * both need the request id. Routers that carry a fast lane get it run before koa, when the
 * before-routes middleware can stand aside for it (src/http/fast-lane.ts).
 */
export function createHttpApp(options: HttpAppOptions): Koa {
  const { config, logger } = options;
  const lanes = options.routers.map(fastLaneOf).filter((lane): lane is FastLane => lane !== undefined);
  const gate = fastLaneGateFor(options.beforeRoutes ?? []);
  // Never trust X-Forwarded-*: nothing here depends on the client address or scheme.
  const app = lanes.length > 0 && gate
    ? new KoaWithFastLanes({ lanes, gate, logger, ...(options.observeRequest ? { observeRequest: options.observeRequest } : {}) })
    : new Koa({ proxy: false });
  app.proxy = false;
  app.silent = true;
  // Only errors after the response started (e.g. a failing body stream) get here; the error handler catches the rest.
  app.on('error', (error: unknown, ctx?: Koa.Context) => {
    // A client that goes away mid-body (an EventSource closed, a tab, a proxy's timeout) is the
    // ordinary end of a stream, not a fault: at error level it would drown the real ones.
    if (ctx && clientLeft(error, ctx)) {
      logger.debug({ request_id: requestIdOf(ctx), code: (error as { code?: string }).code }, 'client closed the connection while the response was sent');
      return;
    }
    logger.error({ err: error, request_id: ctx ? requestIdOf(ctx) : undefined }, 'error while sending a response');
  });

  app.use(requestId());
  app.use(apiResponseHeaders());
  app.use(accessLog(logger, options.observeRequest));
  app.use(errorHandler({ logger, publicBaseUrl: config.publicBaseUrl }));
  if (options.publicPages !== false) app.use(consoleSecurityHeaders());
  for (const middleware of options.beforeRoutes ?? []) app.use(middleware);
  app.use(routeNotFound());
  app.use(rejectHostileQuery());
  const health = createHealthRouter(options.readiness, logger, options.readinessAudience);
  const builtIn = options.publicPages === false ? [health] : [health, problemPagesRouter(config.publicBaseUrl), consoleRouter()];
  for (const router of [...builtIn, ...options.routers]) {
    app.use(router.routes());
    app.use(allowedMethods(router));
  }
  return app;
}
