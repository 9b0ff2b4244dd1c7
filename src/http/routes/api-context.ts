import type { Kysely } from 'kysely';
import type { WriteModel } from '../../../commands/write-model.ts';
import type { KeyDirectory } from '../../auth/key-directory.ts';
import type { Config } from '../../config/config.ts';
import type { Database } from '../../db/schema.ts';
import type { Logger } from '../../log/logger.ts';
import type { ReadBarrier } from '../../runtime/read-barrier.ts';
import type { AdsPlatform } from '../../platform/ads-platform.ts';
import type { ProposalService } from '../../policy/proposal-service.ts';
import type { IdempotencyStore } from '../idempotency/idempotency-store.ts';
import type { TerminalRunCache } from './terminal-run-cache.ts';

/** What the API routes need: the write model to change state, the read models to answer. */
export interface ApiContext {
  readonly config: Config;
  readonly logger: Logger;
  readonly db: Kysely<Database>;
  readonly writeModel: WriteModel;
  readonly barrier: ReadBarrier;
  readonly keys: KeyDirectory;
  readonly idempotency: IdempotencyStore;
  readonly runCache: TerminalRunCache;
  readonly platform: AdsPlatform;
  readonly proposals: ProposalService;
}

const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/;
const TOKEN = /^[A-Za-z0-9_-]{1,64}$/;

export function isUuid(value: string): boolean {
  return UUID.test(value);
}

/** Ids that can name an aggregate subject; anything else cannot exist. */
export function isIdToken(value: string): boolean {
  return TOKEN.test(value);
}
