import { spawn } from 'node:child_process';
import { text } from 'node:stream/consumers';
import { fileURLToPath } from 'node:url';
import autocannon from 'autocannon';

/**
 * The HTTP load generator, run in a process of its own: a client inside the measured
 * process shares its event loop and CPU and hides the server's cost (issue #14). The bench
 * calls {@link externalLoad}; this file, run as a script, drives autocannon with the plan
 * it reads as JSON on stdin (too big for argv with thousands of bodies) and prints the result as JSON.
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
  /** Open loop: requests per second offered whatever the answers take. */
  readonly overallRate?: number;
}

export interface LoadOutcome {
  readonly requests: number;
  readonly seconds: number;
  readonly throughput: number;
  /** Milliseconds, at autocannon's 1 ms resolution. */
  readonly p50: number;
  readonly p99: number;
  readonly max: number;
  /** Count per status code, e.g. { "202": 1000 }. */
  readonly statuses: Readonly<Record<string, number>>;
  readonly errors: number;
  readonly timeouts: number;
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

async function drive(plan: LoadPlan): Promise<LoadOutcome> {
  let next = 0;
  const statuses: Record<string, number> = {};
  const started = performance.now();
  const result = await autocannon({
    url: plan.url,
    connections: plan.connections,
    ...(plan.amount !== undefined ? { amount: plan.amount } : { duration: plan.seconds ?? 5 }),
    ...(plan.overallRate !== undefined ? { overallRate: plan.overallRate } : {}),
    timeout: 30,
    requests: [
      {
        method: plan.method,
        headers: { ...plan.headers },
        setupRequest: (request) => {
          const index = next++;
          const path = plan.paths[index % plan.paths.length]!;
          const body = plan.bodies?.[index % plan.bodies.length];
          return { ...request, path, ...(body !== undefined ? { body } : {}) };
        },
        onResponse: (status) => {
          statuses[status] = (statuses[status] ?? 0) + 1;
        },
      },
    ],
  });
  // autocannon's own duration is whole seconds; a 1,000-request run lasts less than that.
  const seconds = (performance.now() - started) / 1000;
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
