import type { Consumer, JsMsg } from '@nats-io/jetstream';
import type { DomainEvent } from '../events/catalogue/index.ts';
import { admitRawEvent } from '../events/admit-raw-event.ts';
import type { EventAdmission } from '../events/event-admission.ts';
import type { Logger } from '../log/logger.ts';
import { unavailableError } from '../errors/infrastructure-errors.ts';
import { raceAbort } from '../runtime/abortable.ts';

/** How a handler is done with a message. */
export type Settlement =
  /** Done: ack it. */
  | { readonly kind: 'ack' }
  /** Not now, and not a failure (a deferral or a planned retry): it comes back after the delay. */
  | { readonly kind: 'later'; readonly delayMs: number }
  /** Leave it unsettled: another handling of the same message in this process owns it. */
  | { readonly kind: 'leave' };

export const ACK: Settlement = { kind: 'ack' };
export const LEAVE: Settlement = { kind: 'leave' };

/**
 * How soon a message is looked at again when the aggregate state read for it is older than
 * the message itself (a replica that has not caught up answered the read).
 */
export const STALE_READ_RETRY_MS = 250;
export const later = (delayMs: number): Settlement => ({ kind: 'later', delayMs });

/** Why a message was parked. */
export const PARK_REASONS = ['inadmissible', 'failed_repeatedly'] as const;
export type ParkReason = (typeof PARK_REASONS)[number];

export interface ParkedMessage {
  readonly seq: number;
  readonly subject: string;
  readonly reason: ParkReason;
  readonly error: string;
}

export interface PullLoopOptions {
  /** For logs and metrics: which worker this loop serves. */
  readonly name: string;
  /** Messages handled at once. */
  readonly concurrency: number;
  /** Failed handlings of one message after which it is parked. */
  readonly maxDeliveries: number;
  readonly logger: Logger;
  /** What to believe of a message (the event store's admission: schema, text, subject, signature). */
  readonly admission: EventAdmission;
  /** The durable consumer, created when missing; called at start and again after each restart. */
  consumer(): Promise<Consumer>;
  /**
   * Handles one admitted event. Throwing counts as a failure of this message (retried, then
   * parked), unless what failed is a backing service (NATS or Postgres unreachable): then the
   * message comes back after {@link OUTAGE_RETRY_MS} for as long as the outage lasts.
   */
  handle(message: JsMsg, event: DomainEvent): Promise<Settlement>;
  /** Told of each parked message (metrics). */
  readonly onParked?: (parked: ParkedMessage) => void;
  /** Told of each loop restart (metrics). */
  readonly onRestart?: () => void;
}

/** Consecutive failed fetches after which the loop restarts (and re-creates its consumer). */
const FETCH_FAILURES_BEFORE_RESTART = 3;
const FETCH_RETRY_MS = 500;
const RESTART_BACKOFF_MS = [250, 500, 1000, 2000, 5000] as const;
const BACKOFF_RESET_AFTER_MS = 60_000;
/** Failure counts kept per process; the oldest are dropped past this (their messages went elsewhere). */
const MAX_TRACKED_FAILURES = 10_000;
/** Delay before a failed message comes back, times its failures so far. */
const FAILURE_RETRY_MS = 1000;
/** Delay before a message whose handling met an outage (NATS or Postgres unreachable) comes back. */
export const OUTAGE_RETRY_MS = 2000;

class LoopFailure extends Error {}


/**
 * The pull loop both workers run on their durable consumer: fetch, admit, handle, settle —
 * supervised, so nothing can wedge or kill it silently.
 *
 * - A message that is not a trustworthy event (not JSON, fails its schema, envelope not
 *   matching its subject) is parked at once: it can never become valid.
 * - A message whose handler throws is retried with a growing delay and parked after
 *   `maxDeliveries` failures. Parking terminates the message (it stays in the stream at its
 *   sequence), logs it at error level with sequence, subject and error, and counts it.
 *   Failures are counted by this process, so deferrals (`later`) never count, and neither
 *   does an outage of NATS or Postgres (unavailableError): the message is not at fault, and
 *   parking it would leave its work undone for good (an approved action stuck in `approved`).
 * - Anything that breaks the loop itself (the consumer deleted on the server, fetches
 *   failing in a row, a bug) is logged at error level and the loop restarts with backoff,
 *   re-creating the consumer; stop() is the only way out.
 */
export class PullLoop {
  private running = false;
  private loops: Promise<void>[] = [];
  private readonly failures = new Map<number, number>();
  private consumerInUse: Promise<Consumer> | null = null;
  /** Aborted by stop(): a loop waiting on a fetch stops at once. Made anew by each start(). */
  private stopping = new AbortController();

  private readonly options: PullLoopOptions;

  constructor(options: PullLoopOptions) {
    this.options = options;
  }

  /** Resolves once the consumer exists; rejects when it cannot be created (start fails loudly). */
  async start(): Promise<void> {
    const stopping = (this.stopping = new AbortController());
    await this.currentConsumer();
    // stop() came while the consumer was being made: nothing to start.
    if (stopping.signal.aborted) return;
    this.running = true;
    this.loops = Array.from({ length: this.options.concurrency }, (_, slot) => this.supervise(slot));
  }

  /** Stops fetching; resolves when every in-flight message is settled. */
  async stop(): Promise<void> {
    this.running = false;
    this.stopping.abort();
    await Promise.all(this.loops);
  }

  get isRunning(): boolean {
    return this.running;
  }

  private currentConsumer(): Promise<Consumer> {
    this.consumerInUse ??= this.options.consumer().catch((error: unknown) => {
      this.consumerInUse = null;
      throw error;
    });
    return this.consumerInUse;
  }

  private async supervise(slot: number): Promise<void> {
    let restarts = 0;
    while (this.running) {
      const started = Date.now();
      try {
        await this.run();
        return;
      } catch (error) {
        if (!this.running) return;
        // A loop that ran a good while before failing starts its backoff over.
        if (Date.now() - started > BACKOFF_RESET_AFTER_MS) restarts = 0;
        const backoff = RESTART_BACKOFF_MS[Math.min(restarts, RESTART_BACKOFF_MS.length - 1)]!;
        restarts++;
        this.options.logger.error({ worker: this.options.name, slot, err: describe(error), restart_in_ms: backoff }, 'worker loop failed; restarting it');
        this.options.onRestart?.();
        // The consumer may be what broke (deleted on the server): get it again on restart.
        this.consumerInUse = null;
        await sleep(backoff);
      }
    }
  }

  private async run(): Promise<void> {
    const consumer = await this.currentConsumer();
    let fetchFailures = 0;
    while (this.running) {
      let message: JsMsg | null;
      try {
        const fetching = consumer.next({ expires: 1000 });
        const { signal } = this.stopping;
        message = await raceAbort(fetching, signal).catch((error: unknown) => {
          if (signal.aborted) return null;
          throw error;
        });
        if (message === null && !this.running) {
          // Stopped mid-fetch: no waiting out its expiry (up to a second of every shutdown). A
          // message it still brings is handed back at once, not held for its ack wait (unless the
          // connection is already draining: then it comes back after the ack wait).
          fetching.then(
            (late) => {
              try {
                late?.nak();
              } catch {
                // Draining or closed: redelivered after its ack wait.
              }
            },
            () => undefined,
          );
          return;
        }
        fetchFailures = 0;
      } catch (error) {
        if (++fetchFailures >= FETCH_FAILURES_BEFORE_RESTART) throw new LoopFailure(`${fetchFailures} fetches failed in a row: ${describe(error)}`);
        this.options.logger.warn({ worker: this.options.name, err: describe(error) }, 'worker could not fetch; retrying');
        await sleep(FETCH_RETRY_MS);
        continue;
      }
      if (message) await this.process(message);
    }
  }

  private async process(message: JsMsg): Promise<void> {
    const admitted = admitRawEvent(this.options.admission, { seq: message.seq, subject: message.subject, data: message.data });
    if (admitted.kind === 'corrupt') {
      this.park(message, 'inadmissible', admitted.error);
      return;
    }
    let settlement: Settlement;
    try {
      settlement = await this.options.handle(message, admitted.event);
    } catch (error) {
      if (unavailableError(error)) {
        this.options.logger.warn(
          { worker: this.options.name, seq: message.seq, subject: message.subject, err: describe(error), retry_in_ms: OUTAGE_RETRY_MS },
          'worker could not handle a message: a backing service is unavailable; it comes back later',
        );
        message.nak(OUTAGE_RETRY_MS);
        return;
      }
      const failures = (this.failures.get(message.seq) ?? 0) + 1;
      if (failures >= this.options.maxDeliveries) {
        this.park(message, 'failed_repeatedly', describe(error));
        return;
      }
      this.failures.delete(message.seq);
      this.failures.set(message.seq, failures);
      if (this.failures.size > MAX_TRACKED_FAILURES) this.failures.delete(this.failures.keys().next().value!);
      this.options.logger.error(
        { worker: this.options.name, seq: message.seq, subject: message.subject, failures, err: describe(error) },
        'worker failed to handle a message; it comes back later',
      );
      message.nak(FAILURE_RETRY_MS * failures);
      return;
    }
    this.failures.delete(message.seq);
    if (settlement.kind === 'ack') message.ack();
    else if (settlement.kind === 'later') message.nak(settlement.delayMs);
  }

  private park(message: JsMsg, reason: ParkReason, error: string): void {
    this.failures.delete(message.seq);
    // No reason text: nats-server 2.9 ignores a `+TERM` that carries one (the message stayed pending).
    message.term();
    const parked: ParkedMessage = { seq: message.seq, subject: message.subject, reason, error };
    this.options.logger.error({ worker: this.options.name, ...parked }, 'worker parked a poison message; it stays in the stream at its sequence');
    this.options.onParked?.(parked);
  }
}

function describe(error: unknown): string {
  return error instanceof Error ? error.message : String(error);
}

function sleep(ms: number): Promise<void> {
  return new Promise((resolve) => setTimeout(resolve, ms));
}
