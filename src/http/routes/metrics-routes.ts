import type { Router } from '@koa/router';
import type { Registry } from 'prom-client';
import { requestIdHeader } from '../openapi/openapi-helpers.ts';
import { mountRoutes } from '../route-table/mount-routes.ts';
import { defineRoute, type RouteDefinition } from '../route-table/route-definition.ts';

export const METRICS_ROUTES: readonly RouteDefinition<Registry>[] = [
  defineRoute<Registry>()({
    method: 'get',
    path: '/metrics',
    operationId: 'metrics',
    tags: ['operations'],
    summary: 'Prometheus metrics',
    description:
      'The Prometheus text exposition format: requests by route template, runs by outcome, apply results, projector checkpoints, ' +
      'lag and stalls, and process metrics. Unauthenticated like the probes: it holds no tenant data; expose it only on the internal network.',
    access: 'public',
    responses: {
      '200': {
        description: 'The current metrics.',
        headers: requestIdHeader,
        content: { 'text/plain': { schema: { type: 'string', minLength: 1, description: 'Prometheus text format 0.0.4.' } } },
      },
    },
    handler: (registry) => async (ctx) => {
      ctx.type = registry.contentType;
      ctx.body = await registry.metrics();
    },
  }),
];

/**
 * GET /metrics in the Prometheus text format. Unauthenticated like /healthz: it holds no
 * tenant data; expose it only on the internal network.
 */
export function metricsRouter(registry: Registry): Router {
  return mountRoutes(METRICS_ROUTES, registry, {});
}
