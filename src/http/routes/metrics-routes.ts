import Router from '@koa/router';
import type { Registry } from 'prom-client';

/**
 * GET /metrics in the Prometheus text format. Unauthenticated like /healthz: it holds no
 * tenant data; expose it only on the internal network.
 */
export function metricsRouter(registry: Registry): Router {
  const router = new Router();
  router.get('/metrics', async (ctx) => {
    ctx.type = registry.contentType;
    ctx.body = await registry.metrics();
  });
  return router;
}
