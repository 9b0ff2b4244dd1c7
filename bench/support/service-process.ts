import { spawn } from 'node:child_process';
import { readFile } from 'node:fs/promises';
import { createServer } from 'node:net';
import type { AddressInfo } from 'node:net';
import { openInfrastructure, type Infrastructure } from '../../src/runtime/infrastructure.ts';
import { benchConfig, releaseConfig } from './isolation.ts';

/** The service as `npm start` runs it (every role unless `env.ROLES` says otherwise), in a process of its own. */
export interface ServiceProcess {
  readonly url: string;
  /** This process's connections to the same stream and schema, for setup (operator commands). */
  readonly infrastructure: Infrastructure;
  /** Resolves once the service answers GET /api/v1/accounts with this key (its read model has the key). */
  waitUntilAccepted(authorization: string, timeoutMs?: number): Promise<void>;
  /** The process's resident set size now. */
  rssMb(): Promise<number>;
  /** Runs `work` and samples the process's RSS every 50 ms meanwhile. */
  peakRssDuring<T>(work: () => Promise<T>): Promise<{ value: T; peakMb: number }>;
  stop(): Promise<void>;
}

async function freePort(): Promise<number> {
  const server = createServer();
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as AddressInfo;
  await new Promise<void>((resolve) => server.close(() => resolve()));
  return port;
}

/**
 * Starts `node [nodeFlags] src/main.ts` on a private stream and schema (dropped by `stop`, or by the
 * runner after a failure), waits until it listens, and opens the bench's own infrastructure
 * on the same stream and schema.
 */
export async function startServiceProcess(label: string, env: Record<string, string> = {}, nodeFlags: readonly string[] = []): Promise<ServiceProcess> {
  const config = benchConfig(label);
  const port = await freePort();
  const child = spawn(process.execPath, [...nodeFlags, 'src/main.ts'], {
    env: {
      ...process.env,
      PORT: String(port),
      HOST: '127.0.0.1',
      NATS_URL: config.natsUrl,
      DATABASE_URL: config.databaseUrl,
      DATABASE_SCHEMA: config.databaseSchema,
      EVENT_STREAM: config.eventStream,
      EVENT_SUBJECT_PREFIX: config.subjectPrefix,
      EVENT_SIGNING_KEY_FILE: config.eventSigningKeyFile ?? '',
      PUBLIC_BASE_URL: config.publicBaseUrl,
      LOG_LEVEL: 'warn',
      RATE_LIMIT_RPS: '100000',
      RATE_LIMIT_BURST: '1000000',
      WORKSPACE_RUNS_PER_HOUR: '0',
      WORKSPACE_MODEL_TOKENS_PER_DAY: '0',
      ...env,
    },
    stdio: ['ignore', 'ignore', 'pipe'],
  });
  let stderr = '';
  child.stderr.on('data', (chunk: Buffer) => (stderr += chunk.toString('utf8')));
  const exited = new Promise<number | null>((resolve) => child.once('close', resolve));
  const url = `http://127.0.0.1:${port}`;
  const deadline = Date.now() + 60_000;
  for (;;) {
    if (child.exitCode !== null) throw new Error(`service process exited with ${child.exitCode}: ${stderr.slice(-2000)}`);
    if (Date.now() > deadline) throw new Error(`service process did not listen within 60 s: ${stderr.slice(-2000)}`);
    if (/listening on/.test(stderr)) break;
    await new Promise((resolve) => setTimeout(resolve, 100));
  }
  const infrastructure = await openInfrastructure(config, 'bench-service-process');
  const rssMb = async (): Promise<number> => {
    const status = await readFile(`/proc/${child.pid}/status`, 'utf8');
    const match = /VmRSS:\s+(\d+) kB/.exec(status);
    return match ? Number(match[1]) / 1024 : NaN;
  };
  return {
    url,
    infrastructure,
    rssMb,
    waitUntilAccepted: async (authorization, timeoutMs = 30_000) => {
      const until = Date.now() + timeoutMs;
      for (;;) {
        const response = await fetch(`${url}/api/v1/accounts`, { headers: { authorization } });
        await response.body?.cancel();
        if (response.status === 200) return;
        if (Date.now() > until) throw new Error(`the service process still answers ${response.status} for the bench key`);
        await new Promise((resolve) => setTimeout(resolve, 100));
      }
    },
    peakRssDuring: async (work) => {
      let peak = await rssMb();
      const sampler = setInterval(() => {
        void rssMb().then((mb) => (peak = Math.max(peak, mb)), () => undefined);
      }, 50);
      try {
        const value = await work();
        peak = Math.max(peak, await rssMb());
        return { value, peakMb: peak };
      } finally {
        clearInterval(sampler);
      }
    },
    stop: async () => {
      try {
        child.kill('SIGTERM');
        const timer = setTimeout(() => child.kill('SIGKILL'), 15_000);
        await exited;
        clearTimeout(timer);
        await infrastructure.close();
      } finally {
        await releaseConfig(config);
      }
    },
  };
}
