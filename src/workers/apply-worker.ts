import { AckPolicy, DeliverPolicy, JetStreamApiCodes, JetStreamApiError, type Consumer, type JsMsg } from '@nats-io/jetstream';
import { hostname } from 'node:os';
import { v4 as uuidv4 } from 'uuid';
import { NothingToApplyError } from '../../commands/action/action-lifecycle.ts';
import { READY_TO_APPLY } from '../../commands/action/action-state.ts';
import type { DomainEvent } from '../events/catalogue/index.ts';
import type { Actor } from '../events/envelope.ts';
import { parseEvent } from '../event-store/event-store.ts';
import type { Logger } from '../log/logger.ts';
import type { AdsPlatform, PlatformAccountRef } from '../platform/ads-platform.ts';
import type { Infrastructure } from '../runtime/infrastructure.ts';
import { recheckAction } from './apply-recheck.ts';
import { ACK, later, PullLoop, type ParkedMessage } from './pull-loop.ts';

export const APPLY_WORKER_CONSUMER = 'apply_workers';
/** Platform attempts before an action goes back to the queue. */
export const MAX_APPLY_ATTEMPTS = 5;
const ACK_WAIT_MS = 60_000;

export interface ApplyWorkerOptions {
  readonly infrastructure: Infrastructure;
  readonly platform: AdsPlatform;
  readonly logger: Logger;
  readonly concurrency?: number;
  readonly workerId?: string;
  /** Base of the exponential backoff between platform attempts. */
  readonly retryBaseMs?: number;
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
 * switch for auto-applied ones, the auto-apply slot, the platform state the proposal was
 * based on), then claims the action with ActionApplyStarted, applies the change through
 * the platform port and records ActionApplied — or ActionReturnedToQueue with the reason.
 * A failed platform call is recorded and retried with backoff, at most 5 times. Each
 * action is applied at most once per claim; platform changes are idempotent, so a retry
 * after a crash between the call and ActionApplied changes nothing twice.
 */
export class ApplyWorker {
  readonly workerId: string;
  private readonly actor: Actor;
  private readonly pullLoop: PullLoop;

  constructor(private readonly options: ApplyWorkerOptions) {
    this.workerId = options.workerId ?? `apply:${hostname()}:${process.pid}:${uuidv4().slice(0, 8)}`;
    this.actor = { kind: 'worker', id: this.workerId };
    this.pullLoop = new PullLoop({
      name: 'apply-worker',
      concurrency: options.concurrency ?? 4,
      maxDeliveries: options.maxDeliveries ?? 5,
      logger: options.logger,
      admission: options.infrastructure.store.admission,
      consumer: () => this.ensureConsumer(),
      handle: async (message) => {
        const retryInMs = await this.handle(message);
        return retryInMs === null ? ACK : later(retryInMs);
      },
      onParked: options.onParked,
      onRestart: options.onLoopRestart,
    });
  }

  async start(): Promise<void> {
    await this.pullLoop.start();
  }

  async stop(): Promise<void> {
    await this.pullLoop.stop();
  }

  private async ensureConsumer(): Promise<Consumer> {
    const { jsm, js, config, subjects } = this.options.infrastructure;
    try {
      await jsm.consumers.info(config.eventStream, APPLY_WORKER_CONSUMER);
    } catch (error) {
      if (!(error instanceof JetStreamApiError && error.code === JetStreamApiCodes.ConsumerNotFound)) throw error;
      await jsm.consumers
        .add(config.eventStream, {
          durable_name: APPLY_WORKER_CONSUMER,
          ack_policy: AckPolicy.Explicit,
          deliver_policy: DeliverPolicy.All,
          filter_subject: subjects.filter('*', '*', 'action'),
          ack_wait: ACK_WAIT_MS * 1_000_000,
          max_ack_pending: 10_000,
        })
        .catch((addError: unknown) => {
          if (!(addError instanceof JetStreamApiError)) throw addError;
        });
    }
    return js.consumers.get(config.eventStream, APPLY_WORKER_CONSUMER);
  }

  /** @returns null when done with the message, or a delay before it should come back. */
  private async handle(message: JsMsg): Promise<number | null> {
    const event = parseEvent(message.data, message.seq) as DomainEvent;
    // A failed attempt is retried through the delayed redelivery of the message that triggered it.
    const trigger = (event.type === 'ActionProposed' && event.data.disposition === 'auto_applied') || event.type === 'ActionApproved';
    if (!trigger || !event.account_id) return null;
    const { writeModel } = this.options.infrastructure;
    const workspaceId = event.workspace_id;
    const accountId = event.account_id;
    const actionId = event.aggregate.id;
    const meta = { actor: this.actor, correlationId: event.correlation_id };
    const action = (await writeModel.actions.load(writeModel.actionSubject(workspaceId, accountId, actionId))).state;
    if (!READY_TO_APPLY.includes(action.status as never)) return null;

    const returnToQueue = async (reason: string) => {
      await writeModel.finishApply({ workspaceId, accountId, actionId, workerId: this.workerId, result: { kind: 'returned', reason }, meta });
      this.options.logger.info({ action_id: actionId, reason }, 'action returned to the queue');
      this.options.onApplyResult?.('returned');
      return null;
    };

    if (action.autoApplied) {
      const workspace = await writeModel.workspaces.load(writeModel.workspaceSubject(workspaceId));
      if (workspace.state.killSwitch.engaged) return returnToQueue('the workspace kill switch is engaged');
    }
    const accountState = (await writeModel.accounts.load(writeModel.accountSubject(workspaceId, accountId))).state;
    const account: PlatformAccountRef = { accountId, name: accountState.name, platform: accountState.platform ?? 'none', sandboxSeed: accountState.sandboxSeed };
    if (account.platform === 'none') return returnToQueue('the account has no connected advertising-platform account');
    const recheck = await recheckAction(this.options.platform, account, action);
    if (!recheck.ok) return returnToQueue(recheck.reason);

    let attempt: number;
    try {
      const claimed = await writeModel.startApply({ workspaceId, accountId, actionId, workerId: this.workerId, meta });
      attempt = claimed.state.attempts;
    } catch (error) {
      if (error instanceof NothingToApplyError) return null;
      throw error;
    }
    try {
      await this.options.platform.applyChange(account, recheck.change);
    } catch (error) {
      const detail = error instanceof Error ? error.message : String(error);
      const willRetry = attempt < MAX_APPLY_ATTEMPTS;
      await writeModel.finishApply({ workspaceId, accountId, actionId, workerId: this.workerId, result: { kind: 'failed', error: detail, willRetry }, meta });
      this.options.logger.warn({ action_id: actionId, attempt, err: detail, will_retry: willRetry }, 'platform call failed');
      this.options.onApplyResult?.(willRetry ? 'failed' : 'returned');
      return willRetry ? (this.options.retryBaseMs ?? 1000) * 2 ** (attempt - 1) : null;
    }
    await writeModel.finishApply({ workspaceId, accountId, actionId, workerId: this.workerId, result: { kind: 'applied' }, meta });
    this.options.logger.info({ action_id: actionId, kind: action.kind, attempt }, 'action applied');
    this.options.onApplyResult?.('applied');
    return null;
  }
}
