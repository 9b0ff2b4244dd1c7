import type { Consumer, JsMsg } from '@nats-io/jetstream';
import { hostname } from 'node:os';
import { v4 as uuidv4 } from 'uuid';
import type { AccountState, ActiveRun } from '../../commands/account/account-state.ts';
import { RunNotClaimableError, type RunOutcome } from '../../commands/account/run-lifecycle.ts';
import { unavailableError } from '../errors/infrastructure-errors.ts';
import type { DomainEvent } from '../events/catalogue/index.ts';
import type { Actor } from '../events/envelope.ts';
import type { Logger } from '../log/logger.ts';
import type { Infrastructure } from '../runtime/infrastructure.ts';
import { SubjectChangeFeed, type ChangeTracker } from '../event-store/subject-changes.ts';
import { ensureDurableConsumer } from './durable-consumer.ts';
import { ACK, LEAVE, later, PullLoop, STALE_READ_RETRY_MS, type ParkedMessage, type Settlement } from './pull-loop.ts';
import { executeRun, runSubjects, type RunExecutorDependencies, type RunSubjects } from './run-executor.ts';
import { askLiveness, Liveness, WorkerLiveness } from './worker-liveness.ts';
import { accountDecider } from '../../commands/account/account-decider.ts';
import { loadAccount, loadWorkspace } from '../../commands/queries.ts';
import { runStartsPausedForMs } from '../../commands/workspace/workspace-decider.ts';
import type { HandleOptions } from '../../commands/shared/handle.ts';

export const AGENT_WORKER_CONSUMER = 'agent_workers';

export interface AgentWorkerOptions {
  readonly infrastructure: Infrastructure;
  readonly executor: Omit<RunExecutorDependencies, 'commands'>;
  readonly concurrency: number;
  readonly logger: Logger;
  readonly workerId?: string;
  /** How long stop() lets in-flight runs finish before failing them. */
  readonly shutdownGraceMs: number;
  /** A run's message is redelivered when its worker stopped heartbeating for this long. */
  readonly ackWaitMs: number;
  /** Told of every run this worker ends (metrics). */
  readonly onRunFinished?: (outcome: RunOutcome['kind'], code: string) => void;
  /** Failed handlings of one message after which it is parked (WORKER_MAX_DELIVERIES). */
  readonly maxDeliveries?: number;
  /** Runs of one workspace this process works on at once (AGENT_MAX_RUNS_PER_WORKSPACE); unlimited when unset. */
  readonly maxRunsPerWorkspace?: number;
  /** Told of each parked message and each loop restart (metrics). */
  readonly onParked?: (parked: ParkedMessage) => void;
  readonly onLoopRestart?: () => void;
}

/** How long a run deferred for fairness waits before it is offered again. */
export const FAIRNESS_DEFER_MS = 1000;

/** How often a run of a paused workspace is looked at again, so a resume takes effect soon. */
export const PAUSE_RECHECK_MS = 2000;

/**
 * How long the owner of a running run must stay unreachable (two checks at least this far
 * apart) before the run is failed as orphaned: longer than a NATS client takes to reconnect
 * and subscribe again after a server of the cluster goes away.
 */
export const ORPHAN_CONFIRM_MS = 5000;

/**
 * Backoff between attempts to record a finished run's outcome while the event log stays
 * unreachable past the command's own allowance: the outcome exists only in this process.
 */
export const FINISH_RETRY_FIRST_MS = 1000;
export const FINISH_RETRY_MAX_MS = 5000;

/** A queued run this worker may claim: where it is, the account state it was read from, and the command metadata. */
interface ClaimableRun {
  readonly workspaceId: string;
  readonly accountId: string;
  readonly runId: string;
  readonly account: AccountState;
  readonly active: ActiveRun;
  readonly meta: { actor: Actor; correlationId: string };
}

/**
 * The agent-worker role. A durable pull consumer on the account subjects hands out
 * RunQueued events; any number of worker processes share it. A worker claims a run by
 * appending RunStarted (it loses cleanly to a concurrent cancel), heartbeats the message
 * while the agent works, and ends the run with RunSucceeded or RunFailed before acking.
 * A redelivered run that is already `running` means its worker's heartbeats stopped
 * reaching JetStream — it died, or a NATS failover dropped them. The worker that gets the
 * message asks the owner directly (worker-liveness.ts): a live owner keeps its run and the
 * message is offered again later; an owner that stays unreachable for ORPHAN_CONFIRM_MS
 * has its run failed with `internal`, keeping what it proposed. So two workers never work
 * one run, and a healthy run is not failed because a NATS node went down.
 *
 * The event log may store a write whose acknowledgement never arrives (a failover): the claim
 * is idempotent for the worker that holds the run, and a redelivery that finds a run `running`
 * under this very worker, whose claim failed here before the run began, claims and runs it. A
 * run's outcome is recorded for as long as the log stays unreachable, the run staying in flight.
 */
export class AgentWorker {
  readonly workerId: string;
  private readonly actor: Actor;
  private readonly pullLoop: PullLoop;
  private readonly inFlight = new Map<string, AbortController>();
  /** Runs in flight per workspace, for fairness. */
  private readonly perWorkspace = new Map<string, number>();
  /** Running runs of other workers whose owner did not answer, and since when. */
  private readonly unanswered = new Map<string, number>();
  /** Runs whose claim this process is deciding right now (it may be riding out an outage). */
  private readonly claiming = new Set<string>();
  /**
   * Runs whose claim failed here (the event log stayed unreachable past the command's
   * allowance) and which this process never began: the RunStarted may be stored all the
   * same, and then the run is this worker's to run, not an orphan.
   */
  private readonly claimsNotBegun = new Set<string>();
  private liveness: WorkerLiveness | undefined;
  /** Heard changes of key and account subjects: a run's check before each tool call reads only after one. */
  private changes: SubjectChangeFeed | undefined;

  private readonly options: AgentWorkerOptions;

  constructor(options: AgentWorkerOptions) {
    this.options = options;
    this.workerId = options.workerId ?? `${hostname()}:${process.pid}:${uuidv4().slice(0, 8)}`;
    this.actor = { kind: 'worker', id: this.workerId };
    this.pullLoop = new PullLoop({
      name: 'agent-worker',
      concurrency: options.concurrency,
      maxDeliveries: options.maxDeliveries ?? 5,
      logger: options.logger,
      admission: options.infrastructure.store.admission,
      consumer: () => this.ensureConsumer(),
      handle: (message, event) => this.handle(message, event),
      onParked: options.onParked,
      onRestart: options.onLoopRestart,
    });
  }

  async start(): Promise<void> {
    const { nc, config } = this.options.infrastructure;
    this.liveness = WorkerLiveness.answer(nc, config.subjectPrefix, this.workerId, () => this.inFlight.keys());
    const { subjects } = this.options.infrastructure;
    this.changes = await SubjectChangeFeed.start(nc, [subjects.filter('*', '_', 'key'), subjects.filter('*', '*', 'account')]);
    await this.pullLoop.start();
  }

  async stop(): Promise<void> {
    const stopped = this.pullLoop.stop();
    const grace = new Promise<void>((resolve) => setTimeout(resolve, this.options.shutdownGraceMs).unref());
    await Promise.race([stopped, grace]);
    for (const controller of this.inFlight.values()) controller.abort();
    await stopped;
    this.liveness?.stop();
    this.changes?.stop();
  }

  private ensureConsumer(): Promise<Consumer> {
    const { jsm, js, config, subjects } = this.options.infrastructure;
    return ensureDurableConsumer(js, jsm, {
      stream: config.eventStream,
      durableName: AGENT_WORKER_CONSUMER,
      filterSubject: subjects.filter('*', '*', 'account'),
      ackWaitMs: this.options.ackWaitMs,
      maxAckPending: 10_000,
    });
  }

  private async handle(message: JsMsg, event: DomainEvent): Promise<Settlement> {
    if (event.type !== 'RunQueued') return ACK;
    const { aggregates } = this.options.infrastructure;
    const workspaceId = event.workspace_id;
    const accountId = event.account_id!;
    const runId = event.data.run_id;
    const account = await loadAccount(aggregates, workspaceId, accountId);
    // The RunQueued in hand is on this very subject: state older than it was read from a replica
    // that has not caught up (direct gets may be served by any replica, e.g. after a failover).
    // Deciding on it would drop the run as "not active"; read again shortly instead.
    if (account.lastSequence < message.seq) return later(STALE_READ_RETRY_MS);
    const active = account.state.activeRun;
    if (!active || active.runId !== runId) {
      this.unanswered.delete(runId);
      this.claimsNotBegun.delete(runId);
      return ACK;
    }
    const meta = { actor: this.actor, correlationId: runId };
    // Redelivered while this process works on the run or is still claiming it: that handling owns it.
    if (this.inFlight.has(runId) || this.claiming.has(runId)) {
      message.working();
      return LEAVE;
    }
    if (active.status === 'running') {
      // Only this worker's own stored claim goes on (to be run, already started: no pause applies).
      if (!this.claimedHereNotBegun(runId, active)) return this.failIfOrphaned(runId, active, workspaceId, accountId, meta);
    } else {
      // An operator paused the workspace's run starts: the run stays queued (and cancelable).
      const pausedForMs = runStartsPausedForMs((await loadWorkspace(aggregates, workspaceId)).state, Date.now());
      if (pausedForMs > 0) return later(Math.min(pausedForMs, PAUSE_RECHECK_MS));
    }
    // Fairness: a workspace already at its share of this process waits, others go first.
    // The share is taken before the first await, so two slots cannot both take the last one.
    const limit = this.options.maxRunsPerWorkspace;
    const held = this.perWorkspace.get(workspaceId) ?? 0;
    if (limit !== undefined && held >= limit) return later(FAIRNESS_DEFER_MS);
    this.perWorkspace.set(workspaceId, held + 1);
    try {
      return await this.claimAndRun(message, { workspaceId, accountId, runId, account: account.state, active, meta });
    } finally {
      const left = (this.perWorkspace.get(workspaceId) ?? 1) - 1;
      if (left <= 0) this.perWorkspace.delete(workspaceId);
      else this.perWorkspace.set(workspaceId, left);
    }
  }

  /**
   * Whether a running run is this worker's own claim that failed here before the run began: it
   * is run now. A run this process began is never run again (its tool calls and proposals
   * would be made twice): one whose handling ended without its outcome is failed as orphaned.
   */
  private claimedHereNotBegun(runId: string, active: ActiveRun): boolean {
    return active.workerId === this.workerId && this.claimsNotBegun.has(runId);
  }

  /** A running run nobody here works on: left to a live owner, failed with `internal` once it is orphaned. */
  private async failIfOrphaned(
    runId: string,
    active: ActiveRun,
    workspaceId: string,
    accountId: string,
    meta: ClaimableRun['meta'],
  ): Promise<Settlement> {
    const deferred = await this.deferWhileOwnerMayLive(runId, active.workerId);
    if (deferred) return deferred;
    const { commands } = this.options.infrastructure;
    await commands.handle(accountDecider, {
      type: 'FinishRun',
      workspaceId,
      accountId,
      runId,
      workerId: active.workerId,
      outcome: {
        kind: 'failed',
        code: 'internal',
        message: `worker ${active.workerId ?? 'unknown'} stopped while running this run; actions it proposed stay queued`,
        text: '',
        truncated: false,
        usage: { input_tokens: 0, output_tokens: 0, steps: 0 },
        durationMs: active.startedAt ? Date.now() - Date.parse(active.startedAt) : null,
      },
      meta,
    });
    this.options.logger.warn({ run_id: runId, dead_worker: active.workerId }, 'failed a run whose worker stopped');
    this.options.onRunFinished?.('failed', 'internal');
    return ACK;
  }

  /**
   * For a running run claimed by another worker: a settlement that offers the message again
   * later while its owner is (or may be) alive, or undefined when the owner has been
   * unreachable long enough that the run is orphaned.
   */
  private async deferWhileOwnerMayLive(runId: string, ownerId: string | null): Promise<Settlement | undefined> {
    const { nc, config } = this.options.infrastructure;
    const answer = ownerId ? await askLiveness(nc, config.subjectPrefix, ownerId, runId) : Liveness.Gone;
    if (answer === Liveness.Working) {
      this.unanswered.delete(runId);
      return later(Math.min(this.options.ackWaitMs, ORPHAN_CONFIRM_MS));
    }
    const since = this.unanswered.get(runId);
    if (since === undefined) {
      this.unanswered.set(runId, Date.now());
      return later(ORPHAN_CONFIRM_MS);
    }
    if (Date.now() - since < ORPHAN_CONFIRM_MS || answer === Liveness.Unknown) return later(ORPHAN_CONFIRM_MS);
    this.unanswered.delete(runId);
    return undefined;
  }

  private async claimAndRun(
    message: JsMsg,
    run: ClaimableRun,
  ): Promise<Settlement> {
    const { commands } = this.options.infrastructure;
    const { workspaceId, accountId, runId, meta } = run;
    // Looked at before the claim: the claimed account state and the key the run reads next are
    // newer than the look, so only what is stored after it makes the first tool call read again.
    const subjects = runSubjects(commands.aggregates, workspaceId, accountId, run.active.keyId);
    const keyAndAccount = this.changes?.track([subjects.key, subjects.account]);
    keyAndAccount?.changedSinceLastLook();
    try {
      return await this.claimAndRunTracked(message, run, subjects, keyAndAccount);
    } finally {
      keyAndAccount?.release();
    }
  }

  private async claimAndRunTracked(
    message: JsMsg,
    run: ClaimableRun,
    subjects: RunSubjects,
    keyAndAccount: ChangeTracker | undefined,
  ): Promise<Settlement> {
    const { commands } = this.options.infrastructure;
    const { workspaceId, accountId, runId } = run;
    if (!(await this.claim(run, subjects, keyAndAccount))) return ACK;
    const controller = new AbortController();
    this.inFlight.set(runId, controller);
    this.claimsNotBegun.delete(runId);
    const heartbeat = setInterval(() => message.working(), Math.max(250, Math.floor(this.options.ackWaitMs / 3)));
    this.options.logger.info({ run_id: runId, worker_id: this.workerId }, 'run started');
    try {
      const outcome = await this.runWithShutdown(controller, () =>
        executeRun({ ...this.options.executor, commands }, { workspaceId, accountId, account: run.account, active: run.active, stopping: controller.signal, ...(keyAndAccount ? { keyAndAccount } : {}) }, this.actor),
      );
      await this.recordOutcome(run, outcome, controller.signal);
      const code = outcome.kind === 'failed' ? outcome.code : '';
      this.options.logger.info({ run_id: runId, outcome: outcome.kind, code: code || undefined, duration_ms: outcome.durationMs }, 'run finished');
      this.options.onRunFinished?.(outcome.kind, code);
      return ACK;
    } finally {
      clearInterval(heartbeat);
      this.inFlight.delete(runId);
    }
  }

  /**
   * Claims the run for this worker: false when it may not be claimed (the message is done).
   * A claim that throws is remembered as possibly stored, so that the message's next delivery
   * here runs the run instead of failing it as orphaned.
   */
  private async claim(run: ClaimableRun, subjects: RunSubjects, keyAndAccount: ChangeTracker | undefined): Promise<boolean> {
    const { commands } = this.options.infrastructure;
    const { workspaceId, accountId, runId, meta } = run;
    this.claiming.add(runId);
    try {
      // Decided on the account as handle() just read it: no second read (a conflict or a refusal reads again).
      const claimed = await commands.handle(
        accountDecider,
        { type: 'ClaimRun', workspaceId, accountId, runId, workerId: this.workerId, agent: this.options.executor.model.identity, meta },
        { preferRemembered: true },
      );
      keyAndAccount?.storedItself(subjects.account, claimed.appended.length);
      return true;
    } catch (error) {
      if (error instanceof RunNotClaimableError) {
        this.claimsNotBegun.delete(runId);
        return false;
      }
      this.claimsNotBegun.add(runId);
      throw error;
    } finally {
      this.claiming.delete(runId);
    }
  }

  /**
   * Ends the run with its outcome. The outcome (the agent's answer, its usage) exists only in
   * this process: while the event log is unreachable, past the command's own allowance too,
   * recording it is tried again with a backoff, the run staying in flight (its message
   * heartbeated, its liveness answered) so that nobody fails it as orphaned meanwhile. Only a
   * stop of the worker past its grace (`stopping`) gives up; other errors are not retried.
   */
  private async recordOutcome(run: ClaimableRun, outcome: RunOutcome, stopping: AbortSignal): Promise<void> {
    const { commands } = this.options.infrastructure;
    const { workspaceId, accountId, runId, meta } = run;
    const command = { type: 'FinishRun', workspaceId, accountId, runId, workerId: this.workerId, outcome, meta } as const;
    // Usually nothing was stored on the account since this worker's RunStarted: decided on that state, no read.
    let options: HandleOptions = { preferRemembered: true };
    for (let delayMs = FINISH_RETRY_FIRST_MS; ; delayMs = Math.min(2 * delayMs, FINISH_RETRY_MAX_MS)) {
      try {
        await commands.handle(accountDecider, command, options);
        return;
      } catch (error) {
        if (!unavailableError(error) || stopping.aborted) throw error;
        this.options.logger.warn({ run_id: runId, err: error, retry_in_ms: delayMs }, 'could not record how a run ended: the event log is unavailable; trying again');
        if (!(await sleepUnlessAborted(delayMs, stopping))) throw error;
      }
      // The backoff is ours from here: one attempt per step, so a stop is noticed within a step.
      options = { preferRemembered: true, outageRideThroughMs: 0 };
    }
  }

  /** A shutdown past its grace period ends the run as failed rather than leaving it running. */
  private async runWithShutdown(controller: AbortController, work: () => Promise<RunOutcome>): Promise<RunOutcome> {
    const started = Date.now();
    const aborted = new Promise<RunOutcome>((resolve) =>
      controller.signal.addEventListener('abort', () =>
        resolve({
          kind: 'failed',
          code: 'internal',
          message: 'the worker shut down before the run finished; actions it proposed stay queued',
          text: '',
          truncated: false,
          usage: { input_tokens: 0, output_tokens: 0, steps: 0 },
          durationMs: Date.now() - started,
        }),
      ),
    );
    return Promise.race([work(), aborted]);
  }
}

/** Waits `ms`; false when `signal` aborted first. */
function sleepUnlessAborted(ms: number, signal: AbortSignal): Promise<boolean> {
  if (signal.aborted) return Promise.resolve(false);
  return new Promise((resolve) => {
    const timer = setTimeout(() => {
      signal.removeEventListener('abort', onAbort);
      resolve(true);
    }, ms);
    const onAbort = () => {
      clearTimeout(timer);
      resolve(false);
    };
    signal.addEventListener('abort', onAbort, { once: true });
  });
}
