import Router from '@koa/router';
import Koa from 'koa';
import getRawBody from 'raw-body';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { v7 as uuidv7 } from 'uuid';
import { createAccount, createWorkspace, issueKey } from '../src/operator/operator-commands.ts';
import { httpLoad, inPool, startBenchService, type LoadResult } from './support/bench-service.ts';
import { compareLatency, compareThroughput, figure, note, section, timed } from './support/report.ts';

/**
 * HTTP API benchmarks (issue 3), each against a bare Koa app measured with the same client
 * (global fetch, keep-alive) and concurrency in the same run:
 *   1. POST /api/v1/runs, one request per account, on accounts of platform `none`;
 *   2. GET /api/v1/runs/{id} of a queued run (read model in Postgres);
 *   3. GET /api/v1/runs/{id} of a terminal run (served from the in-process cache).
 * The service runs `http,projectors` only: without workers the runs stay queued.
 */

const POSTS = 400;
const WARM_POSTS = 32;
const GETS = 2_000;
const WARM_GETS = 200;
const CONCURRENCY = 16;
const CANCELED_RUNS = 100;

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
async function startBareKoa(getBody: () => string): Promise<BareApp> {
  const app = new Koa();
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

function post(baseUrl: string, key: string, projectId: string): Promise<Response> {
  return fetch(`${baseUrl}/api/v1/runs`, {
    method: 'POST',
    headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json' },
    body: JSON.stringify({ brief: BRIEF, project_id: projectId }),
  });
}

function get(baseUrl: string, key: string, runId: string): Promise<Response> {
  return fetch(`${baseUrl}/api/v1/runs/${runId}`, { headers: { authorization: `Bearer ${key}` } });
}

function report(name: string, subject: LoadResult, baselineName: string, baseline: LoadResult): void {
  compareThroughput(name, subject.latencies.length, subject.ms, baselineName, baseline.latencies.length, baseline.ms, 'req/s');
  compareLatency(name, subject.latencies, baselineName, baseline.latencies);
}

function statuses(result: LoadResult): string {
  const counts = new Map<string, number>();
  for (const body of result.bodies) {
    const status = String((JSON.parse(body) as { status?: unknown }).status);
    counts.set(status, (counts.get(status) ?? 0) + 1);
  }
  return JSON.stringify(Object.fromEntries(counts));
}

export async function run(): Promise<void> {
  const svc = await startBenchService('httpapi', { ROLES: 'http,projectors' });
  let bare: BareApp | undefined;
  try {
    const infra = svc.service.infrastructure;
    const ws = (await createWorkspace(infra, 'bench http')).value.id;
    const key = (await issueKey(infra, ws, 'write', 'bench')).value.key;
    const setup = await timed(() =>
      inPool(
        Array.from({ length: POSTS + WARM_POSTS }, (_, i) => i),
        CONCURRENCY,
        async (i) => (await createAccount(infra, ws, `bench ${i}`, 'none')).value.id,
      ),
    );
    const warmAccounts = setup.value.slice(POSTS);
    const accounts = setup.value.slice(0, POSTS);
    figure('setup: createAccount (none), 16 at once', setup.ms / 1000, 's', `(${setup.value.length} accounts, not a result)`);

    let getBody = '{}';
    bare = await startBareKoa(() => getBody);
    const bareUrl = bare.url;

    // ---- 1. POST
    section(`1. POST /api/v1/runs: ${POSTS} requests, one per account (platform none), ${CONCURRENCY} at a time, vs a bare koa POST route`);
    note('service: auth, JSON body + schema validation, startRun (load account, append RunQueued with OCC), 202; projectors run alongside');
    await httpLoad(WARM_POSTS, CONCURRENCY, 202, (i) => post(svc.baseUrl, key, warmAccounts[i]!));
    await httpLoad(WARM_POSTS * 4, CONCURRENCY, 202, (i) => post(bareUrl, key, accounts[i % POSTS]!));
    const barePost = await httpLoad(POSTS, CONCURRENCY, 202, (i) => post(bareUrl, key, accounts[i]!));
    const servicePost = await httpLoad(POSTS, CONCURRENCY, 202, (i) => post(svc.baseUrl, key, accounts[i]!));
    report('POST /runs', servicePost, 'bare koa POST', barePost);
    const runIds = servicePost.bodies.map((body) => (JSON.parse(body) as { id: string }).id);

    // ---- 2. GET of a queued run
    const canceled = runIds.slice(0, CANCELED_RUNS);
    const queued = runIds.slice(CANCELED_RUNS);
    // A real queued representation as the bare route's body (same size on the wire).
    const sample = await (await get(svc.baseUrl, key, queued[0]!)).text();
    getBody = sample;
    section(
      `2. GET /api/v1/runs/{id} of a queued run (read model in Postgres): ${GETS.toLocaleString('en-US')} requests over ${queued.length} runs, ` +
        `${CONCURRENCY} at a time, vs a bare koa GET route sending the same ${Buffer.byteLength(sample)} bytes`,
    );
    await httpLoad(WARM_GETS, CONCURRENCY, 200, (i) => get(svc.baseUrl, key, queued[i % queued.length]!));
    await httpLoad(WARM_GETS, CONCURRENCY, 200, (i) => get(bareUrl, key, queued[i % queued.length]!));
    const bareGetQueued = await httpLoad(GETS, CONCURRENCY, 200, (i) => get(bareUrl, key, queued[i % queued.length]!));
    const serviceGetQueued = await httpLoad(GETS, CONCURRENCY, 200, (i) => get(svc.baseUrl, key, queued[i % queued.length]!));
    report('GET queued run', serviceGetQueued, 'bare koa GET', bareGetQueued);
    note(`statuses served: ${statuses(serviceGetQueued)}`);

    // ---- 3. GET of a terminal run
    const cancel = await timed(() =>
      inPool(canceled, 8, async (runId) => {
        const response = await fetch(`${svc.baseUrl}/api/v1/runs/${runId}`, { method: 'DELETE', headers: { authorization: `Bearer ${key}` } });
        const body = await response.text();
        if (response.status !== 200) throw new Error(`DELETE /runs/${runId} answered ${response.status}: ${body.slice(0, 300)}`);
      }),
    );
    // One GET each puts the canceled runs in the terminal-run cache (untimed).
    await httpLoad(canceled.length, CONCURRENCY, 200, (i) => get(svc.baseUrl, key, canceled[i]!));
    const terminalSample = await (await get(svc.baseUrl, key, canceled[0]!)).text();
    getBody = terminalSample;
    section(
      `3. GET /api/v1/runs/{id} of a terminal run (in-process cache): ${GETS.toLocaleString('en-US')} requests over ${canceled.length} canceled runs, ` +
        `${CONCURRENCY} at a time, vs a bare koa GET route sending the same ${Buffer.byteLength(terminalSample)} bytes`,
    );
    note(`setup: ${canceled.length} runs canceled by DELETE in ${(cancel.ms / 1000).toFixed(1)} s, then one GET each to fill the cache (untimed)`);
    await httpLoad(WARM_GETS, CONCURRENCY, 200, (i) => get(svc.baseUrl, key, canceled[i % canceled.length]!));
    await httpLoad(WARM_GETS, CONCURRENCY, 200, (i) => get(bareUrl, key, canceled[i % canceled.length]!));
    const bareGetTerminal = await httpLoad(GETS, CONCURRENCY, 200, (i) => get(bareUrl, key, canceled[i % canceled.length]!));
    const serviceGetTerminal = await httpLoad(GETS, CONCURRENCY, 200, (i) => get(svc.baseUrl, key, canceled[i % canceled.length]!));
    report('GET terminal run', serviceGetTerminal, 'bare koa GET', bareGetTerminal);
    note(`statuses served: ${statuses(serviceGetTerminal)}`);
    compareLatency('GET terminal (cache)', serviceGetTerminal.latencies, 'GET queued (Postgres)', serviceGetQueued.latencies, '(cache/Postgres)');
  } finally {
    await bare?.close();
    await svc.stop();
  }
}
