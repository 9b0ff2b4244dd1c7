import { expect } from 'chai';
import type { ReadinessCheck } from '../../src/http/health-routes.ts';
import type { HttpServer } from '../../src/http/http-server.ts';
import { startTestServer } from './http-test-app.ts';

const passing = (name: string): ReadinessCheck => ({ name, check: async () => ({ ok: true }) });

describe('GET /readyz', () => {
  let server: HttpServer | undefined;
  afterEach(async () => {
    await server?.stop(1000);
    server = undefined;
  });

  it('answers 200 when every check passes', async () => {
    server = await startTestServer({ readiness: [passing('database'), { name: 'nats', check: async () => ({ ok: true, detail: 'connected' }) }] });
    const response = await fetch(`${server.url}/readyz`);
    expect(response.status).to.equal(200);
    expect(response.headers.get('content-type')).to.match(/^application\/json/);
    expect(await response.json()).to.deep.equal({
      status: 'ready',
      checks: { database: { ok: true }, nats: { ok: true, detail: 'connected' } },
    });
  });

  it('answers 503 when a check fails or throws', async () => {
    server = await startTestServer({
      readiness: [
        passing('database'),
        { name: 'nats', check: async () => ({ ok: false, detail: 'disconnected' }) },
        { name: 'exploding', check: () => { throw new Error('kaput'); } },
      ],
    });
    const response = await fetch(`${server.url}/readyz`);
    expect(response.status).to.equal(503);
    expect(response.headers.get('content-type')).to.match(/^application\/json/);
    expect(await response.json()).to.deep.equal({
      status: 'not_ready',
      checks: { database: { ok: true }, nats: { ok: false, detail: 'disconnected' }, exploding: { ok: false, detail: 'kaput' } },
    });
  });

  it('answers 503 when a check hangs past the 2 s timeout', async () => {
    server = await startTestServer({ readiness: [passing('database'), { name: 'hung', check: () => new Promise(() => {}) }] });
    const started = Date.now();
    const response = await fetch(`${server.url}/readyz`);
    const elapsed = Date.now() - started;
    expect(response.status).to.equal(503);
    const body = (await response.json()) as { status: string; checks: Record<string, { ok: boolean; detail?: string }> };
    expect(body.status).to.equal('not_ready');
    expect(body.checks.database).to.deep.equal({ ok: true });
    expect(body.checks.hung?.ok).to.equal(false);
    expect(body.checks.hung?.detail).to.match(/timed out/);
    expect(elapsed).to.be.within(1900, 5000);
  });
});
