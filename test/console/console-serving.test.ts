import { expect } from 'chai';
import { request, type IncomingHttpHeaders } from 'node:http';
import { gunzipSync } from 'node:zlib';
import { startTestService, type TestService } from '../support/test-service.ts';
import { prepareConsole } from './support/console-browser.ts';

/** The static route of the console (src/http/console): fallback, types, caching, CSP, gzip. */
describe('console: served by the service', function () {
  this.timeout(120_000);
  let svc: TestService;

  before(async () => {
    prepareConsole();
    svc = await startTestService('console-serving');
  });
  after(async () => {
    await svc?.stop();
  });

  const get = (path: string, headers: Record<string, string> = {}) => fetch(`${svc.baseUrl}${path}`, { headers });

  it('answers every console page with index.html, not cached, under a strict CSP', async () => {
    for (const path of ['/console', '/console/', '/console/accounts/abc/approvals', '/console/runs/0190-x', '/console/accounts/abc/history']) {
      const response = await get(path);
      expect(response.status, path).to.equal(200);
      expect(response.headers.get('content-type'), path).to.equal('text/html; charset=utf-8');
      expect(response.headers.get('cache-control'), path).to.equal('no-cache');
      const csp = response.headers.get('content-security-policy') ?? '';
      expect(csp).to.include("default-src 'none'").and.include("script-src 'self'").and.include("form-action 'none'").and.include("frame-ancestors 'none'");
      expect(csp).to.not.include('unsafe-inline').and.not.include('unsafe-eval');
      expect(response.headers.get('x-content-type-options')).to.equal('nosniff');
      const html = await response.text();
      expect(html).to.include('<div id="app"></div>').and.match(/src="\/console\/assets\/[^"]+\.js"/);
    }
  });

  it('serves hashed assets with their type, a year of caching, gzip and 304 on revalidation', async () => {
    const html = await (await get('/console')).text();
    const script = /src="(\/console\/assets\/[^"]+\.js)"/.exec(html)![1]!;
    const style = /href="(\/console\/assets\/[^"]+\.css)"/.exec(html)![1]!;
    const plain = await rawGet(`${svc.baseUrl}${script}`, { 'accept-encoding': 'identity' });
    expect(plain.status).to.equal(200);
    expect(plain.headers['content-type']).to.equal('text/javascript; charset=utf-8');
    expect(plain.headers['cache-control']).to.equal('public, max-age=31536000, immutable');
    expect(plain.headers['content-encoding']).to.equal(undefined);
    const gz = await rawGet(`${svc.baseUrl}${script}`, { 'accept-encoding': 'gzip, br' });
    expect(gz.headers['content-encoding']).to.equal('gzip');
    expect(gz.headers.vary).to.match(/accept-encoding/i);
    expect(gz.body.length).to.be.below(plain.body.length);
    expect(gunzipSync(gz.body).equals(plain.body)).to.equal(true);
    for (const variant of [plain, gz]) {
      const again = await rawGet(`${svc.baseUrl}${script}`, {
        'accept-encoding': variant === gz ? 'gzip' : 'identity',
        'if-none-match': String(variant.headers.etag),
      });
      expect(again.status).to.equal(304);
      expect(again.body.length).to.equal(0);
    }
    const css = await get(style);
    expect(css.headers.get('content-type')).to.equal('text/css; charset=utf-8');
  });

  it('answers a missing asset with a 404 problem, never with the page', async () => {
    for (const path of ['/console/assets/nope-123.js', '/console/favicon.ico', '/console/..%2f..%2fpackage.json', '/console/%2e%2e/%2e%2e/package.json']) {
      const response = await get(path);
      expect(response.status, path).to.equal(404);
      expect(response.headers.get('content-type'), path).to.match(/^application\/problem\+json/);
      // fetch resolves %2e%2e, so the last path asks for /package.json, outside the console.
      if (new URL(response.url).pathname.startsWith('/console/')) expect(response.headers.get('content-security-policy'), path).to.include("default-src 'none'");
    }
  });

  it('answers other methods with 405, under the same security headers', async () => {
    for (const path of ['/console', '/console/accounts/x/approvals']) {
      const response = await fetch(`${svc.baseUrl}${path}`, { method: 'POST' });
      expect(response.status, path).to.equal(405);
      expect(response.headers.get('allow'), path).to.include('GET');
      expect(response.headers.get('content-security-policy'), path).to.include("default-src 'none'");
      expect(response.headers.get('x-content-type-options'), path).to.equal('nosniff');
      expect(response.headers.get('x-frame-options'), path).to.equal('DENY');
    }
  });
});

/** node's fetch decodes gzip and sets Accept-Encoding itself; this sends the headers as given. */
function rawGet(url: string, headers: Record<string, string>): Promise<{ status: number; headers: IncomingHttpHeaders; body: Buffer }> {
  return new Promise((resolve, reject) => {
    request(url, { headers }, (response) => {
      const chunks: Buffer[] = [];
      response.on('data', (chunk: Buffer) => chunks.push(chunk));
      response.on('end', () => resolve({ status: response.statusCode ?? 0, headers: response.headers, body: Buffer.concat(chunks) }));
    }).on('error', reject).end();
  });
}

describe('console: deploy/build-console.sh', function () {
  this.timeout(120_000);

  it('builds only when a source is newer than the build', async () => {
    const { execFileSync } = await import('node:child_process');
    const { statSync, utimesSync } = await import('node:fs');
    const root = new URL('../../', import.meta.url).pathname;
    const index = `${root}console/dist/index.html`;
    const build = () => execFileSync('bash', ['deploy/build-console.sh'], { cwd: root, encoding: 'utf8', stdio: ['ignore', 'pipe', 'pipe'] });
    build();
    const builtAt = statSync(index).mtimeMs;
    build();
    expect(statSync(index).mtimeMs, 'an up-to-date build is left alone').to.equal(builtAt);
    // A source touched after the build makes the next call build again.
    const source = `${root}console/src/main.tsx`;
    const later = new Date(builtAt + 2_000);
    utimesSync(source, later, later);
    build();
    expect(statSync(index).mtimeMs).to.be.above(builtAt);
  });
});
