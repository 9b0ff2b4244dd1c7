import { spawn } from 'node:child_process';
import { resolve } from 'node:path';
import type { Config } from '../../src/config/config.ts';

export interface CliResult {
  readonly code: number | null;
  readonly stdout: string;
  readonly stderr: string;
}

/** The environment that points another process (the CLI, a worker) at a test service's stream and schema. */
export function serviceEnv(config: Config): Record<string, string> {
  return {
    NATS_URL: config.natsUrl,
    ...natsAccessEnv(config),
    DATABASE_URL: config.databaseUrl,
    DATABASE_SCHEMA: config.databaseSchema,
    EVENT_STREAM: config.eventStream,
    EVENT_SUBJECT_PREFIX: config.subjectPrefix,
    PUBLIC_BASE_URL: config.publicBaseUrl,
    LOG_LEVEL: 'silent',
    // Every process listens (a worker for its health and metrics): a free port each.
    PORT: '0',
    // The same limits as the test service, so a second process behaves like the first.
    RATE_LIMIT_RPS: String(config.rateLimitRps),
    RATE_LIMIT_BURST: String(config.rateLimitBurst),
    RATE_LIMIT_ANONYMOUS_RPS: String(config.rateLimitAnonymousRps),
    RATE_LIMIT_ANONYMOUS_BURST: String(config.rateLimitAnonymousBurst),
    WORKSPACE_RUNS_PER_HOUR: String(config.workspaceRunsPerHour),
    WORKSPACE_MODEL_TOKENS_PER_DAY: String(config.workspaceModelTokensPerDay),
    ...(config.eventSigningKeyFile ? { EVENT_SIGNING_KEY_FILE: config.eventSigningKeyFile } : {}),
    ...(config.eventSigningRetiredPublicKeys ? { EVENT_SIGNING_RETIRED_PUBLIC_KEYS: config.eventSigningRetiredPublicKeys } : {}),
  };
}

/** Runs `bin/adsagent.js` as a user would (from `cwd`, default the checkout). */
export function runCli(config: Config, args: readonly string[], timeoutMs = 60_000, extraEnv: Record<string, string> = {}, cwd?: string): Promise<CliResult> {
  const { child, done } = spawnCli(config, args, extraEnv, cwd);
  const timer = setTimeout(() => child.kill('SIGKILL'), timeoutMs);
  return done.finally(() => clearTimeout(timer));
}

export function spawnCli(config: Config, args: readonly string[], extraEnv: Record<string, string> = {}, cwd?: string) {
  const child = spawn(process.execPath, [resolve('bin/adsagent.js'), ...args], {
    env: { ...process.env, ...serviceEnv(config), ...extraEnv },
    stdio: ['ignore', 'pipe', 'pipe'],
    ...(cwd ? { cwd } : {}),
  });
  let stdout = '';
  let stderr = '';
  child.stdout.on('data', (chunk) => (stdout += chunk));
  child.stderr.on('data', (chunk) => (stderr += chunk));
  // 'close', not 'exit': 'exit' can come before the last of stdout has been read, which left
  // JSON output cut short under load (a flaky "Unexpected end of JSON input").
  const done = new Promise<CliResult>((resolve) => child.once('close', (code) => resolve({ code, stdout, stderr })));
  return { child, done, stdout: () => stdout };
}

/** The NATS_USER/NATS_PASSWORD, NATS_TOKEN, NATS_CREDS and NATS_TLS_CA that give another process the same NATS access. */
export function natsAccessEnv(config: Config): Record<string, string> {
  const credentials = config.natsCredentials;
  const env: Record<string, string> =
    credentials.kind === 'user-password'
      ? { NATS_USER: credentials.user, NATS_PASSWORD: credentials.password }
      : credentials.kind === 'token'
        ? { NATS_TOKEN: credentials.token }
        : credentials.kind === 'creds-file'
          ? { NATS_CREDS: credentials.path }
          : {};
  return config.natsTlsCa ? { ...env, NATS_TLS_CA: config.natsTlsCa } : env;
}
