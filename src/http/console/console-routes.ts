import Router from '@koa/router';
import type { Context, Middleware } from 'koa';
import { HttpStatusError } from '../problems/http-errors.ts';
import { DEFAULT_CONSOLE_DIST, indexMtime, loadConsoleBundle, type ConsoleBundle, type ConsoleFile } from './console-bundle.ts';
import { CACHE_CONTROL, CONSOLE_SECURITY_HEADERS } from './console-headers.ts';

export interface ConsoleRouterOptions {
  /** The built console (deploy/build-console.sh); console/dist by default. */
  readonly distDir?: string;
}

/**
 * GET /console and every path under it: the approvals console, a single-page app that
 * talks only to /api/v1. Files of the build are served as they are; any other path
 * without a file extension gets index.html (history-API fallback), so
 * `/console/accounts/{id}/approvals` opens the app on that page. A missing file with an
 * extension (an old asset name) is a 404, never HTML in place of a script.
 *
 * @example
 * createHttpApp({ ..., routers: [consoleRouter(), ...] });
 */
export function consoleRouter(options: ConsoleRouterOptions = {}): Router {
  const distDir = options.distDir ?? DEFAULT_CONSOLE_DIST;
  let bundle: ConsoleBundle | undefined;

  /** The current build, read again when index.html changed (a rebuild while running). */
  const currentBundle = (): ConsoleBundle => {
    const mtime = indexMtime(distDir);
    if (bundle === undefined || mtime !== bundle.builtAtMs) bundle = mtime === undefined ? undefined : loadConsoleBundle(distDir);
    if (!bundle) throw new HttpStatusError(503, 'The console is not built: run `bash deploy/build-console.sh` (npm start does).');
    return bundle;
  };

  const serve = (ctx: Context) => {
    const current = currentBundle();
    const rest = typeof ctx.params?.rest === 'string' ? ctx.params.rest : '';
    const file = current.files.get(rest) ?? (looksLikeFile(rest) ? undefined : current.index);
    // Nothing set: the app's 404 problem answers.
    if (file) sendFile(ctx, file);
  };

  const router = new Router({ sensitive: true });
  router.get('/console', serve);
  router.get('/console/*rest', serve);
  return router;
}

/**
 * Sets the console's security headers on every answer under /console, whatever its method
 * or outcome: the page, its 404 and 503 problems, a 405 to a POST and a 429 of the rate
 * limiter. Mounted ahead of the limiter, since those answers never reach the router's handler.
 */
export function consoleSecurityHeaders(): Middleware {
  return async (ctx, next) => {
    if (ctx.path === '/console' || ctx.path.startsWith('/console/')) ctx.set(CONSOLE_SECURITY_HEADERS);
    await next();
  };
}

function looksLikeFile(path: string): boolean {
  const last = path.split('/').pop() ?? '';
  return last.includes('.');
}

function sendFile(ctx: Context, file: ConsoleFile): void {
  ctx.set('Cache-Control', file.immutable ? CACHE_CONTROL.immutable : CACHE_CONTROL.revalidate);
  ctx.vary('Accept-Encoding');
  const gzip = file.gzipped !== undefined && ctx.acceptsEncodings('gzip', 'identity') === 'gzip';
  ctx.status = 200;
  ctx.type = file.contentType;
  ctx.etag = gzip ? `${file.etag.slice(0, -1)}-gz"` : file.etag;
  if (ctx.fresh) {
    ctx.status = 304;
    return;
  }
  if (gzip) ctx.set('Content-Encoding', 'gzip');
  ctx.body = gzip ? file.gzipped : file.body;
}
