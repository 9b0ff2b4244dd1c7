import Router from '@koa/router';
import Koa, { type Middleware } from 'koa';
import { pino } from 'pino';
import getRawBody from 'raw-body';
import { readFileSync } from 'node:fs';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { v7 as uuidv7 } from 'uuid';
import { createAccount, createWorkspace, issueKey } from '../src/operator/operator-commands.ts';
import { RUNS_PROJECTION } from '../projections/runs/runs-projection.ts';
import { waitForProjection } from '../projections/runtime/projector.ts';
import { inPool, startBenchService } from './support/bench-service.ts';
import { startServiceProcess } from './support/service-process.ts';
import { externalLoad, type LoadOutcome, type LoadPlan } from './support/load-client.ts';
import { compare, figure, note, section, timed } from './support/report.ts';
import { accountCpu, type CpuShare } from './support/cpu-accounting.ts';
import { KeyDirectory } from '../src/auth/key-directory.ts';
import type { Infrastructure } from '../src/runtime/infrastructure.ts';
import { identityFreshnessOf } from '../src/runtime/identity-freshness.ts';
import { ReadBarrier } from '../src/runtime/read-barrier.ts';
import { parseApiKey } from '../src/auth/api-key.ts';
import { authenticate } from '../src/auth/authenticate.ts';
import { accessLog } from '../src/http/middleware/access-log.ts';
import { rateLimit } from '../src/http/middleware/rate-limit.ts';
import { requestId } from '../src/http/middleware/request-id.ts';
import { ServiceMetrics } from '../src/metrics/service-metrics.ts';

/**
 * HTTP API benchmarks, each against a bare Koa app answering the same bytes, driven by the
 * same load generator — autocannon in a separate process (support/load-client.ts) — in the
 * same run:
 *   1. POST /api/v1/runs, open loop at 500 req/s, one request per idle account (platform `none`);
 *   2. POST /api/v1/runs, closed loop (throughput);
 *   3. GET /api/v1/runs/{id} of a queued run (held in memory by the live follower, Postgres as the fallback);
 *   4. GET /api/v1/runs/{id} of a terminal run (served from the in-process cache);
 * both GETs answered by the runs router's fast lane (src/http/fast-lane.ts) once the key is cached;
 *   5. the per-request cost of request ids, authentication, the access log, metrics and rate
 *      limiting, each alone on the bare koa GET route (so each is measured by itself);
 *   6. the RSS of the all-in-one service (`node src/main.ts`, every role) in its own process,
 *      under the same POST loads (bench/support/service-process.ts).
 * The service runs `http,projectors` only: without workers the runs stay queued.
 * BENCH_SECTIONS=3,4 runs only those sections (the runs they read are still created, untimed).
 */

const OPEN_LOOP_POSTS = 2_000;
const OPEN_LOOP_RATE = 500;
const CLOSED_LOOP_POSTS = 1_000;
/** Rounds of bare-then-service for the closed loop, each side's best kept: a single pair can land one side in a neighbour's burst. */
const CLOSED_LOOP_ROUNDS = 3;
/** The service's untimed warm-up, as long as the bare route's (a run of the open loop): V8 optimises both before either is timed. */
const WARM_POSTS = 1_000;
const GET_SECONDS = 3;
/** Rounds of baseline-then-service for the GET comparisons: the machine is shared, one round can land in another's burst. */
const GET_ROUNDS = 3;
const CANCELED_RUNS = 100;
const ISOLATION_SECONDS = 2;
const ISOLATION_ROUNDS = 3;

const BRIEF =
  'Pause every campaign whose cost per conversion over the last 14 days is more than twice the account average, ' +
  'and move 10% of their budget to the three campaigns with the best return on ad spend.';

interface BareApp {
  readonly url: string;
  close(): Promise<void>;
}

/**
 * The floor: a minimal `new Koa()` app with the same two routes. POST reads and parses the
 * JSON body and answers 202 with a creation response; GET answers `getBody` (a real run
 * representation, so both send the same bytes). No auth, no database, no event store.
 */
async function startBareKoa(getBody: () => string, before: readonly Middleware[] = []): Promise<BareApp> {
  const app = new Koa();
  for (const middleware of before) app.use(middleware);
  const router = new Router();
  router.post('/api/v1/runs', async (ctx) => {
    const body = JSON.parse(await getRawBody(ctx.req, { limit: 65_536, encoding: 'utf-8' })) as { project_id?: string };
    if (typeof body.project_id !== 'string') ctx.throw(400);
    const id = uuidv7();
    const pollUrl = `http://api.test/api/v1/runs/${id}`;
    ctx.status = 202;
    ctx.set('Location', pollUrl);
    ctx.body = { id, object: 'run', status: 'queued', poll_url: pollUrl };
  });
  router.get('/api/v1/runs/:runId', (ctx) => {
    ctx.type = 'application/json';
    ctx.body = getBody();
  });
  app.use(router.routes());
  const server: Server = createServer(app.callback());
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', () => resolve()));
  const { port } = server.address() as AddressInfo;
  return {
    url: `http://127.0.0.1:${port}`,
    close: async () => {
      server.closeAllConnections();
      await new Promise<void>((resolve) => server.close(() => resolve()));
    },
  };
}

/** What the service and the bare app are both asked, in the same shape. */
function runPaths(runIds: readonly string[]): string[] {
  return runIds.map((id) => `/api/v1/runs/${id}`);
}

function createBodies(accounts: readonly string[]): string[] {
  return accounts.map((projectId) => JSON.stringify({ brief: BRIEF, project_id: projectId }));
}

function reportLoad(name: string, subject: LoadOutcome, baselineName: string, baseline: LoadOutcome): void {
  compare({ name: `${name} throughput`, value: subject.throughput, unit: 'req/s', baselineName, baselineValue: baseline.throughput });
  for (const [label, value, baselineValue] of [['p50', subject.p50, baseline.p50], ['p99', subject.p99, baseline.p99]] as const) {
    // autocannon measures whole milliseconds: a baseline under 1 ms reads 0 and has no ratio.
    if (baselineValue === 0) figure(`${name} ${label}`, value, 'ms', `(${baselineName}: under 1 ms)`);
    else compare({ name: `${name} ${label}`, value, unit: 'ms', baselineName, baselineValue, ratioNote: '(slowdown)' });
  }
  note(`statuses: service ${JSON.stringify(subject.statuses)}, ${baselineName} ${JSON.stringify(baseline.statuses)}; errors ${subject.errors}, timeouts ${subject.timeouts}`);
}

/**
 * Runs baseline and subject alternately GET_ROUNDS times and keeps each side's best round by
 * throughput: on a shared 2-core machine a single pair can put one side in a neighbour's burst.
 */
async function alternate(baseline: () => Promise<LoadOutcome>, subject: () => Promise<LoadOutcome>): Promise<{ baseline: LoadOutcome; subject: LoadOutcome; all: LoadOutcome[]; summary: string }> {
  const baselines: Measured[] = [];
  const subjects: Measured[] = [];
  for (let round = 0; round < GET_ROUNDS; round++) {
    baselines.push(await withCpu(baseline));
    subjects.push(await withCpu(subject));
  }
  const best = (outcomes: Measured[]) => outcomes.reduce((a, b) => (b.outcome.throughput > a.outcome.throughput ? b : a)).outcome;
  const leastCpu = (outcomes: Measured[]) => Math.min(...outcomes.map((m) => m.cpuMicros));
  const rounds = baselines.map((b, i) => `${(subjects[i]!.outcome.throughput / b.outcome.throughput).toFixed(2)}`).join(', ');
  const cpu = `CPU of this process per request (least of the rounds): service ${leastCpu(subjects).toFixed(1)} µs, bare ${leastCpu(baselines).toFixed(1)} µs, ratio ${(leastCpu(baselines) / leastCpu(subjects)).toFixed(2)}`;
  return {
    baseline: best(baselines),
    subject: best(subjects),
    all: [...baselines, ...subjects].map((m) => m.outcome),
    summary: `best of ${GET_ROUNDS} alternating rounds of ${GET_SECONDS} s; per-round throughput ratios: ${rounds}; ${cpu}`,
  };
}

interface Measured {
  readonly outcome: LoadOutcome;
  /** CPU time (user + system) this process spent per request: the server's cost, much less sensitive to neighbours than throughput. */
  readonly cpuMicros: number;
}

/** Runs a load and measures this process's CPU per request meanwhile (the load generator is another process). */
async function withCpu(load: () => Promise<LoadOutcome>): Promise<Measured> {
  const before = process.cpuUsage();
  const outcome = await load();
  const used = process.cpuUsage(before);
  return { outcome, cpuMicros: (used.user + used.system) / Math.max(1, outcome.requests) };
}

/** CPU per POST: the service's process (with its projectors) and the whole machine (NATS, Postgres, load client). */
function reportCpu(cpu: CpuShare): void {
  note(
    `CPU per request: service process ${cpu.processMicros.toFixed(0)} µs, nats-server ${cpu.natsMicros.toFixed(0)} µs, ` +
      `postgres ${cpu.postgresMicros.toFixed(0)} µs, whole machine ${cpu.machineMicros.toFixed(0)} µs (2 cores)`,
  );
  note(`service event-loop delay meanwhile: p99 ${cpu.loopDelayP99Ms.toFixed(1)} ms, max ${cpu.loopDelayMaxMs.toFixed(1)} ms`);
}

function expectOnly(outcome: LoadOutcome, status: number, what: string): void {
  const others = Object.entries(outcome.statuses).filter(([code]) => code !== String(status));
  if (others.length > 0 || outcome.errors > 0 || outcome.timeouts > 0) {
    throw new Error(`${what}: expected only ${status}, got ${JSON.stringify(outcome.statuses)}, ${outcome.errors} errors, ${outcome.timeouts} timeouts`);
  }
}

/** Runs every section; BENCH_SECTIONS=3,4 runs only those (the runs sections 3 and 4 read are still created, untimed). */
export async function run(): Promise<void> {
  const only = (process.env.BENCH_SECTIONS ?? '').split(',').map((s) => s.trim()).filter(Boolean);
  const wanted = (id: string) => only.length === 0 || only.includes(id);
  // The memory section starts its own service processes: alone, it needs none of the set-up below.
  if (only.length > 0 && only.every((id) => id === '6')) return measureMemory();
  // BENCH_QUOTAS=1: the POSTs go through the workspace quotas (runs per hour high enough never to refuse, tokens at the default) instead of none.
  const quotas: Record<string, string> = process.env.BENCH_QUOTAS === '1' ? { WORKSPACE_RUNS_PER_HOUR: '1000000', WORKSPACE_MODEL_TOKENS_PER_DAY: '5000000' } : {};
  const svc = await startBenchService('httpapi', { ROLES: 'http,projectors', ...quotas });
  let bare: BareApp | undefined;
  try {
    const infra = svc.service.infrastructure;
    const ws = (await createWorkspace(infra, 'bench http')).value.id;
    const key = (await issueKey(infra, ws, 'write', 'bench')).value.key;
    const needed = OPEN_LOOP_POSTS + CLOSED_LOOP_POSTS * CLOSED_LOOP_ROUNDS + WARM_POSTS;
    const setup = await timed(() => inPool(Array.from({ length: needed }, (_, i) => i), 16, async (i) => (await createAccount(infra, ws, `bench ${i}`, 'none')).value.id));
    figure('setup: createAccount (none), 16 at once', setup.ms / 1000, 's', `(${setup.value.length} accounts, not a result)`);
    const warmAccounts = setup.value.slice(0, WARM_POSTS);
    const openLoopAccounts = setup.value.slice(WARM_POSTS, WARM_POSTS + OPEN_LOOP_POSTS);
    // Each closed-loop round creates its runs on accounts of its own: every POST finds its account idle.
    const closedLoopAccounts = Array.from({ length: CLOSED_LOOP_ROUNDS }, (_, round) =>
      setup.value.slice(WARM_POSTS + OPEN_LOOP_POSTS + round * CLOSED_LOOP_POSTS, WARM_POSTS + OPEN_LOOP_POSTS + (round + 1) * CLOSED_LOOP_POSTS),
    );
    const headers = { authorization: `Bearer ${key}`, 'content-type': 'application/json' };

    let getBody = '{}';
    bare = await startBareKoa(() => getBody);
    const targets = { service: svc.baseUrl, bare: bare.url };
    note(`load generator in a separate process (bench/support/load-client.ts): open loop at evenly spaced instants, closed loop with autocannon; service runs http,projectors in the bench process`);

    const post = (url: string, accounts: readonly string[], extra: Partial<LoadPlan>): Promise<LoadOutcome> =>
      externalLoad({ url, method: 'POST', headers, paths: ['/api/v1/runs'], bodies: createBodies(accounts), connections: 64, ...extra });
    expectOnly(await post(targets.service, warmAccounts, { amount: WARM_POSTS, overallRate: OPEN_LOOP_RATE }), 202, 'warm-up POST');

    // ---- 1. POST, open loop
    if (wanted('1')) {
      section(`1. POST /api/v1/runs, open loop: ${OPEN_LOOP_POSTS} requests offered at ${OPEN_LOOP_RATE} req/s, one per idle account, vs a bare koa POST route`);
      await post(targets.bare, openLoopAccounts, { amount: OPEN_LOOP_POSTS, overallRate: OPEN_LOOP_RATE });
      const bareOpen = await post(targets.bare, openLoopAccounts, { amount: OPEN_LOOP_POSTS, overallRate: OPEN_LOOP_RATE });
      const { value: serviceOpen, cpu } = await accountCpu('post-open-loop', () => post(targets.service, openLoopAccounts, { amount: OPEN_LOOP_POSTS, overallRate: OPEN_LOOP_RATE }), (o) => o.requests);
      expectOnly(serviceOpen, 202, 'open-loop POST');
      reportLoad('POST /runs @500/s', serviceOpen, 'bare koa POST', bareOpen);
      reportCpu(cpu);
      note(
        `offered ${OPEN_LOOP_RATE} req/s; the client sent each request at most ${serviceOpen.maxSendLag} ms (service) and ` +
          `${bareOpen.maxSendLag} ms (bare) after it was due; latency counts from when it was due`,
      );
      note(`target: p99 < 15 ms at ${OPEN_LOOP_RATE} req/s — measured ${serviceOpen.p99.toFixed(1)} ms`);
    } else {
      // The GET sections read these runs: created all the same, untimed.
      expectOnly(await post(targets.service, openLoopAccounts, { amount: OPEN_LOOP_POSTS, connections: 32 }), 202, 'setup POST');
    }

    // ---- 2. POST, closed loop (throughput)
    if (wanted('2')) {
      section(
        `2. POST /api/v1/runs, closed loop: ${CLOSED_LOOP_ROUNDS} alternating rounds of ${CLOSED_LOOP_POSTS} requests, 32 connections, ` +
          `one per idle account, vs a bare koa POST route`,
      );
      const bareRounds: LoadOutcome[] = [];
      const serviceRounds: { outcome: LoadOutcome; cpu: CpuShare }[] = [];
      for (const [round, accounts] of closedLoopAccounts.entries()) {
        bareRounds.push(await post(targets.bare, accounts, { amount: CLOSED_LOOP_POSTS, connections: 32 }));
        const { value, cpu } = await accountCpu(`post-closed-loop-${round + 1}`, () => post(targets.service, accounts, { amount: CLOSED_LOOP_POSTS, connections: 32 }), (o) => o.requests);
        expectOnly(value, 202, 'closed-loop POST');
        serviceRounds.push({ outcome: value, cpu });
      }
      const bestBare = bareRounds.reduce((a, b) => (b.throughput > a.throughput ? b : a));
      const bestService = serviceRounds.reduce((a, b) => (b.outcome.throughput > a.outcome.throughput ? b : a));
      reportLoad('POST /runs', bestService.outcome, 'bare koa POST', bestBare);
      note(
        `best of ${CLOSED_LOOP_ROUNDS} alternating rounds each; per-round throughput ratios: ` +
          serviceRounds.map(({ outcome }, i) => (outcome.throughput / bareRounds[i]!.throughput).toFixed(2)).join(', '),
      );
      reportCpu(bestService.cpu);
    } else {
      for (const accounts of closedLoopAccounts) expectOnly(await post(targets.service, accounts, { amount: CLOSED_LOOP_POSTS, connections: 32 }), 202, 'setup POST');
    }

    // Run ids come from the read model (the load client does not keep bodies).
    const head = await infra.store.lastSequence();
    if (!(await waitForProjection(infra.database.db, RUNS_PROJECTION, head, 60_000))) throw new Error('runs projection did not catch up');
    const queuedRuns = (await svc.service.infrastructure.database.db.selectFrom('runs').select('id').where('workspace_id', '=', ws).execute()).map((r) => r.id);

    // ---- 3. GET of a queued run
    const canceled = queuedRuns.slice(0, CANCELED_RUNS);
    const queued = queuedRuns.slice(CANCELED_RUNS);
    const sample = await (await fetch(`${svc.baseUrl}/api/v1/runs/${queued[0]}`, { headers })).text();
    getBody = sample;
    const get = (url: string, runIds: readonly string[], seconds: number): Promise<LoadOutcome> =>
      externalLoad({ url, method: 'GET', headers: { authorization: headers.authorization }, paths: runPaths(runIds), connections: 32, seconds });
    if (wanted('3')) {
      section(`3. GET /api/v1/runs/{id} of a queued run: ${GET_ROUNDS} × ${GET_SECONDS} s, 32 connections over ${queued.length} runs, vs a bare koa GET route sending the same ${Buffer.byteLength(sample)} bytes`);
      await get(targets.service, queued, 1);
      await get(targets.bare, queued, 1);
      const queuedRounds = await alternate(() => get(targets.bare, queued, GET_SECONDS), () => get(targets.service, queued, GET_SECONDS));
      for (const outcome of queuedRounds.all) expectOnly(outcome, 200, 'GET queued');
      reportLoad('GET queued run', queuedRounds.subject, 'bare koa GET', queuedRounds.baseline);
      note(queuedRounds.summary);
    }

    // ---- 4. GET of a terminal run
    const cancel = await timed(() =>
      inPool(canceled, 8, async (runId) => {
        const response = await fetch(`${svc.baseUrl}/api/v1/runs/${runId}`, { method: 'DELETE', headers });
        const body = await response.text();
        if (response.status !== 200) throw new Error(`DELETE /runs/${runId} answered ${response.status}: ${body.slice(0, 300)}`);
      }),
    );
    const terminalSample = await (await fetch(`${svc.baseUrl}/api/v1/runs/${canceled[0]}`, { headers })).text();
    getBody = terminalSample;
    if (wanted('4')) {
      section(`4. GET /api/v1/runs/{id} of a terminal run: ${GET_ROUNDS} × ${GET_SECONDS} s, 32 connections over ${canceled.length} canceled runs, vs a bare koa GET route sending the same ${Buffer.byteLength(terminalSample)} bytes`);
      note(`setup: ${canceled.length} runs canceled by DELETE in ${(cancel.ms / 1000).toFixed(1)} s (untimed)`);
      await get(targets.service, canceled, 1);
      await get(targets.bare, canceled, 1);
      const terminalRounds = await alternate(() => get(targets.bare, canceled, GET_SECONDS), () => get(targets.service, canceled, GET_SECONDS));
      for (const outcome of terminalRounds.all) expectOnly(outcome, 200, 'GET terminal');
      reportLoad('GET terminal run', terminalRounds.subject, 'bare koa GET', terminalRounds.baseline);
      note(terminalRounds.summary);
    }

    // ---- 5. each piece of the request path alone on the bare route
    if (wanted('5')) {
      section(`5. per-request cost of each middleware alone on the bare koa GET route (${ISOLATION_ROUNDS} rounds of ${ISOLATION_SECONDS} s each, 32 connections, same ${Buffer.byteLength(terminalSample)} bytes)`);
      note('cost = CPU time this process spends per request with the middleware minus without (least of the rounds): the server\'s own work, not the machine\'s');
      await measureIsolated(svc.service.infrastructure, canceled, terminalSample, headers.authorization);
    }
  } finally {
    await bare?.close();
    await svc.stop();
  }
  if (wanted('6')) await measureMemory();
}

async function measureMemory(): Promise<void> {
  // V8's defaults (the young generation grows to 2 × 64 MiB under allocation pressure), then the flags `npm start` and the image use.
  await measureServiceProcessMemory([]);
  await measureServiceProcessMemory(startFlags());
}

/** The node flags of package.json's `start` script, so section 6 measures what ships. */
function startFlags(): string[] {
  const { scripts } = JSON.parse(readFileSync(new URL('../package.json', import.meta.url), 'utf8')) as { scripts: { start: string } };
  const flags = /\bnode((?: --\S+)*) src\/main\.ts/.exec(scripts.start)?.[1];
  if (flags === undefined) throw new Error(`cannot find "node … src/main.ts" in the start script: ${scripts.start}`);
  return flags.trim().split(' ').filter(Boolean);
}

/** Section 6: the all-in-one service in a process of its own, its RSS sampled under POST load. */
async function measureServiceProcessMemory(nodeFlags: readonly string[]): Promise<void> {
  section(`6. memory: RSS of the all-in-one service process (node ${[...nodeFlags, ''].join(' ')}src/main.ts, every role) under ${OPEN_LOOP_POSTS} POSTs at ${OPEN_LOOP_RATE} req/s, then ${CLOSED_LOOP_POSTS} on 32 connections`);
  const child = await startServiceProcess('rss', {}, nodeFlags);
  try {
    const infra = child.infrastructure;
    const ws = (await createWorkspace(infra, 'bench rss')).value.id;
    const key = (await issueKey(infra, ws, 'write', 'bench')).value.key;
    const accounts = await inPool(Array.from({ length: OPEN_LOOP_POSTS + CLOSED_LOOP_POSTS }, (_, i) => i), 16, async (i) => (await createAccount(infra, ws, `rss ${i}`, 'none')).value.id);
    const headers = { authorization: `Bearer ${key}`, 'content-type': 'application/json' };
    await child.waitUntilAccepted(headers.authorization);
    const idle = await child.rssMb();
    const post = (bodies: readonly string[], extra: Partial<LoadPlan>) =>
      externalLoad({ url: child.url, method: 'POST', headers, paths: ['/api/v1/runs'], bodies, connections: 64, ...extra });
    const open = await child.peakRssDuring(() => post(createBodies(accounts.slice(0, OPEN_LOOP_POSTS)), { amount: OPEN_LOOP_POSTS, overallRate: OPEN_LOOP_RATE }));
    const closed = await child.peakRssDuring(() => post(createBodies(accounts.slice(OPEN_LOOP_POSTS)), { amount: CLOSED_LOOP_POSTS, connections: 32 }));
    expectOnly(open.value, 202, 'POST to the service process (open loop)');
    expectOnly(closed.value, 202, 'POST to the service process (closed loop)');
    figure('RSS idle, after setup', idle, 'MB');
    figure('peak RSS, open-loop POST', open.peakMb, 'MB', `(target: under 200 MB; p99 ${open.value.p99} ms, ${open.value.throughput.toFixed(0)} req/s)`);
    figure('peak RSS, closed-loop POST', closed.peakMb, 'MB', `(target: under 200 MB; p99 ${closed.value.p99} ms, ${closed.value.throughput.toFixed(0)} req/s)`);
  } finally {
    await child.stop();
  }
}

/**
 * Each middleware of the service's request path, alone in front of the bare GET route, against
 * the bare route itself, in one run: what authentication (warm key cache), the access log (info
 * level, pino's asynchronous destination, to /dev/null), metrics (the histogram observer),
 * rate limiting (with its key check) and request ids each add per request.
 */
async function measureIsolated(infra: Infrastructure, runIds: readonly string[], body: string, authorization: string): Promise<void> {
  const keys = new KeyDirectory(infra.database.db);
  keys.watch(infra.nc, infra.subjects.filter('*', '_', 'key'), identityFreshnessOf(infra.store, infra.subjects, new ReadBarrier(infra.store, infra.database.db)));
  // Warm the cache with the bench key, as a running service would hold it.
  await authenticateOnce(keys, authorization);
  const metrics = new ServiceMetrics({ projectors: () => [], streamHead: async () => 0 });
  const logToNowhere = pino({ level: 'info' }, pino.destination({ dest: '/dev/null', sync: false, minLength: 0 }));
  const silent = pino({ level: 'silent' });
  const limiter = rateLimit({
    keys,
    perKey: { name: 'api-key', ratePerSecond: 1_000_000, burst: 1_000_000 },
    perAddress: { name: 'client-address', ratePerSecond: 1_000_000, burst: 1_000_000 },
    exemptPaths: new Set(),
  });
  const variants: readonly { readonly name: string; readonly middleware: readonly Middleware[] }[] = [
    { name: 'bare koa GET', middleware: [] },
    { name: '+ request id', middleware: [requestId()] },
    { name: '+ authentication', middleware: [authenticate(keys) as Middleware] },
    { name: '+ access log (info, async)', middleware: [accessLog(logToNowhere)] },
    { name: '+ metrics', middleware: [accessLog(silent, (method, route, status, seconds) => metrics.observeHttpRequest(method, route, status, seconds))] },
    { name: '+ rate limiter', middleware: [limiter] },
  ];
  const apps: { name: string; app: BareApp }[] = [];
  try {
    for (const variant of variants) apps.push({ name: variant.name, app: await startBareKoa(() => body, variant.middleware) });
    const load = (url: string, seconds: number) =>
      externalLoad({ url, method: 'GET', headers: { authorization }, paths: runPaths(runIds), connections: 32, seconds });
    for (const { app } of apps) await load(app.url, 1);
    // Rounds over every variant: noise on the shared machine hits each alike; each keeps its best.
    const results = new Map<string, Measured[]>();
    for (let round = 0; round < ISOLATION_ROUNDS; round++) {
      for (const { name, app } of apps) {
        const measured = await withCpu(() => load(app.url, ISOLATION_SECONDS));
        expectOnly(measured.outcome, 200, name);
        results.set(name, [...(results.get(name) ?? []), measured]);
      }
    }
    const bestThroughput = (name: string) => Math.max(...results.get(name)!.map((m) => m.outcome.throughput));
    const leastCpu = (name: string) => Math.min(...results.get(name)!.map((m) => m.cpuMicros));
    const bare = { throughput: bestThroughput('bare koa GET'), cpu: leastCpu('bare koa GET') };
    figure('bare koa GET: CPU per request', bare.cpu, 'µs', `(${bare.throughput.toFixed(0)} req/s)`);
    for (const { name } of apps.slice(1)) {
      compare({ name: `GET ${name}: CPU per request`, value: leastCpu(name), unit: 'µs', baselineName: 'bare koa GET', baselineValue: bare.cpu, ratioNote: `(cost ${(leastCpu(name) - bare.cpu).toFixed(1)} µs/request; ${bestThroughput(name).toFixed(0)} req/s)` });
    }
  } finally {
    for (const { app } of apps) await app.close();
    keys.stop();
  }
}

async function authenticateOnce(keys: KeyDirectory, authorization: string): Promise<void> {
  const keyId = parseApiKey(authorization.replace(/^Bearer /, ''))?.keyId ?? '';
  for (let attempt = 0; attempt < 50 && !(await keys.find(keyId)); attempt++) await new Promise((resolve) => setTimeout(resolve, 20));
}
