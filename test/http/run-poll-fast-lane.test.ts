import { request as httpRequest } from 'node:http';
import { Writable } from 'node:stream';
import { expect } from 'chai';
import { pino } from 'pino';
import { Commands } from '../../commands/command-bus.ts';
import { identityFreshnessOf } from '../../src/runtime/identity-freshness.ts';
import { KeyDirectory } from '../../src/auth/key-directory.ts';
import { createHttpApp } from '../../src/http/app.ts';
import { fastLaneOf, withFastLane } from '../../src/http/fast-lane.ts';
import { startHttpServer, type HttpServer } from '../../src/http/http-server.ts';
import { IdempotencyStore } from '../../src/http/idempotency/idempotency-store.ts';
import { rateLimit } from '../../src/http/middleware/rate-limit.ts';
import { mountRoutes } from '../../src/http/route-table/mount-routes.ts';
import type { ApiContext } from '../../src/http/routes/api-context.ts';
import { cacheTerminalRun, RUN_ROUTES, runPollFastLane, runsRouter } from '../../src/http/routes/runs-routes.ts';
import { TerminalRunCache } from '../../src/http/routes/terminal-run-cache.ts';
import type { BucketPolicy } from '../../src/http/rate-limit/token-buckets.ts';
import { ReadBarrier } from '../../src/runtime/read-barrier.ts';
import { RunStateFollower } from '../../src/runtime/run-state-follower.ts';
import { eventually } from '../support/eventually.ts';
import { startTestService, type TestService, type TestTenant } from '../support/test-service.ts';
import { freshAccount } from '../api/support/api-call.ts';

interface RawResponse {
  readonly status: number;
  /** Node's rawHeaders: names as sent, in the order sent. */
  readonly rawHeaders: readonly string[];
  readonly body: string;
}

function rawGet(baseUrl: string, path: string, headers: Record<string, string>): Promise<RawResponse> {
  return new Promise((resolve, reject) => {
    const { hostname, port } = new URL(baseUrl);
    // The path as given: a URL would drop an empty query's `?`.
    const req = httpRequest({ hostname, port, path, method: 'GET', headers }, (res) => {
      const chunks: Buffer[] = [];
      res.on('data', (chunk: Buffer) => chunks.push(chunk));
      res.on('end', () => resolve({ status: res.statusCode ?? 0, rawHeaders: res.rawHeaders, body: Buffer.concat(chunks).toString('utf8') }));
      res.on('error', reject);
    });
    req.on('error', reject);
    req.end();
  });
}

/** Date is the only header that may differ between two answers to the same request. */
function comparable(response: RawResponse): { status: number; headers: string[]; body: string } {
  const headers: string[] = [];
  for (let i = 0; i < response.rawHeaders.length; i += 2) {
    const name = response.rawHeaders[i]!;
    headers.push(`${name}: ${name.toLowerCase() === 'date' ? '<date>' : response.rawHeaders[i + 1]}`);
  }
  return { status: response.status, headers, body: response.body };
}

/** One app of the pair: what it logged, observed and counted. */
interface AppUnderTest {
  readonly server: HttpServer;
  readonly logLines: Record<string, unknown>[];
  readonly observed: string[];
  readonly keyLookups: string[];
  readonly keys: KeyDirectory;
}

/**
 * The same GET, sent to an app whose runs router carries the fast lane and to one whose runs
 * router does not (the koa route alone), over the same run cache and live follower, must get the
 * same status, headers (names, values and order; Date aside) and body, and leave the same access
 * log line, metrics observation and key-lookup count.
 */
describe('GET /api/v1/runs/{runId}: the fast lane answers as the koa route does', function () {
  this.timeout(30_000);
  let svc: TestService;
  let tenant: TestTenant;
  let other: TestTenant;
  let follower: RunStateFollower;
  let fast: AppUnderTest;
  let normal: AppUnderTest;
  let laneAnswers = 0;
  const apps: AppUnderTest[] = [];

  // Refills in a microsecond: every request finds a full bucket, so both apps announce the same RateLimit values.
  const generous: BucketPolicy = { name: 'api-key', ratePerSecond: 1_000_000, burst: 1_000 };

  async function startApp(api: ApiContext, withLane: boolean, perKey: BucketPolicy): Promise<AppUnderTest> {
    const logLines: Record<string, unknown>[] = [];
    const observed: string[] = [];
    const keyLookups: string[] = [];
    const keys = new KeyDirectory(api.db, { onLookup: (source) => keyLookups.push(source) });
    keys.watch(svc.service.infrastructure.nc, svc.service.infrastructure.subjects.filter('*', '_', 'key'), identityFreshnessOf(api.store, api.subjects, api.barrier));
    const appApi: ApiContext = { ...api, keys };
    const lane = runPollFastLane(appApi);
    const router = withLane
      ? withFastLane(mountRoutes(RUN_ROUTES, appApi, { limits: appApi.config, keys }), (path, request) => {
          const answer = lane(path, request);
          if (answer) laneAnswers++;
          return answer;
        })
      : mountRoutes(RUN_ROUTES, appApi, { limits: appApi.config, keys });
    const sink = new Writable({
      write(chunk: Buffer, _encoding, callback) {
        for (const line of chunk.toString('utf8').split('\n').filter(Boolean)) logLines.push(JSON.parse(line) as Record<string, unknown>);
        callback();
      },
    });
    const app = createHttpApp({
      config: api.config,
      logger: pino({ level: 'info' }, sink),
      routers: [router],
      readiness: [],
      observeRequest: (method, route, status) => observed.push(`${method} ${route} ${status}`),
      beforeRoutes: [rateLimit({ keys, perKey, perAddress: { name: 'client-address', ratePerSecond: 1_000_000, burst: 1_000 }, exemptPaths: new Set() })],
    });
    const server = await startHttpServer(app, { host: '127.0.0.1', port: 0, logger: pino({ level: 'silent' }) });
    const started = { server, logLines, observed, keyLookups, keys };
    apps.push(started);
    return started;
  }

  let api: ApiContext;

  before(async () => {
    svc = await startTestService('fast-lane', { ROLES: 'http,projectors' });
    [tenant, other] = await Promise.all([svc.tenant('lane-a'), svc.tenant('lane-b')]);
    const infra = svc.service.infrastructure;
    const runCache = new TerminalRunCache();
    follower = new RunStateFollower({
      store: infra.store,
      filter: infra.subjects.all,
      logger: pino({ level: 'silent' }),
      onTerminal: (run) => cacheTerminalRun(runCache, run, svc.config.publicBaseUrl),
    });
    await follower.start();
    // The runs routes read neither the ads platform nor proposals.
    const unused = new Proxy({}, { get: () => { throw new Error('not used by the runs routes'); } });
    api = {
      config: svc.config,
      logger: pino({ level: 'silent' }),
      db: infra.database.db,
      commands: new Commands(infra.aggregates),
      aggregates: infra.aggregates,
      store: infra.store,
      subjects: infra.subjects,
      barrier: new ReadBarrier(infra.store, infra.database.db),
      keys: new KeyDirectory(infra.database.db),
      idempotency: new IdempotencyStore(infra.database.db),
      runCache,
      liveRuns: follower,
      platform: unused as ApiContext['platform'],
      proposals: unused as ApiContext['proposals'],
    };
    fast = await startApp(api, true, generous);
    normal = await startApp(api, false, generous);
  });

  after(async () => {
    for (const app of apps) {
      await app.server.stop(1_000);
      app.keys.stop();
    }
    await follower?.stop();
    await svc?.stop();
  });

  const queueRun = async (): Promise<string> => {
    const accountId = await freshAccount(svc, tenant.workspaceId);
    const created = await svc.request('POST', '/api/v1/runs', { key: tenant.keys.write, body: { brief: 'Poll me fast.', project_id: accountId } });
    expect(created.status).to.equal(202);
    const runId = ((await created.json()) as { id: string }).id;
    await eventually(() => expect(follower.get(runId)?.row.status).to.equal('queued'));
    return runId;
  };

  let requestNumber = 0;
  /** Sends the same request to both apps (the fast one first) and expects the same answer. */
  async function sameAnswer(path: string, headers: Record<string, string>, pair: readonly [AppUnderTest, AppUnderTest] = [fast, normal]): Promise<RawResponse> {
    const requestId = `lane-${++requestNumber}`;
    const [fastApp, normalApp] = pair;
    const fastLogLines = fastApp.logLines.length;
    const normalLogLines = normalApp.logLines.length;
    const fromLane = await rawGet(fastApp.server.url, path, { ...headers, 'x-request-id': requestId });
    const fromRoute = await rawGet(normalApp.server.url, path, { ...headers, 'x-request-id': requestId });
    expect(comparable(fromLane)).to.deep.equal(comparable(fromRoute));
    await new Promise((resolve) => setImmediate(resolve));
    const logged = (app: AppUnderTest, from: number) =>
      app.logLines.slice(from).filter((line) => line.msg === 'http request').map(({ method, path: loggedPath, status, request_id }) => ({ method, path: loggedPath, status, request_id }));
    expect(logged(fastApp, fastLogLines)).to.deep.equal(logged(normalApp, normalLogLines)).and.to.have.length(1);
    expect(fastApp.observed).to.deep.equal(normalApp.observed);
    expect(fastApp.keyLookups).to.deep.equal(normalApp.keyLookups);
    return fromLane;
  }

  const bearer = (key: string) => ({ authorization: `Bearer ${key}` });

  it('a queued run: 200 with Retry-After and no-store, served by the lane once the key is cached', async () => {
    const runId = await queueRun();
    // The first request of a key looks it up in Postgres: the lane leaves that one to the route.
    await sameAnswer(`/api/v1/runs/${runId}`, bearer(tenant.keys.read));
    const before = laneAnswers;
    const response = await sameAnswer(`/api/v1/runs/${runId}`, bearer(tenant.keys.read));
    expect(laneAnswers).to.equal(before + 1);
    expect(response.status).to.equal(200);
    expect(JSON.parse(response.body)).to.include({ id: runId, status: 'queued' });
  });

  it('a terminal run: 200 with its ETag, then 304 for If-None-Match with that ETag (weak or strong)', async () => {
    const runId = await queueRun();
    const canceled = await svc.request('DELETE', `/api/v1/runs/${runId}`, { key: tenant.keys.write });
    expect(canceled.status).to.equal(200);
    await eventually(() => expect(api.runCache.get(runId)).to.not.equal(undefined));
    await sameAnswer(`/api/v1/runs/${runId}`, bearer(tenant.keys.write));
    const before = laneAnswers;
    const response = await sameAnswer(`/api/v1/runs/${runId}`, bearer(tenant.keys.write));
    expect(response.status).to.equal(200);
    expect(JSON.parse(response.body)).to.include({ id: runId, status: 'canceled' });
    const etag = api.runCache.get(runId)!.etag;
    const notModified = await sameAnswer(`/api/v1/runs/${runId}`, { ...bearer(tenant.keys.write), 'if-none-match': etag });
    expect(notModified.status).to.equal(304);
    expect(notModified.body).to.equal('');
    expect((await sameAnswer(`/api/v1/runs/${runId}`, { ...bearer(tenant.keys.write), 'if-none-match': `"other", W/${etag}` })).status).to.equal(304);
    expect((await sameAnswer(`/api/v1/runs/${runId}`, { ...bearer(tenant.keys.write), 'if-none-match': '"other"' })).status).to.equal(200);
    expect(laneAnswers).to.equal(before + 4);
  });

  it('404 for a run of another workspace, an unknown run and a malformed id: the route answers, the same problem', async () => {
    const runId = await queueRun();
    const canceledRunId = await queueRun();
    expect((await svc.request('DELETE', `/api/v1/runs/${canceledRunId}`, { key: tenant.keys.write })).status).to.equal(200);
    await eventually(() => expect(api.runCache.get(canceledRunId)).to.not.equal(undefined));
    await sameAnswer(`/api/v1/runs/${runId}`, bearer(other.keys.read));
    const before = laneAnswers;
    for (const path of [`/api/v1/runs/${runId}`, `/api/v1/runs/${canceledRunId}`, '/api/v1/runs/0190a6d5-0000-7000-8000-000000000000', '/api/v1/runs/not-a-run']) {
      const response = await sameAnswer(path, bearer(other.keys.read));
      expect(response.status).to.equal(404);
      expect(JSON.parse(response.body)).to.include({ status: 404 });
    }
    expect(laneAnswers).to.equal(before);
  });

  it('401 without a key, with a malformed one and with a wrong secret', async () => {
    const runId = await queueRun();
    await sameAnswer(`/api/v1/runs/${runId}`, bearer(tenant.keys.read));
    const wrongSecret = tenant.keys.read.replace(/.$/, (last) => (last === 'A' ? 'B' : 'A'));
    for (const headers of [{}, { authorization: 'Basic abc' }, bearer('ak_nope'), bearer(wrongSecret)]) {
      const response = await sameAnswer(`/api/v1/runs/${runId}`, headers);
      expect(response.status).to.equal(401);
    }
  });

  it('a query string, even an empty one, is left to the route (422 for an unknown parameter)', async () => {
    const runId = await queueRun();
    await sameAnswer(`/api/v1/runs/${runId}`, bearer(tenant.keys.read));
    const before = laneAnswers;
    expect((await sameAnswer(`/api/v1/runs/${runId}?verbose=1`, bearer(tenant.keys.read))).status).to.equal(422);
    expect((await sameAnswer(`/api/v1/runs/${runId}?`, bearer(tenant.keys.read))).status).to.equal(200);
    expect(laneAnswers).to.equal(before);
  });

  it('429 once the key’s bucket is empty, with the same Retry-After and RateLimit headers', async () => {
    // Refills one token in 1000 s: within the test the values are whole and stable.
    const stingy: BucketPolicy = { name: 'api-key', ratePerSecond: 0.001, burst: 3 };
    const pair = [await startApp(api, true, stingy), await startApp(api, false, stingy)] as const;
    const runId = await queueRun();
    const statuses: number[] = [];
    for (let i = 0; i < 4; i++) statuses.push((await sameAnswer(`/api/v1/runs/${runId}`, bearer(tenant.keys.read), pair)).status);
    expect(statuses).to.deep.equal([200, 200, 200, 429]);
  });

  it('the runs router the service mounts carries the lane', () => {
    expect(fastLaneOf(runsRouter(api))).to.be.a('function');
  });
});
