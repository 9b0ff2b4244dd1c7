import type { Consumer, JsMsg } from '@nats-io/jetstream';
import { ensureDurableConsumer } from './durable-consumer.ts';
import { hostname } from 'node:os';
import { v4 as uuidv4 } from 'uuid';
import {
  ApplyClaimHeldError,
  ApplyClaimLostError,
  NothingToApplyError,
  type ApplyResult,
  type HeartbeatApply,
} from '../../commands/action/action-lifecycle.ts';
import { READY_TO_APPLY, type ActionState } from '../../commands/action/action-state.ts';
import { isAppError, type AppError } from '../errors/app-error.ts';
import type { AppliedOperation, DomainEvent, PartialFailure } from '../events/catalogue/index.ts';
import type { Actor } from '../events/envelope.ts';
import type { Logger } from '../log/logger.ts';
import type { AdsPlatform, PlatformAccountRef } from '../platform/ads-platform.ts';
import type { Infrastructure } from '../runtime/infrastructure.ts';
import { classifyAction } from '../policy/classify-action.ts';
import { liveDraft } from '../policy/live-draft.ts';
import { bandedChange, PolicyContextReader } from '../policy/policy-context.ts';
import { ReadBarrier } from '../runtime/read-barrier.ts';
import { APPROVALS_PROJECTION } from '../../projections/approvals/approvals-projection.ts';
import { changeAlreadyLive, recheckAction, type Recheck } from './apply-recheck.ts';
import { platformTrouble } from './platform-trouble.ts';
import { ACK, later, PullLoop, STALE_READ_RETRY_MS, type ParkedMessage } from './pull-loop.ts';
import { actionDecider } from '../../commands/action/action-decider.ts';
import { killSwitchStop } from '../../commands/workspace/kill-switch.ts';
import { platformAccountOf } from '../../commands/account/platform-account.ts';
import { loadWorkspaceFromLeader, loadAccount, loadAction } from '../../commands/queries.ts';
import { ApprovalsAppliedChangeLookup } from '../../projections/approvals/applied-change-lookup.ts';
import type { CommandMeta } from '../../commands/shared/new-event.ts';

export const APPLY_WORKER_CONSUMER = 'apply_workers';
/** Platform attempts before an action goes back to the queue. */
export const MAX_APPLY_ATTEMPTS = 5;
/** The consumer's ack wait unless told otherwise (APPLY_ACK_WAIT_MS). */
const DEFAULT_APPLY_ACK_WAIT_MS = 60_000;
/**
 * How long a claim is a worker's without a heartbeat unless told otherwise: half the ack wait,
 * so a redelivery after a crash finds it expired.
 */
const claimLeaseFor = (ackWaitMs: number): number => Math.floor(ackWaitMs / 2);
/**
 * The longest a handling keeps its message in progress by itself (the platform call's heartbeat
 * goes on regardless): far beyond any bounded look (a platform read waits out at most a few
 * rate limits), so only a handling that hangs lets its message go to another worker.
 */
const KEEP_ALIVE_MAX_MS = 5 * 60_000;
/** When the approvals read model lags (projectors down or slow), an auto-applied budget/target change waits this long and is re-checked. */
const READ_MODEL_RETRY_MS = 2000;

/** Delay before a message whose action another worker holds comes back: just after that claim's lease would end. */
const untilLeaseEnds = (leaseUntil: string) => Math.max(100, Date.parse(leaseUntil) - Date.now() + 100);

export interface ApplyWorkerOptions {
  readonly infrastructure: Infrastructure;
  readonly platform: AdsPlatform;
  readonly logger: Logger;
  readonly concurrency?: number;
  readonly workerId?: string;
  /** Base of the exponential backoff between platform attempts. */
  readonly retryBaseMs?: number;
  /**
   * How long the message of an action waits for a heartbeat before NATS gives it to another
   * worker (default {@link DEFAULT_APPLY_ACK_WAIT_MS}). Every apply worker must use the same:
   * they share one consumer.
   */
  readonly ackWaitMs?: number;
  /** A claim's lease (default half the ack wait); the worker heartbeats every third of it while the platform call runs. */
  readonly claimLeaseMs?: number;
  /** The policy's clock for the apply-time classification (learning period, 30-day window); leases use real time. */
  readonly clock?: () => Date;
  /** Told how each attempt ended (metrics). */
  readonly onApplyResult?: (result: 'applied' | 'failed' | 'returned') => void;
  /** Failed handlings of one message after which it is parked (WORKER_MAX_DELIVERIES). */
  readonly maxDeliveries?: number;
  /** Told of each parked message and each loop restart (metrics). */
  readonly onParked?: (parked: ParkedMessage) => void;
  readonly onLoopRestart?: () => void;
}

/**
 * The apply-worker role: consumes approved and auto-applied actions, re-checks them (kill
 * switch for auto-applied ones, the platform state the proposal was based on), classifies
 * auto-applied ones again against live values, then claims the action for a lease
 * (ActionApplyStarted), looks at the kill switch again (auto-applied ones), applies the
 * change through the platform port while heartbeating the claim, and records ActionApplied —
 * or ActionReturnedToQueue with the reason. A failed platform call is recorded and retried
 * with backoff, at most 5 times. While a claim is live nobody else applies the action, and
 * only its holder can record the outcome; platform changes are idempotent, so a takeover
 * after a crash changes nothing twice.
 */
export class ApplyWorker {
  readonly workerId: string;
  private readonly actor: Actor;
  private readonly pullLoop: PullLoop;
  private readonly policyContext: PolicyContextReader;
  private readonly barrier: ReadBarrier;

  private readonly options: ApplyWorkerOptions;

  private get ackWaitMs(): number {
    return this.options.ackWaitMs ?? DEFAULT_APPLY_ACK_WAIT_MS;
  }

  constructor(options: ApplyWorkerOptions) {
    this.options = options;
    this.workerId = options.workerId ?? `apply:${hostname()}:${process.pid}:${uuidv4().slice(0, 8)}`;
    this.actor = { kind: 'worker', id: this.workerId };
    this.pullLoop = new PullLoop({
      name: 'apply-worker',
      concurrency: options.concurrency ?? 4,
      maxDeliveries: options.maxDeliveries ?? 5,
      logger: options.logger,
      admission: options.infrastructure.store.admission,
      consumer: () => this.ensureConsumer(),
      handle: async (message, event) => {
        // In progress from the start, not only during the platform call: the looks before the
        // claim (platform reads waiting out a rate limit, the read barrier) can outlast a short
        // ack wait, and NATS would hand the message to a second worker to read it all again.
        // Not for ever: a handling stuck past KEEP_ALIVE_MAX_MS lets the message go to another.
        const keepAliveUntil = Date.now() + KEEP_ALIVE_MAX_MS;
        const keepAlive = setInterval(() => {
          if (Date.now() < keepAliveUntil) message.working();
          else clearInterval(keepAlive);
        }, Math.max(1000, Math.floor(this.ackWaitMs / 3)));
        try {
          const retryInMs = await this.handle(message, event);
          return retryInMs === null ? ACK : later(retryInMs);
        } finally {
          clearInterval(keepAlive);
        }
      },
      onParked: options.onParked,
      onRestart: options.onLoopRestart,
    });
    // The last look before a change goes live counts changes on their way live too, not only
    // applied ones: two auto-applied changes of one campaign handled in one batch must not both pass.
    this.policyContext = new PolicyContextReader(options.infrastructure.aggregates, new ApprovalsAppliedChangeLookup(options.infrastructure.database.db, { count: 'decided' }));
    this.barrier = new ReadBarrier(options.infrastructure.store, options.infrastructure.database.db);
  }

  async start(): Promise<void> {
    await this.pullLoop.start();
  }

  async stop(): Promise<void> {
    await this.pullLoop.stop();
  }

  private ensureConsumer(): Promise<Consumer> {
    const { jsm, js, config, subjects } = this.options.infrastructure;
    return ensureDurableConsumer(js, jsm, {
      stream: config.eventStream,
      durableName: APPLY_WORKER_CONSUMER,
      filterSubject: subjects.filter('*', '*', 'action'),
      ackWaitMs: this.ackWaitMs,
      maxAckPending: 10_000,
    });
  }

  /** @returns null when done with the message, or a delay before it should come back. */
  private async handle(message: JsMsg, event: DomainEvent): Promise<number | null> {
    // A failed attempt is retried through the delayed redelivery of the message that triggered it.
    const trigger = (event.type === 'ActionProposed' && event.data.disposition === 'auto_applied') || event.type === 'ActionApproved';
    if (!trigger || !event.account_id) return null;
    const { aggregates, commands } = this.options.infrastructure;
    const workspaceId = event.workspace_id;
    const accountId = event.account_id;
    const actionId = event.aggregate.id;
    const meta = { actor: this.actor, correlationId: event.correlation_id };
    const loaded = await loadAction(aggregates, workspaceId, accountId, actionId);
    // The triggering event is on this action's subject: older state was read from a replica that
    // has not caught up, and would make an approved action look like there is nothing to apply.
    if (loaded.lastSequence < message.seq) return STALE_READ_RETRY_MS;
    const action = loaded.state;
    if (!READY_TO_APPLY.includes(action.status as never)) return null;

    const leaseMs = this.options.claimLeaseMs ?? claimLeaseFor(this.ackWaitMs);
    // Another worker holds a live claim: come back when its lease would have run out.
    if (action.status === 'applying' && action.claim?.leaseUntil && Date.parse(action.claim.leaseUntil) > Date.now()) {
      return untilLeaseEnds(action.claim.leaseUntil);
    }

    const returnToQueue = async (reason: string) => {
      try {
        await commands.handle(actionDecider, { type: 'FinishApply', workspaceId, accountId, actionId, workerId: this.workerId, claimId: null, result: { kind: 'returned', reason }, meta });
      } catch (error) {
        if (error instanceof ApplyClaimHeldError) return untilLeaseEnds(error.leaseUntil);
        throw error;
      }
      this.options.logger.info({ action_id: actionId, reason }, 'action returned to the queue');
      this.options.onApplyResult?.('returned');
      return null;
    };

    if (action.status === 'applying' && action.returnAwaited) {
      // The last attempt failed for good and its worker stopped before the return was stored.
      return returnToQueue(action.returnAwaited.reason);
    }
    const accountState = (await loadAccount(aggregates, workspaceId, accountId)).state;
    const account = platformAccountOf(accountId, accountState);
    if (action.status === 'applying' && account) {
      // A takeover (the claim's lease ran out): its worker may have died after its platform call.
      // What is live is recorded as applied, before any look that could return it (kill switch,
      // re-check, re-classification): a live change recorded as returned would be counted by no
      // learning period, and could be approved and sent again.
      const live = await changeAlreadyLive(this.options.platform, account, action).catch((error: unknown) => {
        // Whether the change went live cannot be told while the platform is down: ask again later.
        const trouble = platformTrouble(error);
        if (trouble?.kind === 'later') return trouble.delayMs;
        // Any other answer the platform gave (refused, not connected, the campaign removed): not
        // known to be live, and the re-check below meets the same and says why.
        if (isAppError(error)) return false;
        throw error;
      });
      if (typeof live === 'number') return live;
      if (live) return this.recordLiveChange(workspaceId, accountId, actionId, meta, leaseMs);
    }
    if (action.autoApplied) {
      const stopped = await this.killSwitchStops(workspaceId);
      if (stopped) return returnToQueue(stopped);
    }
    if (!account) return returnToQueue('the account has no connected advertising-platform account');
    let recheck: Recheck;
    try {
      recheck = await recheckAction(this.options.platform, account, action);
      if (recheck.ok && action.autoApplied) {
        const verdict = await this.reclassify(workspaceId, accountId, account, actionId, action);
        if (verdict.kind === 'wait') return READ_MODEL_RETRY_MS;
        if (verdict.kind === 'not-safe') return returnToQueue(verdict.reason);
      }
    } catch (error) {
      // Nothing was changed yet: a lost grant returns the action, an outage or rate limit defers it,
      // and a read the platform refuses as a request, or answers with values that cannot be used,
      // fails again the same way: a person sees why.
      if (isAppError(error) && error.code === 'platform-request-refused') return returnToQueue(`the platform refused the apply-time re-check: ${error.message}`);
      if (isAppError(error) && error.code === 'platform-answer-invalid') return returnToQueue(`the apply-time re-check could not use the platform's answer: ${error.message}`);
      const trouble = platformTrouble(error);
      if (!trouble) throw error;
      if (trouble.kind === 'return') return returnToQueue(trouble.reason);
      this.options.logger.warn({ action_id: actionId, retry_in_ms: trouble.delayMs, err: (error as Error).message }, 'platform unavailable for the re-check; the action comes back later');
      return trouble.delayMs;
    }
    if (!recheck.ok) return returnToQueue(recheck.reason);

    const claimId = uuidv4();
    const onAction = { workspaceId, accountId, actionId, workerId: this.workerId, meta };
    let attempt: number;
    try {
      const claimed = await commands.handle(actionDecider, { type: 'StartApply', ...onAction, claimId, leaseMs });
      attempt = claimed.state.attempts;
    } catch (error) {
      if (error instanceof NothingToApplyError) return null;
      if (error instanceof ApplyClaimHeldError) return untilLeaseEnds(error.leaseUntil);
      throw error;
    }
    const finish = async (result: ApplyResult): Promise<boolean> => {
      try {
        await commands.handle(actionDecider, { type: 'FinishApply', ...onAction, claimId, result });
        return true;
      } catch (error) {
        if (!(error instanceof ApplyClaimLostError)) throw error;
        // Our lease ran out and another worker took over: its attempt decides the outcome.
        this.options.logger.warn({ action_id: actionId, claim_id: claimId }, 'apply claim lost before the attempt was recorded');
        return false;
      }
    };

    // The switch may have been engaged while the re-check and re-classification ran (platform
    // calls, up to 3 s waiting for the read model): look again under the claim, right before
    // the change goes live, and hand the action back as the first look does. Approved actions
    // are applied whatever the switch says (docs/api.md, "Kill switch").
    if (action.autoApplied) {
      const stopped = await this.killSwitchStops(workspaceId);
      if (stopped) {
        if (!(await finish({ kind: 'returned', reason: stopped }))) return null;
        this.options.logger.info({ action_id: actionId, reason: stopped }, 'action returned to the queue');
        this.options.onApplyResult?.('returned');
        return null;
      }
    }

    const heartbeat = this.heartbeat(message, { ...onAction, type: 'HeartbeatApply', claimId, leaseMs });
    let partialFailures: PartialFailure[] = [];
    let appliedOperations: AppliedOperation[] = [];
    try {
      const outcome = await this.options.platform.applyChange(account, recheck.change);
      partialFailures = (outcome?.failures ?? []).map((f) => ({ subject: f.subject.slice(0, 300), error_code: f.error_code.slice(0, 200), message: f.message.slice(0, 1000) }));
      appliedOperations = (outcome?.operations ?? []).map((o) => ({ subject: o.subject.slice(0, 300), resource_name: o.resource_name.slice(0, 300) }));
    } catch (error) {
      heartbeat.stop();
      const trouble = platformTrouble(error);
      if (trouble?.kind === 'return') {
        // The grant went away between the re-check and the change: no retry can help until a person reconnects.
        if (!(await finish({ kind: 'returned', reason: trouble.reason }))) return null;
        this.options.onApplyResult?.('returned');
        return null;
      }
      // A definite refusal (a 4xx GoogleAdsFailure) is Google's final word on this change: retrying sends the same request.
      const refused = isAppError(error) && error.code === 'platform-request-refused';
      const detail = refused ? refusalText(error) : error instanceof Error ? error.message : String(error);
      const willRetry = !refused && attempt < MAX_APPLY_ATTEMPTS;
      if (!(await finish({ kind: 'failed', error: detail, willRetry, refused }))) return null;
      this.options.logger.warn({ action_id: actionId, attempt, err: detail, will_retry: willRetry }, 'platform call failed');
      this.options.onApplyResult?.(willRetry ? 'failed' : 'returned');
      return willRetry ? (this.options.retryBaseMs ?? 1000) * 2 ** (attempt - 1) : null;
    }
    heartbeat.stop();
    if (!(await finish({ kind: 'applied', partialFailures, appliedOperations }))) return null;
    this.options.logger.info({ action_id: actionId, kind: action.kind, attempt }, 'action applied');
    this.options.onApplyResult?.('applied');
    return null;
  }

  /**
   * Records as applied a change the platform already shows in full (see changeAlreadyLive),
   * under a claim of its own and without a platform call: a dead worker made it live, and
   * sending it again would change nothing (or, with the kill switch engaged, is not allowed).
   */
  private async recordLiveChange(workspaceId: string, accountId: string, actionId: string, meta: CommandMeta, leaseMs: number): Promise<number | null> {
    const { commands } = this.options.infrastructure;
    const onAction = { workspaceId, accountId, actionId, workerId: this.workerId, meta };
    const claimId = uuidv4();
    try {
      await commands.handle(actionDecider, { type: 'StartApply', ...onAction, claimId, leaseMs });
    } catch (error) {
      if (error instanceof NothingToApplyError) return null;
      if (error instanceof ApplyClaimHeldError) return untilLeaseEnds(error.leaseUntil);
      throw error;
    }
    try {
      await commands.handle(actionDecider, { type: 'FinishApply', ...onAction, claimId, result: { kind: 'applied' } });
    } catch (error) {
      if (!(error instanceof ApplyClaimLostError)) throw error;
      return null;
    }
    this.options.logger.info({ action_id: actionId }, 'action found live after its worker died; recorded as applied (nothing was sent again)');
    this.options.onApplyResult?.('applied');
    return null;
  }

  /** The kill switch's reason when it is engaged (it stops auto-applied actions only), read again at each look. */
  private async killSwitchStops(workspaceId: string): Promise<string | null> {
    return killSwitchStop((await loadWorkspaceFromLeader(this.options.infrastructure.aggregates, workspaceId)).state);
  }

  /**
   * Auto-applied actions are classified again right before they go live, against the
   * platform's live values, the day's band and the learning period: what was safe when
   * proposed may not be any more (a matched search term converted, another change to the
   * campaign went live). `wait` when the approvals read model has not caught up yet.
   */
  private async reclassify(
    workspaceId: string,
    accountId: string,
    account: PlatformAccountRef,
    actionId: string,
    action: ActionState,
  ): Promise<{ kind: 'safe' } | { kind: 'not-safe'; reason: string } | { kind: 'wait' }> {
    const now = this.options.clock?.() ?? new Date();
    const live = await liveDraft(this.options.platform, account, action, now);
    if (!live) return { kind: 'not-safe', reason: 'what the action changes no longer exists on the platform' };
    const { draft, ties } = live;
    // The learning period reads the approvals read model: it must have seen everything recorded
    // so far, or a change applied a moment ago, or one auto-applied just before this one, would be missed.
    if (bandedChange(draft) && !(await this.barrier.catchUp(APPROVALS_PROJECTION))) return { kind: 'wait' };
    const day = action.proposedAt ? action.proposedAt.slice(0, 10) : undefined;
    const context = await this.policyContext.read(workspaceId, accountId, draft, now, { day, exceptActionId: actionId, ties });
    const classification = classifyAction(draft, context);
    if (classification.risk_tier === 'safe') return { kind: 'safe' };
    return { kind: 'not-safe', reason: `no longer safe at apply time (${classification.risk_tier}): ${classification.policy_reasons.join('; ')}` };
  }

  /**
   * While the platform call runs: tells NATS the message is in progress (no redelivery) and
   * extends the claim's lease, every third of the lease. A refused heartbeat means the claim
   * was lost; the call cannot be taken back (it is idempotent), and the finish will be refused.
   */
  private heartbeat(message: JsMsg, command: HeartbeatApply): { stop(): void } {
    let stopped = false;
    const beat = async () => {
      message.working();
      try {
        await this.options.infrastructure.commands.handle(actionDecider, command);
      } catch (error) {
        this.options.logger.warn({ action_id: command.actionId, err: error instanceof Error ? error.message : String(error) }, 'apply claim heartbeat failed');
      }
    };
    const timer = setInterval(() => {
      if (!stopped) void beat();
    }, Math.max(50, Math.floor(command.leaseMs / 3)));
    return {
      stop: () => {
        stopped = true;
        clearInterval(timer);
      },
    };
  }
}

/** Every error of a refusal, as the action's outcome: "Google Ads: <message> (<errorCode>)", then the others. */
function refusalText(error: AppError): string {
  const errors = (error.details.platform_errors ?? []) as readonly { error_code: string; message: string }[];
  const rest = errors.slice(1).map((e) => `${e.message} (${e.error_code})`);
  return [error.message, ...rest].join('; ').slice(0, 2000);
}
