import { generateKeyPairSync, randomBytes } from 'node:crypto';
import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { jetstreamManager } from '@nats-io/jetstream';
import pg from 'pg';
import { loadConfig, type Config } from '../../src/config/config.ts';
import { connectNats } from '../../src/event-store/nats-connection.ts';

export const TEST_DATABASE_URL = process.env.TEST_DATABASE_URL ?? 'postgres://postgres@127.0.0.1:5432/adsagent_test';
export const TEST_NATS_URL = process.env.NATS_URL ?? 'nats://127.0.0.1:4222';
/** NATS credentials and CA from the environment, so tests and benchmarks also run against a secured NATS. */
const TEST_NATS_ACCESS = Object.fromEntries(
  ['NATS_USER', 'NATS_PASSWORD', 'NATS_TOKEN', 'NATS_CREDS', 'NATS_TLS_CA'].flatMap((name) => (process.env[name] ? [[name, process.env[name]!]] : [])),
);

let testKeyFile: string | undefined;
/**
 * One Ed25519 signing key per test process, in a temporary directory: tests must not
 * generate the development key into the repository.
 */
export function testSigningKeyFile(): string {
  testKeyFile ??= writeTestSigningKey();
  return testKeyFile;
}

/** A fresh PKCS#8 PEM Ed25519 key in a temporary directory; its path. */
export function writeTestSigningKey(): string {
  const path = join(mkdtempSync(join(tmpdir(), 'adsagent-key-')), 'event-signing-key.pem');
  writeFileSync(path, generateKeyPairSync('ed25519').privateKey.export({ format: 'pem', type: 'pkcs8' }), { mode: 0o600 });
  return path;
}

/**
 * A configuration no other test file shares: its own stream, subject prefix and
 * Postgres schema, so test files never see each other's data.
 */
export function isolatedConfig(label: string, overrides: Record<string, string> = {}): Config {
  const suffix = `${label.replace(/[^a-z0-9]/gi, '').toLowerCase().slice(0, 20)}_${randomBytes(4).toString('hex')}`;
  return loadConfig({
    PORT: '0',
    HOST: '127.0.0.1',
    NATS_URL: TEST_NATS_URL,
    ...TEST_NATS_ACCESS,
    DATABASE_URL: TEST_DATABASE_URL,
    DATABASE_SCHEMA: `t_${suffix}`,
    EVENT_STREAM: `T_${suffix}`,
    EVENT_SUBJECT_PREFIX: `t${suffix.replace(/_/g, '-')}`,
    PUBLIC_BASE_URL: 'http://api.test',
    LOG_LEVEL: process.env.TEST_LOG_LEVEL ?? 'silent',
    SHUTDOWN_GRACE_MS: '2000',
    EVENT_SIGNING_KEY_FILE: testSigningKeyFile(),
    // The limiter stays in the path (its headers are checked against the OpenAPI document) but
    // with budgets no functional test reaches; the limit tests set their own. Quotas likewise.
    RATE_LIMIT_RPS: '100000',
    RATE_LIMIT_BURST: '1000000',
    RATE_LIMIT_ANONYMOUS_RPS: '100000',
    RATE_LIMIT_ANONYMOUS_BURST: '1000000',
    WORKSPACE_RUNS_PER_HOUR: '0',
    WORKSPACE_MODEL_TOKENS_PER_DAY: '0',
    ...overrides,
  });
}

/** Deletes what an isolated configuration created: stream, snapshot and signing buckets, schema. */
export async function dropIsolated(config: Config): Promise<void> {
  const nc = await connectNats(config, 'test-cleanup');
  try {
    const jsm = await jetstreamManager(nc);
    for (const name of [config.eventStream, `KV_${config.eventStream}_snapshots`, `KV_${config.eventStream}_signing`]) {
      await jsm.streams.delete(name).catch(() => undefined);
    }
  } finally {
    await nc.close();
  }
  const client = new pg.Client({ connectionString: config.databaseUrl });
  await client.connect();
  try {
    await client.query(`DROP SCHEMA IF EXISTS "${config.databaseSchema}" CASCADE`);
    await client.query(`DROP SCHEMA IF EXISTS "${config.databaseSchema}_rebuild" CASCADE`);
  } finally {
    await client.end();
  }
}
