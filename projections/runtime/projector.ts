import {
  AckPolicy,
  DeliverPolicy,
  JetStreamApiCodes,
  JetStreamApiError,
  type ConsumerMessages,
  type JetStreamClient,
  type JetStreamManager,
  type JsMsg,
} from '@nats-io/jetstream';
import type { Kysely } from 'kysely';
import type { Database } from '../../src/db/schema.ts';
import { EventAdmission } from '../../src/events/event-admission.ts';
import type { Logger } from '../../src/log/logger.ts';
import { applyIsolating, type BatchEntry } from './apply-isolating.ts';
import { lockCheckpoint, readCheckpoint, writeCheckpoint } from './checkpoints.ts';
import { ensureProjectionTables } from './projection-tables.ts';
import type { Projection } from './projection.ts';

export interface ProjectorOptions {
  readonly db: Kysely<Database>;
  readonly js: JetStreamClient;
  readonly jsm: JetStreamManager;
  readonly stream: string;
  /** Subject filter covering the whole stream, so stream sequences arrive gap-free. */
  readonly filterSubject: string;
  readonly projection: Projection;
  readonly logger: Logger;
  readonly batchSize?: number;
  /**
   * Called after a batch's transaction committed and before its messages are acked. The
   * crash tests use it to stop a projector exactly there; nothing else should need it.
   */
  readonly afterCommit?: (lastSeq: number) => Promise<void> | void;
  /**
   * What to believe: the event store's admission, which checks signatures. The default checks
   * structure only (JSON, schema, text, subject), for tools and tests without signing keys.
   */
  readonly admission?: EventAdmission;
}

export interface ProjectorStatus {
  readonly name: string;
  readonly lastSeq: number;
  /** True while the last attempt to apply a batch failed; the projector retries, never skips. */
  readonly stalled: boolean;
  readonly lastError: string | null;
  /** Events this projector parked in the quarantine since it started (the table has them all). */
  readonly parked: number;
}

const MAX_BACKOFF_MS = 5000;
/** Past this many subjects the remembered chain heads are dropped and read again as needed. */
const MAX_REMEMBERED_HEADS = 200_000;

/**
 * Runs one projection as a durable JetStream consumer. Each batch is applied in one
 * Postgres transaction together with the checkpoint, and acknowledged only after commit:
 * at-least-once delivery, exactly-once effect (redeliveries at or below the checkpoint
 * are skipped). Events are applied strictly in stream order. An event that can never be
 * applied (inadmissible, or refused by Postgres for its data) is parked in the quarantine
 * in the same transaction and the checkpoint moves past it; any other failure is retried
 * with backoff until it succeeds, and the projector reports itself stalled meanwhile.
 */
export class Projector {
  private messages: ConsumerMessages | undefined;
  private buffer: JsMsg[] = [];
  private wake: (() => void) | undefined;
  private running = false;
  private loop: Promise<void> | undefined;
  private status: ProjectorStatus;
  private readonly batchSize: number;

  private readonly admission: EventAdmission;
  /**
   * Chain heads this projector committed itself, valid while the checkpoint is the one it
   * wrote last (`headsAsOf`, its write time): anyone else who writes the projection (another
   * copy of it, a rebuild, a quarantine retry) writes the checkpoint too, and the heads are
   * then read from the table again. Saves the read of the heads in every batch.
   */
  private readonly heads = new Map<string, string>();
  private headsAsOf: string | null = null;
  /** Times the subscription ended unasked and was made again (see superviseSubscription). */
  private restarts = 0;

  private readonly options: ProjectorOptions;

  constructor(options: ProjectorOptions) {
    this.options = options;
    this.admission = options.admission ?? new EventAdmission();
    this.batchSize = options.batchSize ?? 2000;
    this.status = { name: options.projection.name, lastSeq: 0, stalled: false, lastError: null, parked: 0 };
  }

  get consumerName(): string {
    return `projector_${this.options.projection.name}`;
  }

  currentStatus(): ProjectorStatus {
    return this.status;
  }

  /** How often the subscription ended unasked and was made again. */
  get subscriptionRestarts(): number {
    return this.restarts;
  }

  async start(): Promise<void> {
    const { db, projection } = this.options;
    const checkpoint = await ensureProjectionTables(db, projection);
    this.status = { ...this.status, lastSeq: checkpoint };
    await this.subscribe(checkpoint);
    this.running = true;
    this.loop = this.run();
  }

  private async subscribe(checkpoint: number): Promise<void> {
    await this.ensureConsumer(checkpoint);
    const consumer = await this.options.js.consumers.get(this.options.stream, this.consumerName);
    const messages = await consumer.consume({
      max_messages: this.batchSize * 2,
      callback: (message) => {
        this.buffer.push(message);
        this.wake?.();
      },
    });
    this.messages = messages;
    void this.superviseSubscription(messages);
  }

  /**
   * The subscription can end without anyone asking: the durable consumer was deleted on the
   * server, or the stream went away and came back. A projector that silently stopped
   * receiving would look healthy while its read model froze, so the end is logged and the
   * subscription is made again from the checkpoint, with backoff, until `stop()`.
   */
  private async superviseSubscription(messages: ConsumerMessages): Promise<void> {
    (async () => {
      for await (const status of messages.status()) {
        if (status.type === 'consumer_deleted' || status.type === 'consumer_not_found') {
          messages.stop();
          return;
        }
      }
    })().catch(() => undefined);
    const ended = await messages.closed().catch((error: unknown) => error);
    for (let attempt = 0; this.running && this.messages === messages; attempt++) {
      this.restarts++;
      const backoff = Math.min(MAX_BACKOFF_MS, 250 * 2 ** Math.min(attempt, 5));
      this.options.logger.error(
        { projection: this.status.name, err: ended instanceof Error ? ended.message : 'subscription ended', restart_in_ms: backoff },
        'projector subscription ended; subscribing again from the checkpoint',
      );
      await new Promise((resolve) => setTimeout(resolve, backoff));
      if (!this.running) return;
      try {
        const checkpoint = (await readCheckpoint(this.options.db, this.options.projection.name))?.lastSeq ?? this.status.lastSeq;
        await this.subscribe(checkpoint);
        this.options.logger.info({ projection: this.status.name }, 'projector subscribed again');
        return;
      } catch (error) {
        this.options.logger.error({ projection: this.status.name, err: error instanceof Error ? error.message : String(error) }, 'projector could not subscribe again');
      }
    }
  }

  /** Stops fetching, finishes the batch in hand, and leaves unacknowledged events for the next start. */
  async stop(): Promise<void> {
    this.running = false;
    const messages = this.messages;
    this.messages = undefined;
    this.wake?.();
    await messages?.close().catch(() => undefined);
    await this.loop;
  }

  /**
   * The durable consumer resumes from its own ack floor, but Postgres holds the truth: when
   * the floor is past the checkpoint (tables were rebuilt, or the database restored) or
   * deliveries are outstanding, the consumer is recreated from checkpoint + 1.
   */
  private async ensureConsumer(checkpoint: number): Promise<void> {
    const { jsm, stream, filterSubject } = this.options;
    try {
      const info = await jsm.consumers.info(stream, this.consumerName);
      // Unacknowledged deliveries from a previous life would only come back after ack_wait;
      // recreating from the checkpoint replays them at once (already-applied ones are skipped).
      // A consumer of an older release acknowledged message by message: made again the same way.
      if (info.config.ack_policy === AckPolicy.All && info.ack_floor.stream_seq <= checkpoint && info.num_ack_pending === 0) return;
      await jsm.consumers.delete(stream, this.consumerName);
    } catch (error) {
      if (!(error instanceof JetStreamApiError && error.code === JetStreamApiCodes.ConsumerNotFound)) throw error;
    }
    await jsm.consumers.add(stream, {
      durable_name: this.consumerName,
      // One acknowledgement per batch (its last message) instead of one per event: the batch
      // is acknowledged only after its commit, and always in stream order.
      ack_policy: AckPolicy.All,
      deliver_policy: DeliverPolicy.StartSequence,
      opt_start_seq: checkpoint + 1,
      filter_subject: filterSubject,
      ack_wait: 30_000_000_000,
      max_ack_pending: this.batchSize * 4,
    });
  }

  private async run(): Promise<void> {
    let failures = 0;
    let batch: JsMsg[] = [];
    while (this.running || batch.length > 0) {
      if (batch.length === 0) {
        if (this.buffer.length === 0) {
          if (!this.running) break;
          await new Promise<void>((resolve) => (this.wake = resolve));
          this.wake = undefined;
          continue;
        }
        batch = this.buffer.splice(0, this.batchSize);
      }
      try {
        const lastSeq = await this.applyBatch(batch);
        await this.options.afterCommit?.(lastSeq);
        batch[batch.length - 1]!.ack();
        batch = [];
        failures = 0;
        if (this.status.stalled) this.options.logger.info({ projection: this.status.name }, 'projector recovered');
        this.status = { ...this.status, stalled: false, lastError: null };
      } catch (error) {
        if (error instanceof SequenceGapError) {
          // Earlier events are still pending elsewhere (another copy of this projector, or a
          // redelivery): hand the batch back and let them arrive first.
          for (const message of batch) message.nak(200);
          batch = [];
          continue;
        }
        failures++;
        const detail = error instanceof Error ? error.message : String(error);
        this.status = { ...this.status, stalled: true, lastError: detail };
        this.options.logger.error(
          { projection: this.status.name, first_seq: batch[0]?.seq, failures, err: detail },
          'projector failed to apply a batch; retrying, nothing is skipped',
        );
        for (const message of batch) message.working();
        if (!this.running) break;
        await new Promise((resolve) => setTimeout(resolve, Math.min(MAX_BACKOFF_MS, 100 * 2 ** Math.min(failures, 6))));
      }
    }
  }

  private async applyBatch(batch: readonly JsMsg[]): Promise<number> {
    const { db, projection, logger } = this.options;
    // Admission is CPU work (schema, hashes, signatures): done before the transaction holds a
    // connection and the checkpoint lock, and for the batch at once (one signature per subject).
    const verdicts = this.admission.tryAdmitBatch(batch);
    let moved: ReadonlyMap<string, string> = new Map();
    const { lastSeq, parked, writtenAt } = await db.transaction().execute(async (trx) => {
      const checkpoint = await lockCheckpoint(trx, projection.name);
      if (!checkpoint || checkpoint.version !== projection.version) {
        throw new Error(`checkpoint of ${projection.name} is missing or of another version; restart to rebuild`);
      }
      if (checkpoint.writtenAt !== this.headsAsOf || this.heads.size > MAX_REMEMBERED_HEADS) this.heads.clear();
      const fresh: BatchEntry[] = [];
      let expected = checkpoint.lastSeq + 1;
      for (const [index, message] of batch.entries()) {
        if (message.seq < expected) continue;
        if (message.seq > expected) throw new SequenceGapError(expected, message.seq);
        fresh.push({ result: verdicts[index]!, payload: message.data });
        expected++;
      }
      if (fresh.length === 0) return { lastSeq: checkpoint.lastSeq, parked: [], writtenAt: checkpoint.writtenAt };
      const parked = await applyIsolating(trx, projection, fresh, { knownHeads: this.heads, onHeadsMoved: (heads) => (moved = heads) });
      const last = expected - 1;
      const writtenAt = await writeCheckpoint(trx, projection.name, { version: projection.version, lastSeq: last });
      return { lastSeq: last, parked, writtenAt };
    });
    // Committed: what this transaction wrote is now the truth.
    for (const [subject, hash] of moved) this.heads.set(subject, hash);
    this.headsAsOf = writtenAt;
    for (const event of parked) {
      logger.warn(
        { projection: projection.name, seq: event.seq, subject: event.subject, code: event.code, err: event.error },
        'projector parked an event it can never apply; see `adsagent projections quarantine list`',
      );
    }
    this.status = { ...this.status, lastSeq, parked: this.status.parked + parked.length };
    return lastSeq;
  }
}

class SequenceGapError extends Error {
  constructor(expected: number, received: number) {
    super(`expected stream sequence ${expected}, received ${received}`);
    this.name = 'SequenceGapError';
  }
}

/**
 * Waits until a projection has applied every event up to `seq` (read-your-writes for a
 * request that just appended, or that must not answer 404 before the read side caught up).
 *
 * @returns false when the timeout passed first.
 */
export async function waitForProjection(
  db: Kysely<Database>,
  projection: string,
  seq: number,
  timeoutMs = 5000,
): Promise<boolean> {
  const deadline = Date.now() + timeoutMs;
  for (let delay = 2; ; delay = Math.min(delay * 2, 50)) {
    const checkpoint = await readCheckpoint(db, projection);
    if (checkpoint && checkpoint.lastSeq >= seq) return true;
    if (Date.now() >= deadline) return false;
    await new Promise((resolve) => setTimeout(resolve, delay));
  }
}
