import { PassThrough } from 'node:stream';
import { Router } from '@koa/router';
import { ValidationError } from '../../src/errors/common-errors.ts';
import { loadConfig } from '../../src/config/config.ts';
import { createHttpApp } from '../../src/http/app.ts';
import type { ReadinessCheck } from '../../src/http/health-routes.ts';
import { startHttpServer, type HttpServer } from '../../src/http/http-server.ts';
import { readJsonBody } from '../../src/http/json-body.ts';
import { createLogger, type Logger } from '../../src/log/logger.ts';

export const PUBLIC_BASE_URL = 'https://api.example.test';
export const ECHO_LIMIT_BYTES = 1024;

/** Routes exercising each failure mode of the skeleton. */
export function testRouter(): Router {
  const router = new Router();
  router.post('/echo', async (ctx) => {
    ctx.body = { received: await readJsonBody(ctx, ECHO_LIMIT_BYTES) };
  });
  router.get('/echo', (ctx) => {
    ctx.body = { hint: 'POST JSON here' };
  });
  router.get('/only-get', (ctx) => {
    ctx.body = { ok: true };
  });
  router.get('/boom', () => {
    throw new Error('secret database password in message');
  });
  router.get('/teapot', (ctx) => {
    ctx.throw(418, 'short and stout');
  });
  router.get('/slow', async (ctx) => {
    await new Promise((resolve) => setTimeout(resolve, 300));
    ctx.body = { slow: true };
  });
  // A stream that goes on until the client leaves (as an SSE stream does).
  router.get('/stream', (ctx) => {
    const body = new PassThrough();
    body.write('data: first\n\n');
    const timer = setInterval(() => body.write(': keep-alive\n\n'), 20);
    body.on('close', () => clearInterval(timer));
    ctx.type = 'text/event-stream';
    ctx.body = body;
  });
  // Refuses the request (422) once its client has already gone.
  router.get('/refuse-after-leave', async (ctx) => {
    await new Promise((resolve) => ctx.req.socket.once('close', resolve));
    throw new ValidationError('refused after the client left');
  });
  return router;
}

/** Starts the app on an ephemeral port with the test router and the given readiness checks. */
export function startTestServer(options: { readiness?: ReadinessCheck[]; logger?: Logger } = {}): Promise<HttpServer> {
  const config = loadConfig({ PUBLIC_BASE_URL, PORT: '0', LOG_LEVEL: 'silent' });
  const logger = options.logger ?? createLogger('silent');
  const app = createHttpApp({ config, logger, routers: [testRouter()], readiness: options.readiness ?? [] });
  return startHttpServer(app, { host: '127.0.0.1', port: 0, logger });
}
