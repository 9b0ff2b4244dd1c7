import { Router } from '@koa/router';
import type { Context } from 'koa';
import type { Logger } from '../log/logger.ts';

/** A dependency the service needs before it can take traffic (database, NATS, …). */
export interface ReadinessCheck {
  readonly name: string;
  check(): Promise<{ ok: boolean; detail?: string }>;
}

export interface CheckResult {
  readonly ok: boolean;
  readonly detail?: string;
}

/** Probes answer even under a flood: the rate limiter lets them through (docs/api.md). */
export const HEALTH_PROBE_PATHS: ReadonlySet<string> = new Set(['/healthz', '/readyz']);

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

/**
 * `GET /healthz` (liveness: the process serves) and `GET /readyz` (readiness: every
 * check passes). Both answer plain JSON health documents, not problems, because probes
 * read the status code and operators read the per-check details.
 */
export function createHealthRouter(checks: readonly ReadinessCheck[], logger: Logger, mayReadDetails: ReadinessAudience = loopbackOnly): Router {
  const router = new Router();
  router.get('/healthz', (ctx) => {
    ctx.set('Cache-Control', 'no-store');
    ctx.body = { status: 'ok' };
  });
  router.get('/readyz', async (ctx) => {
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
  });
  return router;
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
