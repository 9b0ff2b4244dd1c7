import Koa from 'koa';
import type { Registry } from 'prom-client';
import type { Config } from '../config/config.ts';
import type { Logger } from '../log/logger.ts';
import { allowedMethods } from './allowed-methods.ts';
import { createHealthRouter, type ReadinessCheck } from './health-routes.ts';
import { accessLog } from './middleware/access-log.ts';
import { errorHandler } from './middleware/error-handler.ts';
import { requestId, requestIdOf } from './middleware/request-id.ts';
import { routeNotFound } from './middleware/route-not-found.ts';
import { metricsRouter } from './routes/metrics-routes.ts';

export interface OperationsAppOptions {
  readonly config: Config;
  readonly logger: Logger;
  readonly readiness: readonly ReadinessCheck[];
  readonly registry: Registry;
}

/**
 * What a process without the `http` role serves on its port: `/healthz`, `/readyz` and
 * `/metrics`, nothing else. A worker or projector process scaled out on its own must still be
 * probed by its orchestrator and scraped by Prometheus (its runs finished, parked messages,
 * projector lag and agent step timings are counted in that process alone), but it holds no API
 * keys and answers no tenant request. The same middleware as the API app, so a wrong path or
 * method gets the same problem+json answer and every request its id and access-log line.
 *
 * @example
 * const app = createOperationsApp({ config, logger, readiness: readinessChecks({ infrastructure, projectors }), registry: metrics.registry });
 * const server = await startHttpServer(app, { host: config.host, port: config.port, logger, publicBaseUrl: config.publicBaseUrl });
 */
export function createOperationsApp(options: OperationsAppOptions): Koa {
  const { config, logger } = options;
  const app = new Koa({ proxy: false });
  app.silent = true;
  // Only errors after the response started (a failing body) get here; the error handler catches the rest.
  app.on('error', (error: unknown, ctx?: Koa.Context) => {
    logger.error({ err: error, request_id: ctx ? requestIdOf(ctx) : undefined }, 'error while sending a response');
  });
  app.use(requestId());
  app.use(accessLog(logger));
  app.use(errorHandler({ logger, publicBaseUrl: config.publicBaseUrl }));
  app.use(routeNotFound());
  // Details of each readiness check only for loopback callers: there are no API keys here to tell an admin by.
  for (const router of [createHealthRouter(options.readiness, logger), metricsRouter(options.registry)]) {
    app.use(router.routes());
    app.use(allowedMethods(router));
  }
  return app;
}
