import { natsAccess, type NatsCredentials } from './nats-access-config.ts';
import { redactUrlValue } from '../log/redact-url.ts';

/**
 * Configuration comes only from environment variables. Every variable is listed in
 * `CONFIG_VARIABLES` (the README's table is checked against it by a test), parsed once
 * at start, and every problem is reported at once instead of one per restart.
 */
export const ROLES = ['http', 'projectors', 'agent-worker', 'apply-worker'] as const;
export type Role = (typeof ROLES)[number];

/** How the service proves who it is to NATS (deploy/nats/auth.conf defines the users). */
export type { NatsCredentials } from './nats-access-config.ts';

export const LOG_LEVELS = ['fatal', 'error', 'warn', 'info', 'debug', 'trace', 'silent'] as const;
export type LogLevel = (typeof LOG_LEVELS)[number];

export interface Config {
  readonly port: number;
  readonly host: string;
  readonly natsUrl: string;
  /** NATS_REQUEST_TIMEOUT_MS: what every JetStream request waits for its answer. */
  readonly natsRequestTimeoutMs: number;
  readonly natsCredentials: NatsCredentials;
  /** CA certificate (PEM file) that signed the NATS servers' certificates; set, TLS is required. */
  readonly natsTlsCa: string | undefined;
  readonly databaseUrl: string;
  /** Postgres schema that holds every table of this deployment (tests use one each). */
  readonly databaseSchema: string;
  readonly publicBaseUrl: string;
  readonly logLevel: LogLevel;
  /** JetStream stream that holds every event. */
  readonly eventStream: string;
  /** First token of every event subject; the hierarchy below it is the public contract. */
  readonly subjectPrefix: string;
  readonly streamReplicas: number;
  readonly roles: readonly Role[];
  readonly bodyLimitBytes: number;
  readonly briefMaxLength: number;
  readonly shutdownGraceMs: number;
  readonly geminiApiKey: string | undefined;
  readonly geminiModel: string;
  readonly geminiBaseUrl: string | undefined;
  readonly runTimeoutMs: number;
  readonly runModelBudgetMs: number;
  readonly agentWorkerConcurrency: number;
  readonly agentAckWaitMs: number;
  /** APPLY_ACK_WAIT_MS: the apply workers' consumer's ack wait; a claim's lease is half of it. */
  readonly applyAckWaitMs: number;
  // Bounds of streams, history pages and worker loops (issue #10 items 5-7).
  readonly sseMaxStreamsPerKey: number;
  readonly sseMaxLifetimeMs: number;
  readonly sseKeyRecheckMs: number;
  readonly historyScanBudget: number;
  readonly historyMaxPageBytes: number;
  readonly workerMaxDeliveries: number;
  readonly agentMaxRunsPerWorkspace: number;
  /** PKCS#8 PEM Ed25519 key that signs every event; undefined: a generated local key (development only). */
  readonly eventSigningKeyFile: string | undefined;
  /** A PEM file (one or more PUBLIC KEY blocks) or a directory of *.pem files: retired keys still believed. */
  readonly eventSigningRetiredPublicKeys: string | undefined;
  /** Requests per second per API key; 0 turns the rate limiter off (benchmarks only). */
  readonly rateLimitRps: number;
  readonly rateLimitBurst: number;
  readonly rateLimitAnonymousRps: number;
  readonly rateLimitAnonymousBurst: number;
  /** 0 means unlimited. */
  readonly workspaceRunsPerHour: number;
  /** 0 means unlimited. */
  readonly workspaceModelTokensPerDay: number;
  /** Where and how the Google Ads adapter reaches Google (issue #11). */
  readonly googleAds: GoogleAdsConfig;
  /** 32-byte AES-256-GCM key that encrypts stored platform credentials; required once a Google Ads account exists. */
  readonly credentialsKey: Buffer | undefined;
  readonly googleAdsChangeImportIntervalMs: number;
}

export interface GoogleAdsConfig {
  /** No trailing slash. */
  readonly apiBaseUrl: string;
  readonly apiVersion: string;
  readonly oauthTokenUrl: string;
  readonly clientId: string | undefined;
  readonly clientSecret: string | undefined;
  readonly developerToken: string | undefined;
}

export interface ConfigVariable {
  readonly name: string;
  readonly default: string;
  readonly description: string;
}

export const CONFIG_VARIABLES: readonly ConfigVariable[] = [
  { name: 'PORT', default: '8080', description: 'HTTP port: the API with the http role; /healthz, /readyz and /metrics only without it (one port per process on a host; 0 takes a free one).' },
  { name: 'HOST', default: '127.0.0.1', description: 'HTTP bind address (0.0.0.0 in containers).' },
  { name: 'NATS_URL', default: 'nats://127.0.0.1:4222', description: 'NATS server(s) with JetStream, comma separated.' },
  { name: 'NATS_USER', default: '', description: 'NATS user name (e.g. ads-service, deploy/nats/auth.conf); needs NATS_PASSWORD.' },
  { name: 'NATS_PASSWORD', default: '', description: 'Password of NATS_USER. Never logged.' },
  { name: 'NATS_TOKEN', default: '', description: 'NATS token authentication, instead of NATS_USER. Never logged.' },
  { name: 'NATS_CREDS', default: '', description: 'Path of a NATS credentials file (JWT + nkey seed), instead of NATS_USER or NATS_TOKEN.' },
  { name: 'NATS_TLS_CA', default: '', description: 'Path of the CA certificate (PEM) of the NATS servers; set, connections use TLS and verify the server.' },
  {
    name: 'NATS_REQUEST_TIMEOUT_MS',
    default: '5000',
    description: 'How long a JetStream request (an append, a stream or consumer lookup) waits for its answer; then it fails, and the API answers 503 with Retry-After.',
  },
  { name: 'DATABASE_URL', default: 'postgres://postgres@127.0.0.1:5432/adsagent', description: 'PostgreSQL connection URL.' },
  { name: 'DATABASE_SCHEMA', default: 'adsagent', description: 'Postgres schema for every table of this deployment.' },
  { name: 'PUBLIC_BASE_URL', default: 'http://localhost:8080', description: 'Origin used for absolute URLs in responses (poll_url, Location, approvals_url).' },
  { name: 'LOG_LEVEL', default: 'info', description: `One of ${LOG_LEVELS.join(', ')}.` },
  { name: 'EVENT_STREAM', default: 'ADS_EVENTS', description: 'JetStream stream name holding every event.' },
  { name: 'EVENT_SUBJECT_PREFIX', default: 'ads', description: 'First token of every event subject.' },
  { name: 'EVENT_STREAM_REPLICAS', default: '1', description: 'Stream replicas: 1 on a single node, 3 on the production cluster.' },
  { name: 'ROLES', default: ROLES.join(','), description: `Roles this process runs, comma separated: ${ROLES.join(', ')}.` },
  { name: 'BODY_LIMIT_BYTES', default: '65536', description: 'Largest accepted request body.' },
  { name: 'BRIEF_MAX_LENGTH', default: '8000', description: 'Largest accepted brief, in characters.' },
  { name: 'SHUTDOWN_GRACE_MS', default: '10000', description: 'How long SIGTERM waits for in-flight work before exiting; the process is gone at most 5 s after it, and a second SIGTERM or SIGINT exits at once.' },
  { name: 'GEMINI_API_KEY', default: '', description: 'When set, runs use Gemini; otherwise the built-in rules agent.' },
  { name: 'GEMINI_MODEL', default: 'gemini-2.5-flash', description: 'Gemini model name.' },
  { name: 'GEMINI_BASE_URL', default: '', description: 'Override of the Gemini API base URL (tests point it at a local server).' },
  { name: 'RUN_TIMEOUT_MS', default: '600000', description: 'Wall clock of one run (10 minutes); exceeding it fails the run with timed_out.' },
  { name: 'RUN_MODEL_BUDGET_MS', default: '300000', description: 'Total time a run may spend waiting on the model; exceeding it gives timed_out.' },
  { name: 'AGENT_WORKER_CONCURRENCY', default: '4', description: 'Runs one agent-worker process works on at once.' },
  { name: 'AGENT_ACK_WAIT_MS', default: '30000', description: 'A run whose worker stops heartbeating for this long is taken as dead and failed with internal.' },
  {
    name: 'APPLY_ACK_WAIT_MS',
    default: '60000',
    description:
      "How long an apply worker's message waits without a heartbeat before another worker gets it (a worker died mid-apply); the claim's lease is half of it. At least 8000; the same on every process.",
  },
  { name: 'SSE_MAX_STREAMS_PER_KEY', default: '5', description: 'Open run event streams one API key may hold in one HTTP process; one more answers 429.' },
  { name: 'SSE_MAX_LIFETIME_MS', default: '900000', description: 'A run event stream is ended after this long (15 minutes); the client reconnects with Last-Event-ID.' },
  { name: 'SSE_KEY_RECHECK_MS', default: '5000', description: 'How often an open run event stream re-checks its API key; a revoked key ends the stream.' },
  { name: 'HISTORY_SCAN_BUDGET', default: '5000', description: 'Events one history request reads at most; past it the page ends with a next_cursor.' },
  { name: 'HISTORY_MAX_PAGE_BYTES', default: '1048576', description: 'Largest JSON a history page carries (bytes); past it the page ends with a next_cursor.' },
  { name: 'WORKER_MAX_DELIVERIES', default: '5', description: 'Deliveries of one message after which the agent and apply workers park it as poison and go on.' },
  { name: 'AGENT_MAX_RUNS_PER_WORKSPACE', default: '2', description: 'Runs of one workspace one agent-worker process works on at once; more are deferred so other workspaces get their turn.' },
  {
    name: 'EVENT_SIGNING_KEY_FILE',
    default: '',
    description: 'PKCS#8 PEM Ed25519 private key that signs every event; must exist when set. Unset: a key generated on first start in .adsagent/event-signing-key.pem under the working directory (development only; production must set it).',
  },
  {
    name: 'EVENT_SIGNING_RETIRED_PUBLIC_KEYS',
    default: '',
    description: 'Retired event signing keys still believed after a rotation: a PEM file of PUBLIC KEY blocks or a directory of *.pem files.',
  },
  { name: 'RATE_LIMIT_RPS', default: '20', description: 'Requests per second each API key may sustain (token bucket, per HTTP process); 0 turns rate limiting off.' },
  { name: 'RATE_LIMIT_BURST', default: '40', description: 'Requests an idle API key may send at once.' },
  { name: 'RATE_LIMIT_ANONYMOUS_RPS', default: '2', description: 'Requests per second per client address for requests without a valid key.' },
  { name: 'RATE_LIMIT_ANONYMOUS_BURST', default: '10', description: 'Requests without a valid key an idle client address may send at once.' },
  { name: 'WORKSPACE_RUNS_PER_HOUR', default: '120', description: 'Runs a workspace may start in any rolling hour (POST /api/v1/runs answers 429 beyond); 0 means unlimited.' },
  { name: 'WORKSPACE_MODEL_TOKENS_PER_DAY', default: '5000000', description: 'Model tokens (input + output) a workspace may use per UTC day before POST /api/v1/runs answers 429; 0 means unlimited.' },
  { name: 'GOOGLE_ADS_API_BASE_URL', default: 'https://googleads.googleapis.com', description: 'Google Ads REST API origin (tests point it at a local fake).' },
  { name: 'GOOGLE_ADS_API_VERSION', default: 'v26', description: 'Google Ads API version in request paths (vNN).' },
  { name: 'GOOGLE_OAUTH_TOKEN_URL', default: 'https://oauth2.googleapis.com/token', description: 'OAuth 2.0 token endpoint that turns refresh tokens into access tokens.' },
  { name: 'GOOGLE_ADS_CLIENT_ID', default: '', description: 'OAuth client id of the Google Cloud project the refresh tokens were issued to; needed for Google Ads accounts.' },
  { name: 'GOOGLE_ADS_CLIENT_SECRET', default: '', description: 'OAuth client secret of that client. Never logged.' },
  { name: 'GOOGLE_ADS_DEVELOPER_TOKEN', default: '', description: 'Google Ads developer token, sent as the developer-token header when set. Never logged.' },
  {
    name: 'GOOGLE_ADS_CHANGE_IMPORT_INTERVAL_MS',
    default: '300000',
    description: 'How often the apply-worker role imports Google Ads change_event rows into each Google Ads account\'s history (5 minutes); 0 turns the import off.',
  },
  {
    name: 'CREDENTIALS_KEY',
    default: '',
    description: 'Base64 of 32 random bytes: the AES-256-GCM key that encrypts stored refresh tokens (outside the event log). Required once a Google Ads account exists. Never logged.',
  },
];

export class ConfigError extends Error {
  readonly problems: readonly string[];

  constructor(problems: readonly string[]) {
    super(`invalid configuration: ${problems.join('; ')}`);
    this.problems = problems;
    this.name = 'ConfigError';
  }
}

type Env = Readonly<Record<string, string | undefined>>;

/**
 * Parses and validates the environment.
 *
 * @example
 * ```ts
 * const config = loadConfig({ ...process.env, PORT: '0' });
 * ```
 * @throws ConfigError listing every invalid variable.
 */
export function loadConfig(env: Env = process.env): Config {
  const problems: string[] = [];
  const raw = (name: string): string => {
    const value = env[name];
    if (value !== undefined && value.trim() !== '') return value.trim();
    return CONFIG_VARIABLES.find((v) => v.name === name)?.default ?? '';
  };
  const integer = (name: string, min: number, max: number): number => {
    const text = raw(name);
    const value = Number(text);
    if (!/^\d+$/.test(text) || value < min || value > max) {
      problems.push(`${name} must be an integer from ${min} to ${max}, got '${text}'`);
      return min;
    }
    return value;
  };
  const url = (name: string, protocols: readonly string[]): string => {
    const text = raw(name);
    for (const part of text.split(',')) {
      try {
        const parsed = new URL(part.trim());
        if (!protocols.includes(parsed.protocol)) problems.push(`${name} must use ${protocols.join(' or ')}, got '${redactUrlValue(part)}'`);
      } catch {
        problems.push(
          `${name} is not a URL: '${redactUrlValue(part)}'; a password or user name holding characters such as # / ? @ % or a space must be percent-encoded (encodeURIComponent)`,
        );
      }
    }
    return text;
  };
  const token = (name: string, pattern: RegExp, rule: string): string => {
    const text = raw(name);
    if (!pattern.test(text)) problems.push(`${name} ${rule}, got '${text}'`);
    return text;
  };

  const logLevel = raw('LOG_LEVEL') as LogLevel;
  if (!LOG_LEVELS.includes(logLevel)) problems.push(`LOG_LEVEL must be one of ${LOG_LEVELS.join(', ')}, got '${logLevel}'`);

  const roles = raw('ROLES').split(',').map((r) => r.trim()).filter(Boolean) as Role[];
  for (const role of roles) if (!ROLES.includes(role)) problems.push(`ROLES has unknown role '${role}' (known: ${ROLES.join(', ')})`);
  if (roles.length === 0) problems.push('ROLES must name at least one role');

  const publicBaseUrl = url('PUBLIC_BASE_URL', ['http:', 'https:']).replace(/\/+$/, '');
  const geminiBaseUrl = raw('GEMINI_BASE_URL');
  if (geminiBaseUrl) url('GEMINI_BASE_URL', ['http:', 'https:']);

  const googleAdsBaseUrl = url('GOOGLE_ADS_API_BASE_URL', ['http:', 'https:']).replace(/\/+$/, '');
  const oauthTokenUrl = url('GOOGLE_OAUTH_TOKEN_URL', ['http:', 'https:']);
  const googleAdsVersion = token('GOOGLE_ADS_API_VERSION', /^v[1-9][0-9]{0,2}$/, "must look like 'v26'");
  const credentialsKey = parseCredentialsKey(raw('CREDENTIALS_KEY'), problems);

  const config: Config = {
    port: integer('PORT', 0, 65535),
    host: raw('HOST'),
    natsUrl: url('NATS_URL', ['nats:', 'tls:', 'ws:', 'wss:']),
    ...natsAccess(raw, problems),
    natsRequestTimeoutMs: integer('NATS_REQUEST_TIMEOUT_MS', 500, 60_000),
    databaseUrl: url('DATABASE_URL', ['postgres:', 'postgresql:']),
    databaseSchema: token('DATABASE_SCHEMA', /^[a-z_][a-z0-9_]{0,62}$/, 'must be a lower-case SQL identifier'),
    publicBaseUrl,
    logLevel,
    eventStream: token('EVENT_STREAM', /^[A-Za-z0-9_-]{1,64}$/, 'must be letters, digits, _ or -'),
    subjectPrefix: token('EVENT_SUBJECT_PREFIX', /^[a-z][a-z0-9_-]{0,31}$/, 'must be one lower-case subject token'),
    streamReplicas: integer('EVENT_STREAM_REPLICAS', 1, 5),
    roles,
    bodyLimitBytes: integer('BODY_LIMIT_BYTES', 1024, 10 * 1024 * 1024),
    briefMaxLength: integer('BRIEF_MAX_LENGTH', 1, 100_000),
    shutdownGraceMs: integer('SHUTDOWN_GRACE_MS', 0, 600_000),
    geminiApiKey: raw('GEMINI_API_KEY') || undefined,
    geminiModel: raw('GEMINI_MODEL'),
    geminiBaseUrl: geminiBaseUrl || undefined,
    runTimeoutMs: integer('RUN_TIMEOUT_MS', 100, 3_600_000),
    runModelBudgetMs: integer('RUN_MODEL_BUDGET_MS', 100, 3_600_000),
    agentWorkerConcurrency: integer('AGENT_WORKER_CONCURRENCY', 1, 64),
    agentAckWaitMs: integer('AGENT_ACK_WAIT_MS', 1000, 600_000),
    applyAckWaitMs: integer('APPLY_ACK_WAIT_MS', 8000, 600_000),
    sseMaxStreamsPerKey: integer('SSE_MAX_STREAMS_PER_KEY', 1, 1000),
    sseMaxLifetimeMs: integer('SSE_MAX_LIFETIME_MS', 1000, 86_400_000),
    sseKeyRecheckMs: integer('SSE_KEY_RECHECK_MS', 100, 600_000),
    historyScanBudget: integer('HISTORY_SCAN_BUDGET', 10, 1_000_000),
    historyMaxPageBytes: integer('HISTORY_MAX_PAGE_BYTES', 65_536, 64 * 1024 * 1024),
    workerMaxDeliveries: integer('WORKER_MAX_DELIVERIES', 2, 1000),
    agentMaxRunsPerWorkspace: integer('AGENT_MAX_RUNS_PER_WORKSPACE', 1, 64),
    eventSigningKeyFile: raw('EVENT_SIGNING_KEY_FILE') || undefined,
    eventSigningRetiredPublicKeys: raw('EVENT_SIGNING_RETIRED_PUBLIC_KEYS') || undefined,
    rateLimitRps: integer('RATE_LIMIT_RPS', 0, 100_000),
    rateLimitBurst: integer('RATE_LIMIT_BURST', 1, 1_000_000),
    rateLimitAnonymousRps: integer('RATE_LIMIT_ANONYMOUS_RPS', 1, 100_000),
    rateLimitAnonymousBurst: integer('RATE_LIMIT_ANONYMOUS_BURST', 1, 1_000_000),
    workspaceRunsPerHour: integer('WORKSPACE_RUNS_PER_HOUR', 0, 1_000_000),
    workspaceModelTokensPerDay: integer('WORKSPACE_MODEL_TOKENS_PER_DAY', 0, 1_000_000_000_000),
    googleAds: {
      apiBaseUrl: googleAdsBaseUrl,
      apiVersion: googleAdsVersion,
      oauthTokenUrl,
      clientId: raw('GOOGLE_ADS_CLIENT_ID') || undefined,
      clientSecret: raw('GOOGLE_ADS_CLIENT_SECRET') || undefined,
      developerToken: raw('GOOGLE_ADS_DEVELOPER_TOKEN') || undefined,
    },
    credentialsKey,
    googleAdsChangeImportIntervalMs: integer('GOOGLE_ADS_CHANGE_IMPORT_INTERVAL_MS', 0, 86_400_000),
  };
  if (problems.length > 0) throw new ConfigError(problems);
  return config;
}

/** Base64 (standard or url-safe) of exactly 32 bytes; the problem never quotes the value. */
function parseCredentialsKey(text: string, problems: string[]): Buffer | undefined {
  if (text === '') return undefined;
  const bytes = /^[A-Za-z0-9+/_-]+={0,2}$/.test(text) ? Buffer.from(text, text.includes('-') || text.includes('_') ? 'base64url' : 'base64') : Buffer.alloc(0);
  if (bytes.length !== 32) {
    problems.push(`CREDENTIALS_KEY must be base64 of exactly 32 bytes (e.g. \`openssl rand -base64 32\`), got ${bytes.length} bytes`);
    return undefined;
  }
  return bytes;
}
