import { randomBytes } from 'node:crypto';
import { jetstreamManager } from '@nats-io/jetstream';
import { connect } from '@nats-io/transport-node';
import pg from 'pg';
import { loadConfig, type Config } from '../../src/config/config.ts';

export const TEST_DATABASE_URL = process.env.TEST_DATABASE_URL ?? 'postgres://postgres@127.0.0.1:5432/adsagent_test';
export const TEST_NATS_URL = process.env.NATS_URL ?? 'nats://127.0.0.1:4222';

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
    DATABASE_URL: TEST_DATABASE_URL,
    DATABASE_SCHEMA: `t_${suffix}`,
    EVENT_STREAM: `T_${suffix}`,
    EVENT_SUBJECT_PREFIX: `t${suffix.replace(/_/g, '-')}`,
    PUBLIC_BASE_URL: 'http://api.test',
    LOG_LEVEL: process.env.TEST_LOG_LEVEL ?? 'silent',
    SHUTDOWN_GRACE_MS: '2000',
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

/** Deletes what an isolated configuration created: stream, snapshot bucket, schema. */
export async function dropIsolated(config: Config): Promise<void> {
  const nc = await connect({ servers: config.natsUrl });
  try {
    const jsm = await jetstreamManager(nc);
    for (const name of [config.eventStream, `KV_${config.eventStream}_snapshots`]) {
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
