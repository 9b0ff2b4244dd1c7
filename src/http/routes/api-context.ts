import type { Kysely } from 'kysely';
import type { Commands } from '../../../commands/command-bus.ts';
import type { Aggregates } from '../../../commands/shared/aggregates.ts';
import type { JetStreamEventStore } from '../../event-store/jetstream-event-store.ts';
import type { Subjects } from '../../event-store/subjects.ts';
import type { KeyDirectory } from '../../auth/key-directory.ts';
import type { Config } from '../../config/config.ts';
import type { Database } from '../../db/schema.ts';
import type { Logger } from '../../log/logger.ts';
import type { ReadBarrier } from '../../runtime/read-barrier.ts';
import type { AdsPlatform } from '../../platform/ads-platform.ts';
import type { ProposalService } from '../../policy/proposal-service.ts';
import type { IdempotencyStore } from '../idempotency/idempotency-store.ts';
import type { TerminalRunCache } from './terminal-run-cache.ts';
import type { LiveRun } from '../../runtime/live-runs.ts';

/** Where GET finds runs this process follows live. */
export interface LiveRunSource {
  get(runId: string): LiveRun | undefined;
  /** True once everything the stream holds now is folded. */
  catchUp(timeoutMs?: number): Promise<boolean>;
  /** The sequence of the workspace's latest run end that the read model may not hold yet. */
  endAhead(workspaceId: string): number | undefined;
  settled(workspaceId: string, seq: number): void;
}

/** What the API routes need: the command side to change state, the read models to answer. */
export interface ApiContext {
  readonly config: Config;
  readonly logger: Logger;
  readonly db: Kysely<Database>;
  /** Changes state (commands/command-bus.ts). */
  readonly commands: Commands;
  /** Decision state, for the queries in commands/queries.ts. */
  readonly aggregates: Aggregates;
  /** The raw event log, for history and event streams. */
  readonly store: JetStreamEventStore;
  readonly subjects: Subjects;
  readonly barrier: ReadBarrier;
  readonly keys: KeyDirectory;
  readonly idempotency: IdempotencyStore;
  readonly runCache: TerminalRunCache;
  /** Queued and running runs folded in memory (src/runtime/run-state-follower.ts); Postgres when absent. */
  readonly liveRuns?: LiveRunSource;
  readonly platform: AdsPlatform;
  readonly proposals: ProposalService;
}

/** Ids that can name an aggregate subject (a NATS subject token we allow); anything else cannot exist. */
export const ID_TOKEN_PATTERN = '^[A-Za-z0-9_-]{1,64}$';
const TOKEN = new RegExp(ID_TOKEN_PATTERN);

/** Ids that can name an aggregate subject; anything else cannot exist. */
export function isIdToken(value: string): boolean {
  return TOKEN.test(value);
}
