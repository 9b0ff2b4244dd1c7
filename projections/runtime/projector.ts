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
import { EventAdmission, type AdmissionResult, type RawEventMessage } from '../../src/events/event-admission.ts';
import type { Logger } from '../../src/log/logger.ts';
import { admitWithSeals, type AdmissionSeals, type SealRecorder } from './admission-seals.ts';
import { applyIsolating, unguardedThenGuarded, type BatchEntry, type IsolatedBatch } from './apply-isolating.ts';
import { lockCheckpoint, readCheckpoint, writeCheckpoint, writeCheckpointIfUnchanged } from './checkpoints.ts';
import { deferCommitFlush } from './deferred-flush.ts';
import { ensureProjectionTables } from './projection-tables.ts';
import type { Projection } from './projection.ts';

export interface ProjectorOptions {
  readonly db: Kysely<Database>;
  readonly js: JetStreamClient;
  readonly jsm: JetStreamManager;
  readonly stream: string;
  /** Subject filter covering the whole stream, so stream sequences arrive gap-free. */
  readonly filterSubject: string;
  /** The projection to run; or give `projections`. */
  readonly projection?: Projection;
  /**
   * Several projections fed by one consumer and one admission of each batch (see
   * {@link Projector}); each keeps its own transaction, checkpoint and quarantine entries.
   */
  readonly projections?: readonly Projection[];
  readonly logger: Logger;
  readonly batchSize?: number;
  /**
   * How long the oldest waiting event may wait for others before a batch of fewer than
   * {@link LINGER_BATCH} is applied (default {@link DEFAULT_LINGER_MS}; 0 applies at once).
   * Events that trickle in (a few hundred a second from the API) would each cost every
   * projection a transaction of its own; lingering makes one transaction of several, at the
   * price of a read model that trails by that much more. Reads that must see a write either
   * wait for the read model to reach it (src/runtime/read-barrier.ts) or are answered from
   * memory (a run right after its 202), so they stay correct and wait at most that much longer.
   */
  readonly lingerMs?: number;
  /**
   * Called after a batch's transactions committed and before its messages are acked. The
   * crash tests use it to stop a projector exactly there; nothing else should need it.
   */
  readonly afterCommit?: (lastSeq: number) => Promise<void> | void;
  /**
   * What to believe: the event store's admission, which checks signatures. The default checks
   * structure only (JSON, schema, text, subject), for tools and tests without signing keys.
   */
  readonly admission?: EventAdmission;
  /**
   * Signed admission verdicts per block of the stream (admission-seals.ts): blocks sealed
   * before are believed from their seal, blocks admitted whole here are sealed. Without it
   * every event is admitted in full.
   */
  readonly seals?: AdmissionSeals;
  /**
   * How long no projection may move while the stream holds events past them before the
   * projector makes its consumer again (default {@link DELIVERY_STALL_MS}; see
   * Projector.checkDeliveries).
   */
  readonly deliveryStallMs?: number;
}

/**
 * See {@link ProjectorOptions.deliveryStallMs}: half the consumer's ack wait, so a batch the
 * server would deliver again anyway is not what sets it off, and far longer than a batch takes.
 */
export const DELIVERY_STALL_MS = 15_000;

/** Events a projector takes at most in one batch unless told otherwise ({@link ProjectorOptions.batchSize}). */
export const DEFAULT_BATCH_SIZE = 2000;

/** See {@link ProjectorOptions.lingerMs}. */
export const DEFAULT_LINGER_MS = 20;
/** A batch this large is applied without lingering: a projector catching up never waits. */
const LINGER_BATCH = 200;

export interface ProjectorStatus {
  readonly name: string;
  readonly lastSeq: number;
  /** True while the last attempt to apply a batch failed; the projector retries, never skips. */
  readonly stalled: boolean;
  readonly lastError: string | null;
  /** Events this projector parked in the quarantine since it started (the table has them all). */
  readonly parked: number;
}

export class ProjectorConfigurationError extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'ProjectorConfigurationError';
  }
}

const MAX_BACKOFF_MS = 5000;
/** Failures in a row after which a projection failing alone gets a projector of its own (about 1.5 s of retries). */
const DETACH_AFTER_FAILURES = 4;
/** Past this many subjects the remembered chain heads are dropped and read again as needed. */
const MAX_REMEMBERED_HEADS = 200_000;

/**
 * The durable consumer of a projector of these projections: `projector_<name>` for one (the
 * name it always had), `projectors_<a>_<b>…` for several. Each is a service consumer the
 * analytics user is denied by name (deploy/nats/auth.conf).
 */
export function projectorConsumerName(projections: readonly Pick<Projection, 'name'>[]): string {
  const names = projections.map((projection) => projection.name);
  return names.length === 1 ? `projector_${names[0]}` : `projectors_${names.join('_')}`;
}

/** One projection fed by a projector: its own checkpoint, chain heads and status. */
class Lane {
  readonly projection: Projection;
  /**
   * Chain heads this lane committed itself, valid while the checkpoint is the one it wrote
   * last (`headsAsOf`, its write time): anyone else who writes the projection (another copy
   * of it, a rebuild, a quarantine retry) writes the checkpoint too, and the heads are then
   * read from the table again. Saves the read of the heads in every batch.
   */
  readonly heads = new Map<string, string>();
  headsAsOf: string | null = null;
  status: ProjectorStatus;
  failures = 0;

  constructor(projection: Projection) {
    this.projection = projection;
    this.status = { name: projection.name, lastSeq: 0, stalled: false, lastError: null, parked: 0 };
  }
}

/**
 * A delivered message with what every stage of a batch reads of it taken once: each read of
 * a JsMsg's `data` makes a new view of its buffer, and a catching-up projector read it three
 * times per event (seal digest, admission, quarantine payload).
 */
interface DeliveredMessage extends RawEventMessage {
  readonly data: Uint8Array;
  /** To acknowledge, hand back or extend the delivery. */
  readonly delivery: JsMsg;
}

/** A batch taken from the buffer and admitted: admission is the CPU-heavy half of a batch. */
interface AdmittedBatch {
  readonly messages: DeliveredMessage[];
  /** Stream sequence of each message, in order. */
  readonly seqs: number[];
  /** Each message with its verdict, in order: what every projection that needs the whole batch applies. */
  readonly entries: BatchEntry[];
  /** Whether the sequences are consecutive, so a projection at seqs[0] - 1 takes `entries` as they are. */
  readonly consecutive: boolean;
}

/** A batch taken from the buffer whose admission may still be under way. */
interface PendingBatch {
  readonly messages: DeliveredMessage[];
  readonly admitted: Promise<AdmissionResult[]>;
}

/**
 * About how many messages are admitted at once (a subject's events of a batch are never split).
 * Between slices the event loop serves the previous batch's transactions: the smaller the
 * slice, the less each of their round trips waits (100 finished the benchmark's catch-up
 * about 12% sooner than 500, in alternating runs).
 */
const ADMISSION_SLICE = 100;

/** How long the server waits for a batch's acknowledgement before delivering it again (30 s). */
const CONSUMER_ACK_WAIT_NS = 30_000_000_000;

/** The header JetStream puts on a message a headers-only consumer delivers without its body. */
const HEADERS_ONLY_SIZE = 'Nats-Msg-Size';

/**
 * Runs projections from one durable JetStream consumer. Each batch is admitted once (schema,
 * hashes, signatures) and applied to every projection in that projection's own Postgres
 * transaction together with its checkpoint, the transactions side by side; the batch is
 * acknowledged only after all of them committed: at-least-once delivery, exactly-once effect
 * (events at or below a projection's checkpoint are skipped). Events are applied strictly in
 * stream order. While a batch's transactions run, the next batch is admitted. An event that
 * can never be applied (inadmissible, or refused by Postgres for its data) is parked in the
 * quarantine in the same transaction and the checkpoint moves past it; any other failure is
 * retried with backoff, for the projection that failed, until it succeeds, and that
 * projection reports itself stalled meanwhile. The others wait for it before the next batch,
 * until it has failed DETACH_AFTER_FAILURES times; then it goes on alone (see detachFailing).
 */
export class Projector {
  private messages: ConsumerMessages | undefined;
  private buffer: DeliveredMessage[] = [];
  /** When the oldest message in `buffer` arrived (performance.now()). */
  private bufferedSince = 0;
  private wake: (() => void) | undefined;
  private running = false;
  private loop: Promise<void> | undefined;
  private readonly batchSize: number;
  private readonly lingerMs: number;
  private readonly projections: readonly Projection[];
  /** Projections fed by this projector's consumer. */
  private lanes: readonly Lane[];
  /** Projections that kept failing alone, each run since by a projector of its own (see detachFailing). */
  private readonly detached: Projector[] = [];

  private readonly admission: EventAdmission;
  private readonly sealRecorder: SealRecorder | undefined;
  /** Times the subscription ended unasked and was made again (see superviseSubscription). */
  private restarts = 0;
  /**
   * The consumer was found at fault (see remakeSubscription): the next subscription deletes it
   * and makes it again from the checkpoint, whatever its config.
   */
  private remakeConsumer = false;
  /** When a projection last moved, or the projector was last seen caught up (performance.now()). */
  private progressAt = 0;
  private deliveryWatch: NodeJS.Timeout | undefined;
  private checkingDeliveries = false;
  private checkingCheckpoints = false;
  /** The first look of checkDeliveries found no progress: when, and the stream's last sequence then. */
  private deliverySuspect: { readonly at: number; readonly head: number } | undefined;
  /** When the transactions of the batch in hand began (performance.now()); 0 while none run. */
  private applyingSince = 0;
  /** Times the consumer delivered nothing past the checkpoints for too long and was made again. */
  private stalledDeliveries = 0;

  private readonly options: ProjectorOptions;

  constructor(options: ProjectorOptions) {
    this.options = options;
    const projections = options.projections ?? (options.projection ? [options.projection] : []);
    if (projections.length === 0 || (options.projection && options.projections)) {
      throw new ProjectorConfigurationError('a projector runs either one `projection` or a non-empty list of `projections`');
    }
    if (new Set(projections.map((p) => p.name)).size !== projections.length) {
      throw new ProjectorConfigurationError(`a projector runs each projection once: ${projections.map((p) => p.name).join(', ')}`);
    }
    this.projections = projections;
    this.lanes = projections.map((projection) => new Lane(projection));
    this.admission = options.admission ?? new EventAdmission();
    this.sealRecorder = options.seals?.recorder();
    this.batchSize = options.batchSize ?? DEFAULT_BATCH_SIZE;
    this.lingerMs = options.lingerMs ?? DEFAULT_LINGER_MS;
  }

  get consumerName(): string {
    return projectorConsumerName(this.projections);
  }

  /** The status of the first projection (the only one of a single-projection projector). */
  currentStatus(): ProjectorStatus {
    return this.statuses()[0]!;
  }

  /** The status of every projection this projector runs. */
  statuses(): ProjectorStatus[] {
    const statuses = new Map([...this.lanes.map((lane) => lane.status), ...this.detached.flatMap((projector) => projector.statuses())].map((s) => [s.name, s]));
    return this.projections.map((projection) => statuses.get(projection.name)!);
  }

  /** How often the subscription ended unasked and was made again. */
  get subscriptionRestarts(): number {
    return this.restarts;
  }

  async start(): Promise<void> {
    const { db } = this.options;
    for (const lane of this.lanes) {
      const checkpoint = await ensureProjectionTables(db, lane.projection);
      lane.status = { ...lane.status, lastSeq: checkpoint };
    }
    if (this.lanes.length > 1) await this.deleteSingleProjectionConsumers();
    await this.subscribe(this.resumeAfter());
    this.running = true;
    this.loop = this.run();
    this.progressAt = performance.now();
    const stallMs = this.options.deliveryStallMs ?? DELIVERY_STALL_MS;
    this.deliveryWatch = setInterval(() => {
      void this.checkDeliveries(stallMs);
      void this.checkStoredCheckpoints();
    }, Math.max(50, stallMs / 3));
    this.deliveryWatch.unref();
  }

  /** Times the consumer was made again because it delivered nothing past the checkpoints (see checkDeliveries). */
  get deliveryStalls(): number {
    return this.stalledDeliveries;
  }

  /**
   * The stream holds only what the projector's filter covers (src/event-store/stream-setup.ts)
   * and nothing is ever deleted from it, so events the stream held a stall time ago and no
   * projection has reached since, with no projection moving meanwhile, mean the consumer is not
   * delivering what it should: its filter narrowed on the server (a batch then waits at the
   * gap forever) or filtered to nothing, or a consumer wedged some other way. The subscription
   * is then made again with a consumer made afresh from the checkpoint, instead of the
   * projection waiting for the process's next start.
   *
   * Two looks a stall time apart: the first, once nothing moved for `stallMs`, notes the
   * stream's last sequence; the second judges by it. So events appended just before a look, or
   * not yet pulled again after a NATS outage, are given a whole stall time to arrive. A batch
   * whose transactions were already under way at the first look, or a projection failing to
   * apply (Postgres down or hanging), is not a delivery fault: it retries by itself and is not
   * counted.
   */
  private async checkDeliveries(stallMs: number): Promise<void> {
    if (!this.running || this.checkingDeliveries) return;
    const now = performance.now();
    const suspect = this.deliverySuspect;
    if (now - this.progressAt < stallMs || this.lanes.some((lane) => lane.status.stalled)) {
      this.deliverySuspect = undefined;
      return;
    }
    if (suspect && (this.progressAt > suspect.at || (this.applyingSince !== 0 && this.applyingSince <= suspect.at))) {
      this.deliverySuspect = undefined;
      return;
    }
    if (suspect && now - suspect.at < stallMs) return;
    this.checkingDeliveries = true;
    try {
      if (!suspect) {
        this.deliverySuspect = { at: now, head: (await this.options.jsm.streams.info(this.options.stream)).state.last_seq };
        return;
      }
      this.deliverySuspect = undefined;
      const checkpoint = this.resumeAfter();
      if (checkpoint >= suspect.head || !this.running) return;
      this.stalledDeliveries++;
      this.remakeSubscription(
        'projector consumer delivered nothing past the checkpoint while the stream holds more (changed on the server?); making it again',
        { checkpoint, stream_last_seq: suspect.head, stalled_ms: Math.round(now - this.progressAt) },
      );
      this.progressAt = performance.now();
    } catch (error) {
      this.options.logger.warn({ err: error instanceof Error ? error.message : String(error) }, 'projector could not read the stream head to check its deliveries; it looks again');
    } finally {
      this.checkingDeliveries = false;
    }
  }

  /**
   * A lost commit (a crash of Postgres, see deferCommitFlush) or a restored database shows
   * itself to the careful path only when a new event arrives; on a quiet stream the read model
   * would stay behind what the projector acknowledged, and say it caught up. So the stored
   * checkpoints are read on the delivery watch's timer too (one small query per projection):
   * one behind what its lane committed before the read began is taken back as the run loop
   * does (forgetCommitsAfter, the consumer made again from it).
   */
  private async checkStoredCheckpoints(): Promise<void> {
    if (!this.running || this.checkingCheckpoints || this.remakeConsumer) return;
    this.checkingCheckpoints = true;
    try {
      // What each lane committed before the read: a commit that ends during it is never mistaken for a loss.
      const committed = this.lanes.map((lane) => lane.status.lastSeq);
      const stored = await Promise.all(this.lanes.map((lane) => readCheckpoint(this.options.db, lane.projection.name)));
      const wentBack = this.lanes.flatMap((lane, index) => {
        const storedSeq = stored[index]?.lastSeq;
        return storedSeq !== undefined && storedSeq < committed[index]! ? [{ lane, storedSeq, committedSeq: committed[index]! }] : [];
      });
      if (wentBack.length > 0 && this.running) this.takeBack(wentBack);
    } catch {
      // Postgres unreachable: the batches' own retries report it, and this looks again on the next tick.
    } finally {
      this.checkingCheckpoints = false;
    }
  }

  /**
   * Lanes whose stored checkpoint is behind what they committed believe Postgres again, and the
   * consumer is made again from the lowest checkpoint. What is buffered was delivered after the
   * acknowledged sequences that now have to come again: useless until they have.
   */
  private takeBack(wentBack: readonly { readonly lane: Lane; readonly storedSeq: number; readonly committedSeq: number }[]): void {
    for (const { lane, storedSeq } of wentBack) forgetCommitsAfter(lane, storedSeq);
    this.buffer = [];
    this.remakeSubscription('projection checkpoint went back (Postgres lost its last commits, or was restored); consuming again from it', {
      checkpoints: wentBack.map(({ lane, storedSeq, committedSeq }) => ({ projection: lane.projection.name, stored: storedSeq, committed: committedSeq })),
    });
  }

  /**
   * Ends the subscription over a consumer found at fault; superviseSubscription subscribes
   * again, with the consumer deleted and made afresh from the checkpoint. Once per fault: what
   * the same subscription delivers meanwhile asks nothing more.
   */
  private remakeSubscription(why: string, details: Record<string, unknown>, subscription: ConsumerMessages | undefined = this.messages): void {
    if (this.remakeConsumer) return;
    this.remakeConsumer = true;
    this.options.logger.error({ projection: this.projectionNames, ...details }, why);
    subscription?.stop();
  }

  /** The projections fed here, for logs. */
  private get projectionNames(): string {
    return this.lanes.map((lane) => lane.projection.name).join(',');
  }

  /** The consumer starts after the checkpoint of the projection furthest behind; the others skip what they have. */
  private resumeAfter(checkpoints: readonly number[] = this.lanes.map((lane) => lane.status.lastSeq)): number {
    return Math.min(...checkpoints);
  }

  /**
   * A release that ran one consumer per projection left those durable consumers on the server,
   * where they would keep every event pending for nobody.
   */
  private async deleteSingleProjectionConsumers(): Promise<void> {
    const { jsm, stream } = this.options;
    for (const lane of this.lanes) {
      try {
        await jsm.consumers.delete(stream, projectorConsumerName([lane.projection]));
      } catch (error) {
        if (!(error instanceof JetStreamApiError && error.code === JetStreamApiCodes.ConsumerNotFound)) throw error;
      }
    }
  }

  private async subscribe(checkpoint: number): Promise<void> {
    await this.ensureConsumer(checkpoint, this.remakeConsumer);
    this.remakeConsumer = false;
    const consumer = await this.options.js.consumers.get(this.options.stream, this.consumerName);
    const messages: ConsumerMessages = await consumer.consume({
      max_messages: this.batchSize * 2,
      callback: (message) => {
        // The body is looked at first: decoding the headers of every event would cost the hot path.
        if (message.data.length === 0 && message.headers?.has(HEADERS_ONLY_SIZE)) {
          // Someone made the consumer deliver headers only: an empty body would be parked as
          // inadmissible and the checkpoint moved past it. Nothing of it is applied.
          this.remakeSubscription('projector consumer delivers headers only (changed on the server?); making it again', { seq: message.seq }, messages);
          return;
        }
        if (this.buffer.length === 0) this.bufferedSince = performance.now();
        this.buffer.push({ seq: message.seq, subject: message.subject, data: message.data, delivery: message });
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
    const names = this.projectionNames;
    for (let attempt = 0; this.running && this.messages === messages; attempt++) {
      this.restarts++;
      const backoff = Math.min(MAX_BACKOFF_MS, 250 * 2 ** Math.min(attempt, 5));
      this.options.logger.error(
        { projection: names, err: ended instanceof Error ? ended.message : 'subscription ended', restart_in_ms: backoff },
        'projector subscription ended; subscribing again from the checkpoint',
      );
      await new Promise((resolve) => setTimeout(resolve, backoff));
      if (!this.running) return;
      try {
        const checkpoints: number[] = [];
        for (const lane of this.lanes) {
          const stored = (await readCheckpoint(this.options.db, lane.projection.name))?.lastSeq ?? lane.status.lastSeq;
          // A lane that believes more than Postgres holds would skip what Postgres lost.
          if (stored < lane.status.lastSeq) forgetCommitsAfter(lane, stored);
          checkpoints.push(stored);
        }
        await this.subscribe(this.resumeAfter(checkpoints));
        this.options.logger.info({ projection: names }, 'projector subscribed again');
        return;
      } catch (error) {
        this.options.logger.error({ projection: names, err: error instanceof Error ? error.message : String(error) }, 'projector could not subscribe again');
      }
    }
  }

  /** Stops fetching, finishes the batch in hand, and leaves unacknowledged events for the next start. */
  async stop(): Promise<void> {
    this.running = false;
    clearInterval(this.deliveryWatch);
    const messages = this.messages;
    this.messages = undefined;
    this.wake?.();
    await messages?.close().catch(() => undefined);
    await this.loop;
    await Promise.all(this.detached.map((projector) => projector.stop()));
    await this.options.seals?.flush();
  }

  /**
   * A projection that keeps failing while the others of this projector apply the same batch
   * (its table, a bug in its apply) would hold them all back: after DETACH_AFTER_FAILURES
   * failures it leaves, and a projector of its own (its own consumer, from its own
   * checkpoint) retries it from then on, until the process restarts. When every projection
   * fails (Postgres is down) none leaves: they wait together.
   *
   * @returns the lanes that left.
   */
  private async detachFailing(failed: readonly Lane[]): Promise<Lane[]> {
    if (failed.length >= this.lanes.length) return [];
    const leaving: Lane[] = [];
    for (const lane of failed) {
      if (lane.failures < DETACH_AFTER_FAILURES) continue;
      const { afterCommit: _hook, projections: _all, ...options } = this.options;
      const alone = new Projector({ ...options, projection: lane.projection });
      try {
        await alone.start();
      } catch (error) {
        this.options.logger.error({ projection: lane.projection.name, err: error instanceof Error ? error.message : String(error) }, 'projector could not start a projector of its own for a failing projection; it keeps retrying here');
        continue;
      }
      this.options.logger.warn(
        { projection: lane.projection.name, failures: lane.failures },
        'a projection kept failing while the others applied the batch; it goes on with a consumer of its own so they are not held back',
      );
      this.detached.push(alone);
      leaving.push(lane);
    }
    this.lanes = this.lanes.filter((lane) => !leaving.includes(lane));
    return leaving;
  }

  /**
   * The durable consumer resumes from its own ack floor, but Postgres holds the truth: when
   * the floor is past the checkpoint (tables were rebuilt, or the database restored) or
   * deliveries are outstanding, the consumer is recreated from checkpoint + 1.
   */
  private async ensureConsumer(checkpoint: number, remake = false): Promise<void> {
    const { jsm, stream, filterSubject } = this.options;
    try {
      const info = await jsm.consumers.info(stream, this.consumerName);
      // Unacknowledged deliveries from a previous life would only come back after ack_wait;
      // recreating from the checkpoint replays them at once (already-applied ones are skipped).
      // A consumer of an older release acknowledged message by message: made again the same way;
      // so is one whose filter, body delivery, redelivery limit or ack wait someone changed on the server (a
      // narrowed filter would leave events out: the batches then stop at the first missing
      // sequence, see entriesAfter, until this start makes the consumer again).
      const kept =
        !remake &&
        info.config.ack_policy === AckPolicy.All &&
        info.config.filter_subject === filterSubject &&
        !info.config.headers_only &&
        (info.config.max_deliver ?? -1) === -1 &&
        info.config.ack_wait === CONSUMER_ACK_WAIT_NS &&
        info.ack_floor.stream_seq <= checkpoint &&
        info.num_ack_pending === 0;
      if (kept) return;
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
      ack_wait: CONSUMER_ACK_WAIT_NS,
      max_ack_pending: this.batchSize * 4,
    });
  }

  /**
   * The next batch from the buffer, its admission under way; undefined when the buffer is
   * empty. Admission is CPU work (schema, hashes, signatures): done once for every projection,
   * before a transaction holds a connection and a checkpoint lock, in slices that let the
   * transactions of the batch before it go on between them (each slice checks one signature
   * per subject).
   */
  private takeBatch(): PendingBatch | undefined {
    if (this.buffer.length === 0 || this.lingerLeftMs() > 0) return undefined;
    const { seals } = this.options;
    const full = Math.min(this.buffer.length, this.batchSize);
    // End the batch where a block ends, so the next batch holds its blocks whole for the seals.
    const count = seals ? seals.alignedCount(this.buffer, full) : full;
    const messages = this.buffer.splice(0, count);
    // What is left arrived after the batch taken (it lingers from now at the most), unless the
    // batch was cut short at a block's end: then it has waited as long, and goes next.
    if (count === full) this.bufferedSince = performance.now();
    // How far behind the stream's head this batch is: a projector catching up keeps no verdicts for other readers.
    const behindHead = messages[messages.length - 1]!.delivery.info.pending;
    const admit = (): Promise<AdmissionResult[]> =>
      admitWithSeals(messages, {
        admission: this.admission,
        seals,
        recorder: this.sealRecorder,
        behindHead,
        // Small slices: each is a wait for the answers of the transactions under way.
        pauseEvery: 25,
        admitInFull: async (rest) => {
          const verdicts: AdmissionResult[] = new Array(rest.length);
          for (const [index, slice] of subjectSlices(rest, ADMISSION_SLICE).entries()) {
            if (index > 0) await new Promise((resolve) => setImmediate(resolve));
            const results = this.admission.tryAdmitBatch(slice.map((i) => rest[i]!), { behindHead });
            slice.forEach((i, k) => (verdicts[i] = results[k]!));
          }
          return verdicts;
        },
      });
    const admitted = admit();
    // Awaited when the batch's turn comes; a failure then is the batch's failure.
    admitted.catch(() => undefined);
    return { messages, admitted };
  }

  /** How much longer the buffered messages wait for more before they are a batch (0: now; Infinity: nothing buffered). */
  private lingerLeftMs(): number {
    if (this.buffer.length === 0) return Infinity;
    if (!this.running || this.buffer.length >= Math.min(LINGER_BATCH, this.batchSize)) return 0;
    return Math.max(0, this.bufferedSince + this.lingerMs - performance.now());
  }

  private async run(): Promise<void> {
    let batch: AdmittedBatch | undefined;
    let next: PendingBatch | undefined;
    /** Lanes that have not committed `batch` yet. */
    let pending: Lane[] = [];
    let admissionFailures = 0;
    while (this.running || batch || next) {
      if (batch && pending.length === 0) {
        // Every projection still fed here has committed the batch.
        try {
          await this.options.afterCommit?.(Math.min(...this.lanes.map((lane) => lane.status.lastSeq)));
        } catch (error) {
          this.options.logger.error({ err: error instanceof Error ? error.message : String(error) }, 'projector afterCommit hook failed');
        }
        batch.messages[batch.messages.length - 1]!.delivery.ack();
        batch = undefined;
        continue;
      }
      if (!batch) {
        const taken = next ?? this.takeBatch();
        next = undefined;
        if (!taken) {
          if (!this.running) break;
          const lingerLeft = this.lingerLeftMs();
          let timer: NodeJS.Timeout | undefined;
          await new Promise<void>((resolve) => {
            this.wake = resolve;
            if (lingerLeft !== Infinity) timer = setTimeout(resolve, lingerLeft);
          });
          clearTimeout(timer);
          this.wake = undefined;
          continue;
        }
        try {
          batch = admittedBatch(taken.messages, await taken.admitted);
          admissionFailures = 0;
        } catch (error) {
          // Not a verdict on an event (those are values) but a fault: the batch is handed back.
          admissionFailures++;
          this.options.logger.error({ first_seq: taken.messages[0]?.seq, err: error instanceof Error ? error.message : String(error) }, 'projector could not admit a batch; it comes again');
          for (const { delivery } of taken.messages) delivery.nak(Math.min(MAX_BACKOFF_MS, 100 * 2 ** Math.min(admissionFailures, 6)));
          continue;
        }
        pending = [...this.lanes];
      }
      const current = batch;
      this.applyingSince = performance.now();
      const applying = Promise.allSettled(pending.map((lane) => this.applyBatch(lane, current)));
      // The next batch is admitted while this one's transactions wait on Postgres.
      next ??= this.takeBatch();
      const outcomes = await applying;
      this.applyingSince = 0;
      const failed = pending.filter((_, index) => outcomes[index]!.status === 'rejected');
      const errors = outcomes.flatMap((outcome) => (outcome.status === 'rejected' ? [outcome.reason as unknown] : []));
      if (failed.length === 0) {
        pending = [];
        continue;
      }
      const wentBack = errors.filter((error): error is CheckpointWentBackError => error instanceof CheckpointWentBackError);
      if (wentBack.length > 0) {
        for (const { delivery } of [...current.messages, ...(next?.messages ?? [])]) delivery.nak();
        batch = undefined;
        next = undefined;
        pending = [];
        this.takeBack(wentBack.map(({ projection, storedSeq, committedSeq }) => ({ lane: this.lanes.find((lane) => lane.projection.name === projection)!, storedSeq, committedSeq })));
        continue;
      }
      if (errors.some((error) => error instanceof SequenceGapError)) {
        // Earlier events are still pending elsewhere (another copy of this projector, or a
        // redelivery): hand the batch, and the one taken behind it, back and let them arrive
        // first. Projections that committed it meanwhile skip it when it comes again.
        for (const { delivery } of [...current.messages, ...(next?.messages ?? [])]) delivery.nak(200);
        batch = undefined;
        next = undefined;
        continue;
      }
      const left = this.running ? await this.detachFailing(failed) : [];
      pending = failed.filter((lane) => !left.includes(lane));
      if (pending.length === 0) continue;
      for (const { delivery } of current.messages) delivery.working();
      if (!this.running) break;
      const failures = Math.max(...pending.map((lane) => lane.failures));
      await new Promise((resolve) => setTimeout(resolve, Math.min(MAX_BACKOFF_MS, 100 * 2 ** Math.min(failures, 6))));
    }
  }

  /** Applies a batch to one projection in its own transaction; records the outcome in the lane's status. */
  private async applyBatch(lane: Lane, batch: AdmittedBatch): Promise<void> {
    try {
      await this.commitBatch(lane, batch);
    } catch (error) {
      // Neither is this projection failing: the batch is handed back.
      if (error instanceof SequenceGapError || error instanceof CheckpointWentBackError) throw error;
      lane.failures++;
      const detail = error instanceof Error ? error.message : String(error);
      lane.status = { ...lane.status, stalled: true, lastError: detail };
      this.options.logger.error(
        { projection: lane.projection.name, first_seq: batch.messages[0]?.seq, failures: lane.failures, err: detail },
        'projector failed to apply a batch; retrying, nothing is skipped',
      );
      throw error;
    }
    lane.failures = 0;
    if (lane.status.stalled) {
      this.options.logger.info({ projection: lane.projection.name }, 'projector recovered');
      lane.status = { ...lane.status, stalled: false, lastError: null };
    }
  }

  /**
   * Commits the batch's events past the lane's checkpoint. When the lane wrote the checkpoint
   * last itself (it knows it), it takes the fast path: no lock, no savepoints, the checkpoint
   * moved only if it is still what the lane wrote (see commitFast). Otherwise, or when the fast
   * path finds the checkpoint moved or Postgres refuses the batch, the careful path: lock the
   * checkpoint, apply inside savepoints and isolate what Postgres refuses.
   */
  private async commitBatch(lane: Lane, batch: AdmittedBatch): Promise<void> {
    const { seqs } = batch;
    // Checkpoints only move forward while a projector runs: a batch this lane committed is done.
    if (lane.status.lastSeq >= seqs[seqs.length - 1]!) return;
    const writtenAt = lane.headsAsOf;
    if (writtenAt === null) return this.commitCareful(lane, batch);
    const committed = await unguardedThenGuarded((unguarded) =>
      unguarded ? this.commitFast(lane, batch, writtenAt) : this.commitCareful(lane, batch).then(() => true),
    );
    if (!committed) await this.commitCareful(lane, batch);
  }

  /**
   * The lock-free commit of a lane that knows the checkpoint (`lastSeq`, written at
   * `writtenAt`) and the chain heads as of it. The events after it are applied unguarded
   * (apply-isolating.ts) and the checkpoint is moved only if no one wrote it since
   * (writeCheckpointIfUnchanged); else the transaction is rolled back and the lane forgets
   * what it knew. The chain heads are written in the checkpoint's statement. Four round trips
   * fewer a batch than the careful path (the lock, the heads, a savepoint pair), six for the
   * runs projection (its own savepoint pair).
   *
   * @returns false, with nothing written, when the careful path must take the batch: the
   *   lane's knowledge was stale, or the batch does not follow the checkpoint it knows.
   */
  private async commitFast(lane: Lane, batch: AdmittedBatch, writtenAt: string): Promise<boolean> {
    const { db } = this.options;
    const { projection } = lane;
    const known = lane.status.lastSeq;
    let fresh: BatchEntry[];
    try {
      fresh = entriesAfter(batch, known);
    } catch (error) {
      if (error instanceof SequenceGapError) return false;
      throw error;
    }
    if (lane.heads.size > MAX_REMEMBERED_HEADS) lane.heads.clear();
    const lastSeq = known + fresh.length;
    const outcome = await db
      .transaction()
      .execute(async (trx) => {
        await deferCommitFlush(trx);
        const applied = await applyIsolating(trx, projection, fresh, { knownHeads: lane.heads, writeHeads: false, unguarded: true });
        const checkpoint = { version: projection.version, lastSeq };
        const written = await writeCheckpointIfUnchanged(trx, projection.name, checkpoint, { lastSeq: known, writtenAt }, applied.headsUpsert);
        if (written === null) throw new CheckpointMovedError();
        return { applied, written };
      })
      .catch((error: unknown) => {
        if (error instanceof CheckpointMovedError) return null;
        throw error;
      });
    if (outcome === null) {
      // Someone else wrote the projection (another copy, a rebuild, a quarantine retry).
      lane.heads.clear();
      lane.headsAsOf = null;
      return false;
    }
    this.committed(lane, { lastSeq, writtenAt: outcome.written, ...outcome.applied });
    return true;
  }

  private async commitCareful(lane: Lane, batch: AdmittedBatch): Promise<void> {
    const { db } = this.options;
    const { projection } = lane;
    const result = await db.transaction().execute(async (trx) => {
      await deferCommitFlush(trx);
      const checkpoint = await lockCheckpoint(trx, projection.name);
      if (!checkpoint || checkpoint.version !== projection.version) {
        throw new Error(`checkpoint of ${projection.name} is missing or of another version; restart to rebuild`);
      }
      // Only Postgres losing commits this lane made (a crash, see deferCommitFlush) or a restore
      // of the database moves a checkpoint back: the events after it were acknowledged on the
      // stream and must be delivered again.
      if (checkpoint.lastSeq < lane.status.lastSeq) throw new CheckpointWentBackError(projection.name, checkpoint.lastSeq, lane.status.lastSeq);
      if (checkpoint.writtenAt !== lane.headsAsOf || lane.heads.size > MAX_REMEMBERED_HEADS) lane.heads.clear();
      const fresh = entriesAfter(batch, checkpoint.lastSeq);
      if (fresh.length === 0) return { lastSeq: checkpoint.lastSeq, parked: [], writtenAt: checkpoint.writtenAt, movedHeads: new Map<string, string>() };
      const applied = await applyIsolating(trx, projection, fresh, { knownHeads: lane.heads });
      const last = checkpoint.lastSeq + fresh.length;
      const writtenAt = await writeCheckpoint(trx, projection.name, { version: projection.version, lastSeq: last });
      return { lastSeq: last, writtenAt, ...applied };
    });
    this.committed(lane, result);
  }

  /** After a commit: what the transaction wrote is now the truth the lane knows. */
  private committed(lane: Lane, result: CommittedBatch): void {
    const { projection } = lane;
    for (const [subject, hash] of result.movedHeads) lane.heads.set(subject, hash);
    lane.headsAsOf = result.writtenAt;
    for (const event of result.parked) {
      this.options.logger.warn(
        { projection: projection.name, seq: event.seq, subject: event.subject, code: event.code, err: event.error },
        'projector parked an event it can never apply; see `adsagent projections quarantine list`',
      );
    }
    lane.status = { ...lane.status, lastSeq: result.lastSeq, parked: lane.status.parked + result.parked.length };
    this.progressAt = performance.now();
  }
}

/**
 * The entries of `batch` after `checkpoint`, in stream order (none when the checkpoint is past
 * the batch; redelivered duplicates skipped).
 *
 * @throws SequenceGapError when a sequence between the checkpoint and the batch's events is missing.
 */
function entriesAfter(batch: AdmittedBatch, checkpoint: number): BatchEntry[] {
  const { seqs, entries } = batch;
  if (batch.consecutive) {
    const from = checkpoint + 1 - seqs[0]!;
    if (from < 0) throw new SequenceGapError(checkpoint + 1, seqs[0]!);
    return from === 0 ? entries : entries.slice(from);
  }
  const fresh: BatchEntry[] = [];
  let expected = checkpoint + 1;
  for (const [index, seq] of seqs.entries()) {
    if (seq < expected) continue;
    if (seq > expected) throw new SequenceGapError(expected, seq);
    fresh.push(entries[index]!);
    expected++;
  }
  return fresh;
}

/** What a lane's transaction committed: its new checkpoint and what applyIsolating did. */
interface CommittedBatch extends Pick<IsolatedBatch, 'parked' | 'movedHeads'> {
  readonly lastSeq: number;
  readonly writtenAt: string;
}

/** The fast path's checkpoint was written by someone else meanwhile: its transaction is rolled back. */
class CheckpointMovedError extends Error {
  constructor() {
    super('the checkpoint moved since this projector wrote it');
    this.name = 'CheckpointMovedError';
  }
}

function admittedBatch(messages: DeliveredMessage[], verdicts: readonly AdmissionResult[]): AdmittedBatch {
  const seqs = messages.map((message) => message.seq);
  const entries = messages.map((message, index): BatchEntry => ({ result: verdicts[index]!, payload: message.data }));
  return { messages, seqs, entries, consecutive: seqs.every((seq, index) => seq === seqs[0]! + index) };
}

/**
 * Splits a batch into slices of about `size` messages that share no subject, each in stream
 * order (positions into `messages`). Batch admission looks at one subject's events at a time
 * (a later event vouches for the earlier ones of its subject), so admitting the slices one by
 * one gives the verdicts, and checks the signatures, that admitting the batch at once would.
 */
export function subjectSlices(messages: readonly { readonly subject: string }[], size: number): number[][] {
  const bySubject = new Map<string, number[]>();
  messages.forEach((message, position) => {
    const positions = bySubject.get(message.subject);
    if (positions) positions.push(position);
    else bySubject.set(message.subject, [position]);
  });
  const slices: number[][] = [];
  let slice: number[] = [];
  for (const positions of bySubject.values()) {
    slice.push(...positions);
    if (slice.length >= size) {
      slices.push(slice.sort((a, b) => a - b));
      slice = [];
    }
  }
  if (slice.length > 0) slices.push(slice.sort((a, b) => a - b));
  return slices;
}

/** A lane's stored checkpoint is behind what the lane committed (see commitCareful). */
class CheckpointWentBackError extends Error {
  readonly projection: string;
  readonly storedSeq: number;
  readonly committedSeq: number;

  constructor(projection: string, storedSeq: number, committedSeq: number) {
    super(`checkpoint of ${projection} is at ${storedSeq}, behind the ${committedSeq} this projector committed`);
    this.name = 'CheckpointWentBackError';
    this.projection = projection;
    this.storedSeq = storedSeq;
    this.committedSeq = committedSeq;
  }
}

/**
 * The lane believes Postgres's checkpoint again: the careful path reads what else it needs
 * (chain heads, the checkpoint's write time) from the tables.
 */
function forgetCommitsAfter(lane: Lane, storedSeq: number): void {
  lane.status = { ...lane.status, lastSeq: Math.min(lane.status.lastSeq, storedSeq) };
  lane.heads.clear();
  lane.headsAsOf = null;
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
