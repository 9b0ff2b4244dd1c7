import { expect } from 'chai';
import { generateApiKey } from '../../src/auth/api-key.ts';
import { loadConfig, type Config } from '../../src/config/config.ts';
import { createLogger } from '../../src/log/logger.ts';
import { revokeKey } from '../../src/operator/operator-commands.ts';
import { startService } from '../../src/runtime/service.ts';
import { serviceEnv } from '../support/cli.ts';
import { startTestService, type TestService, type TestTenant } from '../support/test-service.ts';
import { API_TEST_ROLES, call, expectProblem, type ApiResult } from '../api/support/api-call.ts';

const KEY_RPS = 1;
const KEY_BURST = 40;
const ANONYMOUS_RPS = 1;
const ANONYMOUS_BURST = 5;

/** The environment of another process of the same deployment (same stream, schema, limits). */
function sameDeployment(config: Config): Record<string, string> {
  return {
    ...serviceEnv(config),
    PORT: '0',
    RATE_LIMIT_RPS: String(config.rateLimitRps),
    RATE_LIMIT_BURST: String(config.rateLimitBurst),
    RATE_LIMIT_ANONYMOUS_RPS: String(config.rateLimitAnonymousRps),
    RATE_LIMIT_ANONYMOUS_BURST: String(config.rateLimitAnonymousBurst),
  };
}

/** A well-formed key whose id no workspace has. */
const madeUpKey = (): string => generateApiKey().key;

/** Requests one may have earned back while a burst ran. */
const refilledDuring = (startedMs: number, rps: number): number => Math.ceil(((performance.now() - startedMs) / 1000) * rps);

async function keyLookups(svc: TestService, observerKey: string): Promise<Record<string, number>> {
  const response = await svc.request('GET', '/metrics', { key: observerKey });
  const text = await response.text();
  const counts: Record<string, number> = {};
  for (const match of text.matchAll(/^api_key_lookups_total\{source="([a-z_]+)"\} (\d+)/gm)) counts[match[1]!] = Number(match[2]);
  return counts;
}

describe('rate limits', function () {
  this.timeout(60_000);

  describe('per API key', () => {
    let svc: TestService;
    let tenant: TestTenant;
    let other: TestTenant;

    before(async () => {
      svc = await startTestService('rate-limit-key', {
        ROLES: API_TEST_ROLES,
        RATE_LIMIT_RPS: String(KEY_RPS),
        RATE_LIMIT_BURST: String(KEY_BURST),
        RATE_LIMIT_ANONYMOUS_RPS: String(ANONYMOUS_RPS),
        RATE_LIMIT_ANONYMOUS_BURST: String(ANONYMOUS_BURST),
      });
      [tenant, other] = await Promise.all([svc.tenant('limit-a'), svc.tenant('limit-b')]);
    });

    after(async () => {
      await svc?.stop();
    });

    it('answers a burst of 200 from one key with its burst of 200s, then 429 + Retry-After, while a key of another workspace gets 200', async () => {
      const started = performance.now();
      const burst = Array.from({ length: 200 }, () => call(svc, 'GET', '/api/v1/accounts', { key: tenant.keys.read }));
      const bystander = call(svc, 'GET', '/api/v1/accounts', { key: other.keys.read });
      const results = await Promise.all(burst);
      const earned = refilledDuring(started, KEY_RPS);
      expect((await bystander).status, 'another workspace is not slowed down').to.equal(200);

      const passed = results.filter((r) => r.status === 200);
      const limited = results.filter((r) => r.status === 429);
      expect(passed.length + limited.length, 'only 200 or 429').to.equal(200);
      expect(passed.length).to.be.within(KEY_BURST, KEY_BURST + earned);
      for (const result of limited) {
        expectProblem(result, 429, 'rate-limited');
        expect(result.body.policy).to.equal('api-key');
        expect(Number(result.headers.get('retry-after'))).to.be.within(1, 1 / KEY_RPS);
      }
      for (const result of results) {
        expect(result.headers.get('ratelimit-policy')).to.equal(`"api-key";q=${KEY_BURST};w=${KEY_BURST / KEY_RPS}`);
        expect(result.headers.get('ratelimit')).to.match(/^"api-key";r=\d+;t=\d+$/);
      }
      const remaining = passed.map((r) => Number(/r=(\d+)/.exec(r.headers.get('ratelimit')!)![1]));
      expect(Math.min(...remaining)).to.equal(0);
      expect(Math.max(...remaining)).to.be.at.least(KEY_BURST - 1 - earned);
      expect(limited.every((r) => /;r=0;/.test(r.headers.get('ratelimit')!))).to.equal(true);
    });

    it('lets the key through again once a token has refilled', async () => {
      const limited = await call(svc, 'GET', '/api/v1/accounts', { key: tenant.keys.read });
      expect(limited.status).to.equal(429);
      await new Promise((resolve) => setTimeout(resolve, Number(limited.headers.get('retry-after')) * 1000));
      expect((await call(svc, 'GET', '/api/v1/accounts', { key: tenant.keys.read })).status).to.equal(200);
    });

    it('puts the headers on problem responses of limited requests too (404, 422)', async () => {
      const notFound = await call(svc, 'GET', '/api/v1/runs/0190aaaa-0000-7000-8000-000000000000', { key: other.keys.write });
      expectProblem(notFound, 404, 'run-not-found');
      expect(notFound.headers.get('ratelimit-policy')).to.match(/^"api-key";/);
      expect(notFound.headers.get('ratelimit')).to.match(/^"api-key";r=\d+;t=\d+$/);
      const invalid = await call(svc, 'POST', '/api/v1/runs', { key: other.keys.write, body: { brief: '' } });
      expectProblem(invalid, 422, 'validation-error');
      expect(invalid.headers.get('ratelimit')).to.match(/^"api-key";/);
    });

    it('charges a valid key id presented with a wrong secret to the address, not to the key', async () => {
      const fresh = await svc.tenant('limit-c');
      const keyId = fresh.keys.write.slice(3, 35);
      const forged = `ak_${keyId}_${'A'.repeat(43)}`;
      const forgedResults: ApiResult[] = [];
      for (let i = 0; i < ANONYMOUS_BURST + 3; i++) forgedResults.push(await call(svc, 'GET', '/api/v1/accounts', { key: forged }));
      expect(forgedResults.map((r) => r.status).filter((s) => s === 429).length).to.be.at.least(1);
      expect(forgedResults.every((r) => /^"client-address";/.test(r.headers.get('ratelimit-policy')!))).to.equal(true);
      const real = await call(svc, 'GET', '/api/v1/accounts', { key: fresh.keys.write });
      expect(real.status).to.equal(200);
      expect(real.headers.get('ratelimit')).to.match(new RegExp(`^"api-key";r=${KEY_BURST - 1};`));
    });

    it('counts refusals per policy in /metrics', async () => {
      const text = await (await svc.request('GET', '/metrics', { key: other.keys.read })).text();
      const limited = Number(/^http_rate_limited_total\{policy="api-key"\} (\d+)/m.exec(text)?.[1]);
      expect(limited).to.be.at.least(200 - KEY_BURST - 5);
    });

    it('does not limit the health probes', async () => {
      for (let i = 0; i < ANONYMOUS_BURST * 3; i++) {
        const healthz = await svc.request('GET', '/healthz');
        expect(healthz.status).to.equal(200);
        expect(healthz.headers.get('ratelimit')).to.equal(null);
      }
    });

    it('does not limit the metrics scrape, even from an address whose anonymous budget a flood spent', async () => {
      const flood = await Promise.all(Array.from({ length: ANONYMOUS_BURST * 3 }, () => svc.request('GET', '/api/v1/runs/not-a-run')));
      expect(flood.map((r) => r.status)).to.include(429);
      for (let i = 0; i < 5; i++) {
        const metrics = await svc.request('GET', '/metrics');
        expect(metrics.status).to.equal(200);
        expect(metrics.headers.get('ratelimit')).to.equal(null);
        await metrics.body?.cancel();
      }
    });
  });

  describe('across processes', () => {
    let first: TestService;

    before(async () => {
      first = await startTestService('rate-limit-procs', {
        ROLES: API_TEST_ROLES,
        RATE_LIMIT_RPS: String(KEY_RPS),
        RATE_LIMIT_BURST: String(KEY_BURST),
      });
    });

    after(async () => {
      await first?.stop();
    });

    it('loads the keys that exist when a process starts, so their first request needs no lookup', async () => {
      const existing = await first.tenant('limit-warm');
      const second = await startService(loadConfig({ ...sameDeployment(first.config), ROLES: 'http' }), createLogger('silent'));
      try {
        await new Promise((resolve) => setTimeout(resolve, 300));
        const response = await fetch(`${second.http!.url}/api/v1/accounts`, { headers: { authorization: `Bearer ${existing.keys.write}` } });
        expect(response.status).to.equal(200);
        const metrics = await (await fetch(`${second.http!.url}/metrics`, { headers: { authorization: `Bearer ${existing.keys.write}` } })).text();
        expect(metrics).to.not.match(/^api_key_lookups_total\{source="database"\} [1-9]/m);
        expect(metrics).to.match(/^api_key_lookups_total\{source="cache"\} [1-9]/m);
      } finally {
        await second.stop();
      }
    });

    it('holds per process, as documented: a second HTTP process gives the same key its own bucket', async () => {
      const second = await startService(loadConfig({ ...sameDeployment(first.config), ROLES: 'http' }), createLogger('silent'));
      try {
        const fresh = await first.tenant('limit-d');
        const counts = { first: 0, second: 0 };
        for (const [name, base] of [['first', first.baseUrl], ['second', second.http!.url]] as const) {
          const results = await Promise.all(
            Array.from({ length: KEY_BURST + 10 }, () => fetch(`${base}/api/v1/accounts`, { headers: { authorization: `Bearer ${fresh.keys.read}` } })),
          );
          counts[name] = results.filter((r) => r.status === 200).length;
        }
        expect(counts.first).to.be.within(KEY_BURST, KEY_BURST + 3);
        expect(counts.second).to.be.within(KEY_BURST, KEY_BURST + 3);
      } finally {
        await second.stop();
      }
    });

  });

  describe('without a valid key', () => {
    let svc: TestService;
    let tenant: TestTenant;
    let started = 0;

    before(async () => {
      svc = await startTestService('rate-limit-anon', {
        ROLES: API_TEST_ROLES,
        RATE_LIMIT_RPS: '1000',
        RATE_LIMIT_BURST: '1000',
        RATE_LIMIT_ANONYMOUS_RPS: String(ANONYMOUS_RPS),
        RATE_LIMIT_ANONYMOUS_BURST: String(ANONYMOUS_BURST),
      });
      tenant = await svc.tenant('anon');
      started = performance.now();
    });

    after(async () => {
      await svc?.stop();
    });

    it('limits requests without a key per client address: the burst gets 401, the rest 429', async () => {
      const results = await Promise.all(Array.from({ length: 30 }, () => call(svc, 'GET', '/api/v1/accounts')));
      const earned = refilledDuring(started, ANONYMOUS_RPS);
      const unauthorized = results.filter((r) => r.status === 401).length;
      expect(unauthorized).to.be.within(ANONYMOUS_BURST, ANONYMOUS_BURST + earned);
      expect(results.filter((r) => r.status === 429).length).to.equal(30 - unauthorized);
      for (const result of results) expect(result.headers.get('ratelimit-policy')).to.equal(`"client-address";q=${ANONYMOUS_BURST};w=${ANONYMOUS_BURST / ANONYMOUS_RPS}`);
      const limited = results.find((r) => r.status === 429)!;
      expectProblem(limited, 429, 'rate-limited');
      expect(limited.body.policy).to.equal('client-address');
      expect(limited.headers.get('retry-after')).to.match(/^[1-9]\d*$/);
      // A valid key is not held back by its address's anonymous budget, not even on its first request:
      // the key was cached when its ApiKeyIssued was seen, before it was ever used.
      const first = await call(svc, 'GET', '/api/v1/accounts', { key: tenant.keys.read });
      expect(first.status).to.equal(200);
      expect(first.headers.get('ratelimit')).to.match(/^"api-key";r=999;/);
    });

    it('sends a flood of made-up keys to Postgres only at the address rate', async () => {
      const before = await keyLookups(svc, tenant.keys.admin);
      const started = performance.now();
      const results = await Promise.all(Array.from({ length: 200 }, () => call(svc, 'GET', '/api/v1/accounts', { key: madeUpKey() })));
      const earned = refilledDuring(started, ANONYMOUS_RPS);
      const after = await keyLookups(svc, tenant.keys.admin);
      expect(results.every((r) => r.status === 401 || r.status === 429)).to.equal(true);
      // The address bucket is empty after the previous test; whatever refilled is all that reached the database.
      expect((after.database ?? 0) - (before.database ?? 0)).to.be.at.most(ANONYMOUS_BURST + earned);
      expect(results.filter((r) => r.status === 429).length).to.be.at.least(200 - ANONYMOUS_BURST - earned);
    });
  });

  describe('the unknown-key cache', () => {
    let svc: TestService;
    let tenant: TestTenant;

    before(async () => {
      svc = await startTestService('rate-limit-unknown', { ROLES: API_TEST_ROLES });
      tenant = await svc.tenant('unknown');
    });

    after(async () => {
      await svc?.stop();
    });

    it('looks a made-up key id up in Postgres once, however often it is presented', async () => {
      const key = madeUpKey();
      const before = await keyLookups(svc, tenant.keys.admin);
      const results = await Promise.all(Array.from({ length: 200 }, () => call(svc, 'GET', '/api/v1/accounts', { key })));
      const after = await keyLookups(svc, tenant.keys.admin);
      expect(results.every((r) => r.status === 401)).to.equal(true);
      expect(after.database! - before.database!, 'database lookups').to.be.within(1, 200);
      // Concurrent first requests may all miss the cache; every later one hits it.
      const sequential = await call(svc, 'GET', '/api/v1/accounts', { key });
      expect(sequential.status).to.equal(401);
      const afterSequential = await keyLookups(svc, tenant.keys.admin);
      expect(afterSequential.database).to.equal(after.database);
      expect(afterSequential.unknown_cache! - (after.unknown_cache ?? 0)).to.equal(1);
    });

    it('serves a valid key from the cache and still refuses it at once after revocation', async () => {
      const tenantB = await svc.tenant('unknown-b');
      expect((await call(svc, 'GET', '/api/v1/accounts', { key: tenantB.keys.write })).status).to.equal(200);
      // The tenant's three keys are fetched in the background when their ApiKeyIssued is seen; let that finish.
      await new Promise((resolve) => setTimeout(resolve, 500));
      const before = await keyLookups(svc, tenant.keys.admin);
      for (let i = 0; i < 20; i++) expect((await call(svc, 'GET', '/api/v1/accounts', { key: tenantB.keys.write })).status).to.equal(200);
      const after = await keyLookups(svc, tenant.keys.admin);
      expect(after.database, 'no database lookup for a cached key').to.equal(before.database);
      await revokeKey(svc.service.infrastructure, tenantB.keyIds.write);
      const revoked = await call(svc, 'GET', '/api/v1/accounts', { key: tenantB.keys.write });
      expectProblem(revoked, 401, 'unauthorized');
    });
  });
});
