import { sql, type Kysely } from 'kysely';
import type { Database } from '../../db/schema.ts';
import { QuotaExceededError } from './quota-errors.ts';

const HOUR_MS = 3_600_000;

export interface WorkspaceQuotaLimits {
  /** 0 means unlimited. */
  readonly runsPerHour: number;
  /** 0 means unlimited. */
  readonly modelTokensPerDay: number;
  /** Longest a run can last: a run finished today started at most this long before midnight. */
  readonly runTimeoutMs: number;
}

/**
 * The workspace quotas checked at POST /api/v1/runs, read from the runs read model (which
 * is folded from RunQueued and the usage in RunSucceeded/RunFailed, so the figures are the
 * events' own). Both queries walk the `(account_id, created_at)` index of the workspace's
 * accounts, so a check costs one indexed query per quota.
 *
 * Within one process, `admit` serialises the check and the queueing of each workspace and
 * waits for the read model to hold every run queued before it, so the run quota is exact
 * there. Across HTTP processes it is a soft limit: each process can admit a run the others
 * have not projected yet, so a burst can overshoot by at most one run per concurrent process.
 * Tokens are counted when a run ends, so runs in flight can take a workspace past its token
 * quota; the quota then stops the next run.
 */
export class WorkspaceQuotas {
  private readonly queues = new Map<string, Promise<unknown>>();

  constructor(
    private readonly db: Kysely<Database>,
    private readonly limits: WorkspaceQuotaLimits,
    private readonly catchUp: () => Promise<unknown>,
    private readonly now: () => Date = () => new Date(),
  ) {}

  /**
   * Runs `queue` if the workspace is within its quotas.
   * @throws QuotaExceededError naming the quota and when it resets.
   */
  admit<T>(workspaceId: string, queue: () => Promise<T>): Promise<T> {
    if (this.limits.runsPerHour === 0 && this.limits.modelTokensPerDay === 0) return queue();
    const previous = this.queues.get(workspaceId) ?? Promise.resolve();
    const turn = previous.then(
      () => this.checkThenQueue(workspaceId, queue),
      () => this.checkThenQueue(workspaceId, queue),
    );
    this.queues.set(workspaceId, turn);
    const forget = () => {
      if (this.queues.get(workspaceId) === turn) this.queues.delete(workspaceId);
    };
    turn.then(forget, forget);
    return turn;
  }

  private async checkThenQueue<T>(workspaceId: string, queue: () => Promise<T>): Promise<T> {
    await this.catchUp();
    const now = this.now();
    await this.checkRuns(workspaceId, now);
    await this.checkTokens(workspaceId, now);
    return queue();
  }

  private accountsOf(workspaceId: string) {
    return this.db.selectFrom('accounts').select('id').where('workspace_id', '=', workspaceId);
  }

  private async checkRuns(workspaceId: string, now: Date): Promise<void> {
    const limit = this.limits.runsPerHour;
    if (limit === 0) return;
    const windowStart = new Date(now.getTime() - HOUR_MS);
    // The limit-th newest run of the window: while it is inside the window, the window is full.
    const newest = await this.db
      .selectFrom('runs')
      .select('created_at')
      .where('account_id', 'in', this.accountsOf(workspaceId))
      .where('created_at', '>', windowStart)
      .orderBy('created_at', 'desc')
      .limit(limit)
      .execute();
    if (newest.length < limit) return;
    const oldestCounted = newest[newest.length - 1]!.created_at;
    throw new QuotaExceededError('runs_per_hour', limit, newest.length, new Date(oldestCounted.getTime() + HOUR_MS), now);
  }

  private async checkTokens(workspaceId: string, now: Date): Promise<void> {
    const limit = this.limits.modelTokensPerDay;
    if (limit === 0) return;
    const dayStart = new Date(Date.UTC(now.getUTCFullYear(), now.getUTCMonth(), now.getUTCDate()));
    const row = await this.db
      .selectFrom('runs')
      .select(sql<string>`coalesce(sum((usage->>'input_tokens')::bigint + (usage->>'output_tokens')::bigint), 0)`.as('tokens'))
      .where('account_id', 'in', this.accountsOf(workspaceId))
      .where('created_at', '>=', new Date(dayStart.getTime() - this.limits.runTimeoutMs))
      .where('finished_at', '>=', dayStart)
      .executeTakeFirstOrThrow();
    const used = Number(row.tokens);
    if (used < limit) return;
    throw new QuotaExceededError('model_tokens_per_day', limit, used, new Date(dayStart.getTime() + 24 * HOUR_MS), now);
  }
}
