import { spawn, type ChildProcess } from 'node:child_process';
import { createAccount, createWorkspace, issueKey } from '../src/operator/operator-commands.ts';
import { serviceEnv } from '../test/support/cli.ts';
import { freePort } from '../test/support/private-nats.ts';
import { PrivateNatsCluster } from '../test/support/private-nats-cluster.ts';
import { startTestService } from '../test/support/test-service.ts';
import { inPool } from './support/bench-service.ts';
import { externalLoad, type LoadOutcome } from './support/load-client.ts';
import { compare, figure, note, section, timed } from './support/report.ts';

/**
 * Scale-out on a real cluster: three local nats-server processes clustered, the event stream
 * at 3 replicas, projectors in this process, and one or two HTTP processes (`node src/main.ts`,
 * ROLES=http). POST /api/v1/runs in a closed loop on idle accounts (platform `none`, so no
 * worker is needed), driven by autocannon in separate processes: one HTTP process alone, then
 * two at once (one load client each), in the same run.
 */

const POSTS_PER_PROCESS = 1_000;
const CONNECTIONS = 32;
const BRIEF = 'Which campaigns spent the most last week?';

interface HttpProcess {
  readonly url: string;
  readonly child: ChildProcess;
}

async function startHttpProcess(env: Record<string, string>): Promise<HttpProcess> {
  const port = await freePort();
  const child = spawn(process.execPath, ['src/main.ts'], {
    env: { ...process.env, ...env, ROLES: 'http', HOST: '127.0.0.1', PORT: String(port), LOG_LEVEL: 'warn' },
    stdio: ['ignore', 'ignore', 'pipe'],
  });
  let stderr = '';
  child.stderr!.on('data', (chunk: Buffer) => (stderr += chunk.toString()));
  const deadline = Date.now() + 60_000;
  while (!/listening on/.test(stderr)) {
    if (child.exitCode !== null) throw new Error(`HTTP process exited with ${child.exitCode}: ${stderr.slice(-1000)}`);
    if (Date.now() > deadline) throw new Error(`HTTP process did not listen within 60 s: ${stderr.slice(-1000)}`);
    await new Promise((resolve) => setTimeout(resolve, 100));
  }
  return { url: `http://127.0.0.1:${port}`, child };
}

function posts(url: string, key: string, accounts: readonly string[]): Promise<LoadOutcome> {
  return externalLoad({
    url,
    method: 'POST',
    headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json' },
    paths: ['/api/v1/runs'],
    bodies: accounts.map((projectId) => JSON.stringify({ brief: BRIEF, project_id: projectId })),
    connections: CONNECTIONS,
    amount: accounts.length,
  });
}

function only202(outcome: LoadOutcome, what: string): void {
  const others = Object.entries(outcome.statuses).filter(([status]) => status !== '202');
  if (others.length > 0 || outcome.errors > 0) throw new Error(`${what}: ${JSON.stringify(outcome.statuses)}, ${outcome.errors} errors`);
}

export async function run(): Promise<void> {
  section(`scale-out: POST /runs closed loop (${CONNECTIONS} connections per HTTP process) on a 3-node NATS cluster, stream at 3 replicas`);
  const cluster = await PrivateNatsCluster.start(3);
  const processes: HttpProcess[] = [];
  const svc = await startTestService('benchcluster', { NATS_URL: cluster.url, EVENT_STREAM_REPLICAS: '3', ROLES: 'projectors', LOG_LEVEL: 'silent' });
  try {
    const infra = svc.service.infrastructure;
    const ws = (await createWorkspace(infra, 'bench cluster')).value.id;
    const key = (await issueKey(infra, ws, 'write', 'bench')).value.key;
    const setup = await timed(() => inPool(Array.from({ length: POSTS_PER_PROCESS * 4 + 64 }, (_, i) => i), 16, async (i) => (await createAccount(infra, ws, `c${i}`, 'none')).value.id));
    figure('setup: accounts (none) on the cluster', setup.ms / 1000, 's', `(${setup.value.length}, not a result)`);
    const accounts = setup.value;
    const env = { ...serviceEnv(svc.config), EVENT_STREAM_REPLICAS: '3' };
    processes.push(await startHttpProcess(env), await startHttpProcess(env));
    const [first, second] = processes as [HttpProcess, HttpProcess];
    note('HTTP processes: node src/main.ts, ROLES=http; projectors in the bench process; load: autocannon, one process per target');

    const slice = (from: number) => accounts.slice(from, from + POSTS_PER_PROCESS);
    only202(await posts(first.url, key, accounts.slice(POSTS_PER_PROCESS * 4, POSTS_PER_PROCESS * 4 + 32)), 'warm-up');
    only202(await posts(second.url, key, accounts.slice(POSTS_PER_PROCESS * 4 + 32)), 'warm-up');

    const one = await posts(first.url, key, slice(0));
    only202(one, 'one HTTP process');
    const started = performance.now();
    const [a, b] = await Promise.all([posts(first.url, key, slice(POSTS_PER_PROCESS)), posts(second.url, key, slice(POSTS_PER_PROCESS * 2))]);
    const bothSeconds = (performance.now() - started) / 1000;
    only202(a, 'two HTTP processes (first)');
    only202(b, 'two HTTP processes (second)');
    const two = (a.requests + b.requests) / bothSeconds;

    compare({ name: 'two HTTP processes, together', value: two, unit: 'req/s', baselineName: 'one HTTP process', baselineValue: one.throughput, ratioNote: '(scale-out)' });
    figure('one HTTP process p99', one.p99, 'ms');
    figure('two HTTP processes p99 (worse of the two)', Math.max(a.p99, b.p99), 'ms');
    note('2 cores on this machine run the 3 nats-servers, Postgres, both HTTP processes, the projectors and the load clients: the ratio says how much of the second process the rest leaves room for, not what a second machine would add');
  } finally {
    for (const { child } of processes) child.kill('SIGKILL');
    await svc.stop().catch(() => undefined);
    await cluster.dispose();
  }
}
