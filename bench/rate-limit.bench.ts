import { execFile } from 'node:child_process';
import { createRequire } from 'node:module';
import { promisify } from 'node:util';
import { loadConfig } from '../src/config/config.ts';
import { createLogger } from '../src/log/logger.ts';
import { startService, type RunningService } from '../src/runtime/service.ts';
import { TokenBuckets } from '../src/http/rate-limit/token-buckets.ts';
import { compare, compareLatency, compareThroughput, figure, note, now, section } from './support/report.ts';
import { serviceEnv } from '../test/support/cli.ts';
import { createAccount } from '../src/operator/operator-commands.ts';
import { waitForProjection } from '../projections/runtime/projector.ts';
import { httpLoad, inPool, startBenchService } from './support/bench-service.ts';

/**
 * The per-request cost of the rate limiter (issue 10): GET of one terminal run (served from
 * the in-process cache, so the limiter's share is as large as it gets) from two HTTP servers
 * on the same stream and schema, one with the limiter (budgets far above the load, so every
 * request is counted and none is refused) and one with RATE_LIMIT_RPS=0. The load comes from
 * autocannon in a separate process, so client work does not share this process's event loop;
 * the two servers are measured in alternating order (A B, B A, ...) and the rounds averaged.
 */

const CONNECTIONS = 16;
const SECONDS = 5;
const ROUNDS = 4;
const POSTS = 200;

interface CannonResult {
  readonly requests: { readonly average: number; readonly total: number };
  readonly latency: { readonly p50: number; readonly p99: number };
  readonly non2xx: number;
  readonly errors: number;
  readonly timeouts: number;
}

const run_ = promisify(execFile);
const autocannonBin = createRequire(import.meta.url).resolve('autocannon/autocannon.js');

async function autocannon(url: string, key: string, seconds: number): Promise<CannonResult> {
  const { stdout } = await run_(process.execPath, [autocannonBin, '--json', '-c', String(CONNECTIONS), '-d', String(seconds), '-H', `authorization=Bearer ${key}`, url], {
    maxBuffer: 64 * 1024 * 1024,
  });
  const result = JSON.parse(stdout) as CannonResult;
  if (result.non2xx > 0 || result.errors > 0 || result.timeouts > 0) {
    throw new Error(`load against ${url}: ${result.non2xx} non-2xx, ${result.errors} errors, ${result.timeouts} timeouts`);
  }
  return result;
}

/** The bucket check alone: one Map lookup and some arithmetic, whatever the number of keys. */
function bucketCost(): void {
  section('TokenBuckets.take alone (in process), per call');
  for (const subjects of [1, 10_000, 100_000]) {
    const buckets = new TokenBuckets({ name: 'api-key', ratePerSecond: 1e9, burst: 1e9 }, 200_000);
    const names = Array.from({ length: subjects }, (_, i) => `key-${i}`);
    for (const name of names) buckets.take(name);
    const calls = 2_000_000;
    const started = now();
    for (let i = 0; i < calls; i++) buckets.take(names[i % subjects]!);
    figure(`take() with ${subjects.toLocaleString('en-US')} keys`, ((now() - started) * 1e6) / calls, 'ns');
  }
}

export async function run(): Promise<void> {
  bucketCost();
  const limited = await startBenchService('ratelimit', {
    ROLES: 'http,projectors',
    RATE_LIMIT_RPS: '100000',
    RATE_LIMIT_BURST: '1000000',
  });
  let unlimited: RunningService | undefined;
  let quotas: RunningService | undefined;
  try {
    const tenant = await limited.tenant('bench-limits');
    const created = await limited.request('POST', '/api/v1/runs', { key: tenant.keys.read, body: { brief: 'Benchmark run.', project_id: tenant.accounts.sandbox } });
    const { id } = (await created.json()) as { id: string };
    const canceled = await limited.request('DELETE', `/api/v1/runs/${id}`, { key: tenant.keys.read });
    if (canceled.status !== 200) throw new Error(`could not make the run terminal: ${canceled.status}`);
    const config = loadConfig({ ...configEnv(limited.config), ROLES: 'http', RATE_LIMIT_RPS: '0' });
    unlimited = await startService(config, createLogger('silent'));
    const path = `/api/v1/runs/${id}`;
    const targets = { limiter: `${limited.baseUrl}${path}`, 'no limiter': `${unlimited.http!.url}${path}` } as const;

    section(`GET of a terminal run, autocannon (separate process) -c ${CONNECTIONS}, ${ROUNDS} alternating rounds of ${SECONDS} s each`);
    const totals = { limiter: [] as CannonResult[], 'no limiter': [] as CannonResult[] };
    for (const url of Object.values(targets)) await autocannon(url, tenant.keys.read, 1); // warm-up: JIT, caches, connections
    // A B B A ...: whoever goes first in a round does not always get the quieter moment.
    for (let round = 0; round < ROUNDS; round++) {
      const order = round % 2 === 0 ? (['limiter', 'no limiter'] as const) : (['no limiter', 'limiter'] as const);
      for (const name of order) totals[name].push(await autocannon(targets[name], tenant.keys.read, SECONDS));
    }
    const mean = (results: CannonResult[], pick: (r: CannonResult) => number) => results.reduce((sum, r) => sum + pick(r), 0) / results.length;
    const rps = (name: keyof typeof totals) => mean(totals[name], (r) => r.requests.average);
    const p50 = (name: keyof typeof totals) => mean(totals[name], (r) => r.latency.p50);
    const p99 = (name: keyof typeof totals) => mean(totals[name], (r) => r.latency.p99);
    compare({ name: 'with limiter', value: rps('limiter'), unit: 'req/s', baselineName: 'RATE_LIMIT_RPS=0', baselineValue: rps('no limiter') });
    compare({ name: 'with limiter p50', value: p50('limiter'), unit: 'ms', baselineName: 'RATE_LIMIT_RPS=0 p50', baselineValue: p50('no limiter') });
    compare({ name: 'with limiter p99', value: p99('limiter'), unit: 'ms', baselineName: 'RATE_LIMIT_RPS=0 p99', baselineValue: p99('no limiter') });
    note(`requests: ${totals.limiter.reduce((s, r) => s + r.requests.total, 0)} with the limiter, ${totals['no limiter'].reduce((s, r) => s + r.requests.total, 0)} without; every one 200`);

    // The workspace quota check at POST /runs: one process with both quotas on (limits far above the load), one with them off.
    quotas = await startService(
      loadConfig({ ...configEnv(limited.config), ROLES: 'http', RATE_LIMIT_RPS: '0', WORKSPACE_RUNS_PER_HOUR: '1000', WORKSPACE_MODEL_TOKENS_PER_DAY: '1000000000' }),
      createLogger('silent'),
    );
    const infra = limited.service.infrastructure;
    const accounts = await inPool(Array.from({ length: 2 * POSTS }, (_, i) => i), 16, async (i) => (await createAccount(infra, tenant.workspaceId, `quota ${i}`, 'none')).value.id);
    // Setup, not measured: the accounts must be in the identity read model before their runs are posted.
    if (!(await waitForProjection(infra.database.db, 'identity', await infra.store.lastSequence(), 60_000))) throw new Error('identity projection did not catch up');
    const post = (base: string, offset: number) => (i: number) =>
      fetch(`${base}/api/v1/runs`, {
        method: 'POST',
        headers: { authorization: `Bearer ${tenant.keys.write}`, 'content-type': 'application/json' },
        body: JSON.stringify({ brief: 'Benchmark run.', project_id: accounts[offset + i] }),
      });
    section(`POST /api/v1/runs, ${POSTS} runs of one workspace each, 16 at once (in-process fetch)`);
    const withQuotas = await httpLoad(POSTS, 16, 202, post(quotas.http!.url, 0));
    const withoutQuotas = await httpLoad(POSTS, 16, 202, post(unlimited.http!.url, POSTS));
    compareThroughput('with workspace quotas', POSTS, withQuotas.ms, 'quotas 0 (off)', POSTS, withoutQuotas.ms, 'req/s');
    compareLatency('with workspace quotas', withQuotas.latencies, 'quotas 0 (off)', withoutQuotas.latencies);
  } finally {
    await quotas?.stop();
    await unlimited?.stop();
    await limited.stop();
  }
}

/** The environment that reproduces `config` (same stream, schema and subject prefix), quotas off. */
function configEnv(config: ReturnType<typeof loadConfig>): Record<string, string> {
  return { ...serviceEnv(config), PORT: '0', HOST: config.host, WORKSPACE_RUNS_PER_HOUR: '0', WORKSPACE_MODEL_TOKENS_PER_DAY: '0' };
}
