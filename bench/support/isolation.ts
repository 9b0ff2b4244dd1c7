import type { Config } from '../../src/config/config.ts';
import { dropIsolated, isolatedConfig } from '../../test/support/isolation.ts';

/**
 * Every private stream + schema a benchmark creates is registered here, so the runner can
 * drop whatever is left even when a benchmark throws or the run is interrupted.
 */
const live = new Map<string, Config>();
/** Drops under way, so a second caller (the runner after a signal handler) waits for them too. */
const dropping = new Set<Promise<void>>();

/** A private stream, subject prefix, snapshot bucket and Postgres schema for one benchmark section. */
export function benchConfig(label: string): Config {
  const config = isolatedConfig(`bench${label}`);
  live.set(config.eventStream, config);
  return config;
}

/**
 * Registers a configuration made elsewhere (e.g. by test/support's startTestService), so
 * the runner drops its stream and schema even when the benchmark throws.
 */
export function trackConfig(config: Config): void {
  live.set(config.eventStream, config);
}

/** Drops one configuration's stream, snapshot bucket and schema (errors are reported, not thrown). */
export async function releaseConfig(config: Config): Promise<void> {
  live.delete(config.eventStream);
  const drop = dropIsolated(config).catch((error) => {
    console.error(`cleanup of ${config.eventStream} failed: ${error instanceof Error ? error.message : String(error)}`);
  });
  dropping.add(drop);
  try {
    await drop;
  } finally {
    dropping.delete(drop);
  }
}

/** Drops everything still registered and waits for drops already under way. */
export async function releaseAll(): Promise<void> {
  for (const config of [...live.values()]) await releaseConfig(config);
  await Promise.all([...dropping]);
}
