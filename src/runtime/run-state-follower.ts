import type { AdmissionResult } from '../events/event-admission.ts';
import type { Logger } from '../log/logger.ts';
import { LiveRuns, type LiveRun, type LiveRunsOptions } from './live-runs.ts';

/** What the follower reads: the event store's admitted follow and its head. */
export interface FollowableStore {
  lastSequence(): Promise<number>;
  followChecked(filter: string, fromSeq: number, signal: AbortSignal): AsyncGenerator<AdmissionResult>;
}

/** Workspaces whose latest run end is remembered; past this the oldest is forgotten (its reader is then only as fresh as the read model). */
const MAX_WORKSPACES_AHEAD = 10_000;

export interface RunStateFollowerOptions extends LiveRunsOptions {
  readonly store: FollowableStore;
  /** Subjects to follow: every event of the deployment (runs' events live on three aggregates). */
  readonly filter: string;
  readonly logger: Logger;
  /** Wait before following again after the follow failed. */
  readonly retryMs?: number;
  /**
   * Told every message of the stream, in stream order, admitted or not (e.g. to keep the write
   * model's remembered states current); after a failed follow it resumes from the head, so a
   * listener must not take the messages for gap-free.
   */
  readonly onEvent?: (result: AdmissionResult) => void;
  /**
   * The process's NATS connection status (`nc.status()`). While the connection is down the
   * follow hears nothing, and other processes may end the held runs meanwhile: every held run
   * is let go at the first sign of it, and memory is used again only once the follow has caught
   * up with the stream after the reconnect.
   */
  readonly connectionStatus?: AsyncIterable<{ readonly type: string }>;
}

/** Statuses after which the follow may be missing what other processes append. */
const CONNECTION_LOST = new Set(['disconnect', 'reconnecting', 'staleConnection']);
/** How long one wait for the follow to reach the head may take after a reconnect, before asking again. */
const RECONNECT_CATCH_UP_MS = 5000;

/**
 * Keeps {@link LiveRuns} current in an HTTP process: follows the stream from its head at
 * start, through admission (a corrupt event is skipped, as the projector quarantines it), and
 * folds every run event as it is appended. GET /api/v1/runs/{id} then answers a queued or
 * running run from memory; runs it does not hold come from the Postgres read model.
 *
 * If the follow fails, every held run is dropped (readers fall back to Postgres) and the
 * follow starts again from the head: a run is never served from a fold with a gap in it.
 * Likewise when the process loses its NATS connection: held runs are dropped at once and
 * nothing is served from memory until the follow has caught up after the reconnect, so a run
 * another process ended meanwhile is never answered as still queued or running.
 *
 * @example
 * ```ts
 * const follower = new RunStateFollower({ store, filter: subjects.all, logger });
 * await follower.start();
 * follower.get(runId); // LiveRun | undefined
 * ```
 */
export class RunStateFollower {
  private readonly runs: LiveRuns;
  private readonly options: RunStateFollowerOptions;
  private readonly controller = new AbortController();
  private loop: Promise<void> | undefined;
  /** Last stream sequence folded (or known to hold nothing to fold). */
  private position = 0;
  private waiters: { readonly seq: number; readonly resolve: () => void }[] = [];
  /** False from a lost connection until the follow has caught up after the reconnect: nothing is served from memory. */
  private serving = true;
  /** Bumped at each lost connection, so a catch-up begun before it does not turn serving back on. */
  private connectionEpoch = 0;

  /**
   * Per workspace, the stream sequence of the last run end folded here that the read model may
   * not hold yet: what reads of the runs table (the token quota) must wait for, having shown it.
   */
  private readonly endsAhead = new Map<string, number>();

  constructor(options: RunStateFollowerOptions) {
    this.options = options;
    this.runs = new LiveRuns({
      ...options,
      onTerminal: (run) => {
        this.endsAhead.delete(run.row.workspace_id);
        this.endsAhead.set(run.row.workspace_id, run.row.last_seq);
        if (this.endsAhead.size > MAX_WORKSPACES_AHEAD) this.endsAhead.delete(this.endsAhead.keys().next().value!);
        options.onTerminal?.(run);
      },
    });
  }

  /** The sequence a reader of the workspace's runs in Postgres should wait for, if any (see {@link settled}). */
  endAhead(workspaceId: string): number | undefined {
    return this.endsAhead.get(workspaceId);
  }

  /** The read model has reached `seq` for the workspace: no wait needed any more for that end. */
  settled(workspaceId: string, seq: number): void {
    if (this.endsAhead.get(workspaceId) === seq) this.endsAhead.delete(workspaceId);
  }

  /** Starts following from the stream's head; resolves once the follow is set up. */
  async start(): Promise<void> {
    const from = (await this.options.store.lastSequence()) + 1;
    this.position = from - 1;
    this.loop = this.follow(from);
    if (this.options.connectionStatus) void this.watchConnection(this.options.connectionStatus);
  }

  async stop(): Promise<void> {
    this.controller.abort();
    await this.loop;
    for (const waiter of this.waiters) waiter.resolve();
    this.waiters = [];
  }

  get(runId: string): LiveRun | undefined {
    return this.serving ? this.runs.get(runId) : undefined;
  }

  get heldRuns(): number {
    return this.runs.size;
  }

  /**
   * Resolves true once every event up to the stream's current head is folded (read-your-writes
   * for a run another request just created), false after `timeoutMs`.
   */
  async catchUp(timeoutMs = 1000): Promise<boolean> {
    return this.reach(await this.options.store.lastSequence(), timeoutMs);
  }

  /** Resolves true once every event up to `head` is folded, false after `timeoutMs`. */
  private reach(head: number, timeoutMs: number): Promise<boolean> {
    if (this.position >= head) return Promise.resolve(true);
    return new Promise<boolean>((resolve) => {
      // Not holding the process open: a stop() while this waits must not be kept waiting for it.
      const timer = setTimeout(() => {
        this.waiters = this.waiters.filter((waiter) => waiter !== entry);
        resolve(false);
      }, timeoutMs).unref();
      const entry = {
        seq: head,
        resolve: () => {
          clearTimeout(timer);
          resolve(this.position >= head);
        },
      };
      this.waiters.push(entry);
    });
  }

  private async follow(from: number): Promise<void> {
    const { signal } = this.controller;
    let next = from;
    while (!signal.aborted) {
      try {
        for await (const result of this.options.store.followChecked(this.options.filter, next, signal)) {
          if (result.ok) this.runs.apply([result.stored]);
          this.options.onEvent?.(result);
          this.advance(result.ok ? result.stored.seq : result.corrupt.seq);
        }
        if (signal.aborted) return;
        // The follow ended without being asked to (its consumer closed, e.g. in a NATS failover):
        // frozen runs would be served for ever, so it is a failure like any other.
        throw new Error('the follow of the stream ended');
      } catch (error) {
        if (signal.aborted) return;
        this.options.logger.warn({ err: error instanceof Error ? error.message : String(error) }, 'run state follower lost the stream; following again from its head');
        this.runs.clear();
        await new Promise((resolve) => setTimeout(resolve, this.options.retryMs ?? 1000).unref());
        try {
          next = (await this.options.store.lastSequence()) + 1;
          this.advance(next - 1);
        } catch {
          // The next attempt tries again.
        }
      }
    }
  }

  private async watchConnection(statuses: AsyncIterable<{ readonly type: string }>): Promise<void> {
    try {
      for await (const status of statuses) {
        if (this.controller.signal.aborted) return;
        if (CONNECTION_LOST.has(status.type)) {
          if (this.serving) this.options.logger.warn({ status: status.type }, 'run state follower lost its NATS connection; runs are read from Postgres until it has caught up');
          this.serving = false;
          this.connectionEpoch++;
          this.runs.clear();
        } else if (status.type === 'reconnect') {
          void this.serveOnceCaughtUp(this.connectionEpoch);
        }
      }
    } catch {
      // The status stream ends with the connection.
    }
  }

  /** Serves from memory again once the follow has folded everything the stream held after the reconnect. */
  private async serveOnceCaughtUp(epoch: number): Promise<void> {
    // A fixed target, the head as the reconnect found it: asking again each time would chase it on a busy stream.
    let head: number | undefined;
    while (head === undefined && epoch === this.connectionEpoch && !this.controller.signal.aborted) {
      head = await this.options.store.lastSequence().catch(() => undefined);
      if (head === undefined) await new Promise((resolve) => setTimeout(resolve, 250).unref());
    }
    while (head !== undefined && epoch === this.connectionEpoch && !this.controller.signal.aborted) {
      const caughtUp = await this.reach(head, RECONNECT_CATCH_UP_MS);
      if (epoch !== this.connectionEpoch) return;
      if (caughtUp) {
        this.serving = true;
        this.options.logger.info('run state follower caught up after the reconnect; serving runs from memory again');
        return;
      }
      await new Promise((resolve) => setTimeout(resolve, 250).unref());
    }
  }

  private advance(seq: number): void {
    if (seq <= this.position) return;
    this.position = seq;
    if (this.waiters.length === 0) return;
    const ready = this.waiters.filter((waiter) => waiter.seq <= seq);
    if (ready.length === 0) return;
    this.waiters = this.waiters.filter((waiter) => waiter.seq > seq);
    for (const waiter of ready) waiter.resolve();
  }
}
