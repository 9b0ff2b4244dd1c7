import type { Kysely } from 'kysely';
import type { Database } from '../db/schema.ts';
import type { AdsPlatform } from './ads-platform.ts';
import { SandboxPlatform } from './sandbox/sandbox-platform.ts';

/**
 * The ads platform the service talks to. Accounts connected to `sandbox` (the embedded
 * default) are served by generated data in Postgres; a Google Ads adapter plugs in here.
 */
export function createPlatform(db: Kysely<Database>): AdsPlatform {
  return new SandboxPlatform(db);
}
