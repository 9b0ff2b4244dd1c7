import type { Router } from '@koa/router';
import type { Context } from 'koa';
import type { Logger } from '../log/logger.ts';
import { headerRef, json, ref, requestIdHeader } from './openapi/openapi-helpers.ts';
import { mountRoutes } from './route-table/mount-routes.ts';
import { defineRoute, type RouteDefinition } from './route-table/route-definition.ts';

/** A dependency the service needs before it can take traffic (database, NATS, …). */
export interface ReadinessCheck {
  readonly name: string;
  check(): Promise<{ ok: boolean; detail?: string }>;
}

export interface CheckResult {
  readonly ok: boolean;
  readonly detail?: string;
}

/**
 * Probes and the metrics scrape answer even under a flood: the rate limiter lets them through
 * when they come without credentials (docs/api.md). A scraper behind the same address as a
 * flooder would otherwise go blind during the very event it should record.
 */
export const HEALTH_PROBE_PATHS: ReadonlySet<string> = new Set(['/healthz', '/readyz', '/metrics']);

/** Who may read the per-check details of /readyz (they name internals: hosts, lag, errors). */
export type ReadinessAudience = (ctx: Context) => Promise<boolean>;

const LOOPBACK = /^(127\.|::1$|::ffff:127\.)/;

export function isLoopback(address: string): boolean {
  return LOOPBACK.test(address);
}

/** The default audience: only a caller on this machine (X-Forwarded-For is never trusted). */
export const loopbackOnly: ReadinessAudience = async (ctx) => isLoopback(ctx.ip);

/** A hung dependency must make the instance not ready, not hang the orchestrator's probe. */
export const READINESS_TIMEOUT_MS = 2000;

interface HealthDeps {
  readonly checks: readonly ReadinessCheck[];
  readonly logger: Logger;
  readonly mayReadDetails: ReadinessAudience;
}

const route = defineRoute<HealthDeps>();
const noStore = { ...requestIdHeader, 'Cache-Control': headerRef('NoStore') };

export const HEALTH_ROUTES: readonly RouteDefinition<HealthDeps>[] = [
  route({
    method: 'get',
    path: '/healthz',
    operationId: 'liveness',
    tags: ['operations'],
    summary: 'Liveness probe',
    description: 'The process serves requests.',
    access: 'public',
    responses: { '200': { description: 'The process serves requests.', headers: noStore, content: json(ref('Health')) } },
    handler: () => (ctx) => {
      ctx.set('Cache-Control', 'no-store');
      ctx.body = { status: 'ok' };
    },
  }),
  route({
    method: 'get',
    path: '/readyz',
    operationId: 'readiness',
    tags: ['operations'],
    summary: 'Readiness probe',
    description:
      'Ready when NATS, PostgreSQL and every projector are fine. Not a problem document: probes read the status, operators the checks. ' +
      'The per-check `checks` are shown only to a request from loopback or with an admin key (they name internals); everyone else ' +
      'gets `status` alone. Probes without credentials are never rate limited. Events parked in the projection quarantine ' +
      'are named in the `projections` detail and do not make the service unready.',
    access: 'public',
    responses: {
      '200': {
        description: 'Every check passed.',
        headers: noStore,
        content: json({ allOf: [ref('Readiness'), { type: 'object', properties: { status: { const: 'ready' } } }] }),
      },
      '503': {
        description: 'At least one check failed or timed out.',
        headers: noStore,
        content: json({ allOf: [ref('Readiness'), { type: 'object', properties: { status: { const: 'not_ready' } } }] }),
      },
    },
    handler: ({ checks, logger, mayReadDetails }) => async (ctx) => {
      const results = await Promise.all(checks.map((check) => runCheck(check, READINESS_TIMEOUT_MS)));
      const ready = results.every((result) => result.ok);
      for (const [index, result] of results.entries()) {
        if (!result.ok) logger.warn({ check: checks[index]?.name, detail: result.detail }, 'readiness check failed');
      }
      ctx.set('Cache-Control', 'no-store');
      ctx.status = ready ? 200 : 503;
      const status = ready ? 'ready' : 'not_ready';
      ctx.body = (await mayReadDetails(ctx))
        ? { status, checks: Object.fromEntries(checks.map((check, index) => [check.name, results[index]])) }
        : { status };
    },
  }),
];

/**
 * `GET /healthz` (liveness: the process serves) and `GET /readyz` (readiness: every
 * check passes). Both answer plain JSON health documents, not problems, because probes
 * read the status code and operators read the per-check details.
 */
export function createHealthRouter(checks: readonly ReadinessCheck[], logger: Logger, mayReadDetails: ReadinessAudience = loopbackOnly): Router {
  return mountRoutes(HEALTH_ROUTES, { checks, logger, mayReadDetails }, {});
}

/** Runs one check; a throw, a rejection or the timeout all count as "not ok". */
export async function runCheck(check: ReadinessCheck, timeoutMs: number): Promise<CheckResult> {
  let timer: NodeJS.Timeout | undefined;
  const timedOut = new Promise<CheckResult>((resolve) => {
    timer = setTimeout(() => resolve({ ok: false, detail: `timed out after ${timeoutMs} ms` }), timeoutMs);
  });
  const checked = Promise.resolve()
    .then(() => check.check())
    .then(
      (result): CheckResult => ({ ok: result.ok === true, detail: result.detail }),
      (error: unknown): CheckResult => ({ ok: false, detail: error instanceof Error ? error.message : String(error) }),
    );
  try {
    return await Promise.race([checked, timedOut]);
  } finally {
    clearTimeout(timer);
  }
}
