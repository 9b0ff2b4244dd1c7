import { spawn } from 'node:child_process';
import { Agent, request } from 'node:http';
import { text } from 'node:stream/consumers';
import { fileURLToPath } from 'node:url';
import autocannon from 'autocannon';

/**
 * The HTTP load generator, run in a process of its own: a client inside the measured
 * process shares its event loop and CPU and hides the server's cost (issue #14). The bench
 * calls {@link externalLoad}; this file, run as a script, reads the plan as JSON on stdin
 * (too big for argv with thousands of bodies), drives the load and prints the result as JSON.
 *
 * Closed loop (no `overallRate`) is autocannon. Open loop is {@link driveOpenLoop}, not
 * autocannon's `overallRate`: that one lets each connection fire its whole per-second quota
 * back to back at the top of every second, so "500 req/s" arrives as a burst of 500 at the
 * concurrency of the connection count, and the latency it reports is a closed loop's.
 */
export interface LoadPlan {
  readonly url: string;
  readonly method: 'GET' | 'POST';
  readonly headers: Readonly<Record<string, string>>;
  /** Request paths, used in rotation (e.g. one per run id). */
  readonly paths: readonly string[];
  /** Request bodies, used in rotation with the paths (e.g. one per account); none for GET. */
  readonly bodies?: readonly string[];
  readonly connections: number;
  /** Stop after this many requests… */
  readonly amount?: number;
  /** …or after this many seconds. */
  readonly seconds?: number;
  /**
   * Open loop: requests per second offered at evenly spaced instants whatever the answers
   * take (a request's latency counts from its scheduled instant); `connections` caps the
   * sockets, and a request finding them all busy waits, which its latency shows.
   */
  readonly overallRate?: number;
}

export interface LoadOutcome {
  readonly requests: number;
  readonly seconds: number;
  readonly throughput: number;
  /** Milliseconds: at autocannon's 1 ms resolution for a closed loop, to 0.01 ms for an open loop. */
  readonly p50: number;
  readonly p99: number;
  readonly max: number;
  /** Count per status code, e.g. { "202": 1000 }. */
  readonly statuses: Readonly<Record<string, number>>;
  readonly errors: number;
  readonly timeouts: number;
  /** Open loop only: the latest a request left after its scheduled instant, in ms (the client keeping up). */
  readonly maxSendLag?: number;
}

const SELF = fileURLToPath(import.meta.url);

/** Runs the plan in a new process (this file as a script) and returns what it measured. */
export async function externalLoad(plan: LoadPlan): Promise<LoadOutcome> {
  const child = spawn(process.execPath, [SELF], { stdio: ['pipe', 'pipe', 'inherit'] });
  const exited = new Promise<number | null>((resolve) => child.once('close', resolve));
  child.stdin.end(JSON.stringify(plan));
  const output = await text(child.stdout);
  const code = await exited;
  if (code !== 0) throw new Error(`load client exited with ${code}`);
  return JSON.parse(output) as LoadOutcome;
}

function drive(plan: LoadPlan): Promise<LoadOutcome> {
  return plan.overallRate !== undefined ? driveOpenLoop(plan, plan.overallRate) : driveClosedLoop(plan);
}

/**
 * Constant arrival rate (as wrk2 does it): request i is due at `i / rate` seconds and is sent
 * then, on a keep-alive socket of a pool of `connections`; its latency runs from when it was
 * due to its last body byte, so a server that falls behind is charged for the wait it causes
 * (no coordinated omission).
 */
async function driveOpenLoop(plan: LoadPlan, rate: number): Promise<LoadOutcome> {
  const amount = plan.amount ?? Math.round(rate * (plan.seconds ?? 5));
  const agent = new Agent({ keepAlive: true, maxSockets: plan.connections, maxFreeSockets: plan.connections });
  const target = new URL(plan.url);
  const latencies: number[] = [];
  const timeline: [number, number][] = [];
  const statuses: Record<string, number> = {};
  let errors = 0;
  let timeouts = 0;
  let maxSendLag = 0;
  let finished = 0;
  let done!: () => void;
  const allDone = new Promise<void>((resolve) => (done = resolve));
  const settle = () => {
    if (++finished === amount) done();
  };
  const send = (index: number, due: number) => {
    maxSendLag = Math.max(maxSendLag, performance.now() - due);
    const body = plan.bodies?.[index % plan.bodies.length];
    const req = request(
      {
        agent,
        host: target.hostname,
        port: target.port,
        method: plan.method,
        path: plan.paths[index % plan.paths.length]!,
        headers: body === undefined ? plan.headers : { ...plan.headers, 'content-length': Buffer.byteLength(body) },
        timeout: 30_000,
      },
      (res) => {
        res.resume();
        res.once('end', () => {
          latencies.push(performance.now() - due);
          if (process.env.LOAD_TRACE) timeline.push([Math.round(due - started), Math.round(performance.now() - due)]);
          statuses[res.statusCode ?? 0] = (statuses[res.statusCode ?? 0] ?? 0) + 1;
          settle();
        });
      },
    );
    let timedOut = false;
    req.once('timeout', () => {
      timedOut = true;
      timeouts++;
      req.destroy(new Error('timeout'));
    });
    req.once('error', () => {
      if (!timedOut) errors++;
      settle();
    });
    req.end(body);
  };
  await warmConnections(agent, target, plan.connections);
  const interval = 1000 / rate;
  const started = performance.now();
  let next = 0;
  // A timer cannot wake every 2 ms exactly: each tick sends every request that has come due.
  const ticker = setInterval(() => {
    const now = performance.now();
    while (next < amount && started + next * interval <= now) {
      send(next, started + next * interval);
      next++;
    }
    if (next === amount) clearInterval(ticker);
  }, 1);
  await allDone;
  const seconds = (performance.now() - started) / 1000;
  agent.destroy();
  if (process.env.LOAD_TRACE) process.stderr.write(`slowest (due ms, latency ms): ${JSON.stringify(timeline.sort((a, b) => b[1] - a[1]).slice(0, 40))}\n`);
  latencies.sort((a, b) => a - b);
  const at = (p: number) => round2(latencies[Math.min(latencies.length - 1, Math.max(0, Math.ceil((p / 100) * latencies.length) - 1))] ?? NaN);
  return {
    requests: latencies.length,
    seconds,
    throughput: latencies.length / seconds,
    p50: at(50),
    p99: at(99),
    max: round2(latencies[latencies.length - 1] ?? NaN),
    statuses,
    errors,
    timeouts,
    maxSendLag: round2(maxSendLag),
  };
}

const round2 = (value: number) => Math.round(value * 100) / 100;

/**
 * Opens the pool's sockets and runs the client's own request path a few times before the
 * clock starts (wrk2 calibrates for the same reason): a cold client in a freshly started
 * process, connecting dozens of sockets on a busy 2-core machine, otherwise shows its own
 * start as the server's latency. GET /healthz changes nothing on either server; its status
 * does not matter.
 */
async function warmConnections(agent: Agent, target: URL, connections: number): Promise<void> {
  for (let round = 0; round < 3; round++) {
    await Promise.all(
      Array.from(
        { length: connections },
        () =>
          new Promise<void>((resolve) => {
            const req = request({ agent, host: target.hostname, port: target.port, method: 'GET', path: '/healthz' }, (res) => {
              res.resume();
              res.once('end', resolve);
            });
            req.once('error', () => resolve());
            req.end();
          }),
      ),
    );
  }
}

async function driveClosedLoop(plan: LoadPlan): Promise<LoadOutcome> {
  let next = 0;
  const statuses: Record<string, number> = {};
  let started = performance.now();
  let lastAnswered = started;
  const result = await autocannon({
    url: plan.url,
    connections: plan.connections,
    ...(plan.amount !== undefined ? { amount: plan.amount } : { duration: plan.seconds ?? 5 }),
    timeout: 30,
    requests: [
      {
        method: plan.method,
        headers: { ...plan.headers },
        setupRequest: (request) => {
          const index = next++;
          if (index === 0) started = performance.now();
          const path = plan.paths[index % plan.paths.length]!;
          const body = plan.bodies?.[index % plan.bodies.length];
          return { ...request, path, ...(body !== undefined ? { body } : {}) };
        },
        onResponse: (status) => {
          statuses[status] = (statuses[status] ?? 0) + 1;
          lastAnswered = performance.now();
        },
      },
    ],
  });
  // From the first request to the last answer: autocannon hands its result over only at its next
  // one-second tick, so the wall time of a short run (1,000 requests) would cap its rate near
  // 1,000 req/s, whatever the server does, and its own duration counts whole ticks.
  const seconds = (lastAnswered - started) / 1000;
  const requests = result.requests.total;
  return {
    requests,
    seconds,
    throughput: requests / seconds,
    p50: result.latency.p50,
    p99: result.latency.p99,
    max: result.latency.max,
    statuses,
    errors: result.errors,
    timeouts: result.timeouts,
  };
}

if (process.argv[1] === SELF) {
  text(process.stdin)
    .then((input) => drive(JSON.parse(input) as LoadPlan))
    .then(
    (outcome) => process.stdout.write(JSON.stringify(outcome)),
    (error: unknown) => {
      console.error(error);
      process.exit(1);
    },
  );
}
