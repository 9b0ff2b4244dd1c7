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

interface Admission {
  readonly runId: string;
  readonly at: number;
}

/**
 * The workspace quotas checked at POST /api/v1/runs, read from the runs read model (folded
 * from RunQueued and the usage in RunSucceeded/RunFailed, so the figures are the events'
 * own): one indexed query per quota, over the `(account_id, created_at)` index of the
 * workspace's accounts.
 *
 * The read model trails the stream by a few milliseconds, so this process also remembers
 * the runs it admitted in the last hour and counts the union of both by run id. The check
 * and the reservation happen in one synchronous step after the query, so within a process
 * the run quota is exact without a lock or a wait. Across HTTP processes it is soft: a run
 * another process admitted a moment ago may not be projected yet, so a simultaneous burst
 * can overshoot by the runs the other processes admit in that moment. Tokens are counted
 * when a run ends, so runs in flight can carry a workspace past its token quota; the quota
 * then stops the next run.
 */
export class WorkspaceQuotas {
  /** Runs this process admitted in the last hour, per workspace, oldest first. */
  private readonly admitted = new Map<string, Admission[]>();

  private readonly db: Kysely<Database>;
  private readonly limits: WorkspaceQuotaLimits;
  private readonly now: () => Date;

  constructor(
    db: Kysely<Database>,
    limits: WorkspaceQuotaLimits,
    now: () => Date = () => new Date(),
  ) {
    this.db = db;
    this.limits = limits;
    this.now = now;
  }

  /**
   * Runs `queue` if the workspace is within its quotas; `runId` is the run it will queue.
   * @throws QuotaExceededError naming the quota and when it resets.
   */
  async admit<T>(workspaceId: string, runId: string, queue: () => Promise<T>): Promise<T> {
    if (this.limits.runsPerHour === 0 && this.limits.modelTokensPerDay === 0) return queue();
    const [recent] = await Promise.all([this.recentRuns(workspaceId), this.checkTokens(workspaceId)]);
    // From here to the reservation nothing awaits: concurrent admissions see each other.
    this.reserveRun(workspaceId, runId, recent);
    try {
      return await queue();
    } catch (error) {
      this.forget(workspaceId, runId);
      throw error;
    }
  }

  private accountsOf(workspaceId: string) {
    return this.db.selectFrom('accounts').select('id').where('workspace_id', '=', workspaceId);
  }

  /** The newest runs of the last hour in the read model, at most `runsPerHour` of them. */
  private async recentRuns(workspaceId: string): Promise<Admission[]> {
    const limit = this.limits.runsPerHour;
    if (limit === 0) return [];
    const rows = await this.db
      .selectFrom('runs')
      .select(['id', 'created_at'])
      .where('account_id', 'in', this.accountsOf(workspaceId))
      .where('created_at', '>', new Date(this.now().getTime() - HOUR_MS))
      .orderBy('created_at', 'desc')
      .limit(limit)
      .execute();
    return rows.map((row) => ({ runId: row.id, at: row.created_at.getTime() }));
  }

  private reserveRun(workspaceId: string, runId: string, recent: readonly Admission[]): void {
    const limit = this.limits.runsPerHour;
    if (limit === 0) return;
    const now = this.now();
    const windowStart = now.getTime() - HOUR_MS;
    const mine = (this.admitted.get(workspaceId) ?? []).filter((admission) => admission.at > windowStart);
    const byRun = new Map<string, number>();
    for (const admission of [...recent, ...mine]) byRun.set(admission.runId, Math.min(admission.at, byRun.get(admission.runId) ?? Infinity));
    const newest = [...byRun.values()].sort((a, b) => b - a).slice(0, limit);
    if (newest.length >= limit) {
      this.admitted.set(workspaceId, mine);
      // The window frees a slot when the limit-th newest run in it turns an hour old.
      throw new QuotaExceededError('runs_per_hour', limit, newest.length, new Date(newest[limit - 1]! + HOUR_MS), now);
    }
    // Only the newest `limit` matter for any later decision: memory stays bounded per workspace.
    this.admitted.set(workspaceId, [...mine, { runId, at: now.getTime() }].slice(-limit));
  }

  private forget(workspaceId: string, runId: string): void {
    const mine = this.admitted.get(workspaceId);
    if (!mine) return;
    const rest = mine.filter((admission) => admission.runId !== runId);
    if (rest.length > 0) this.admitted.set(workspaceId, rest);
    else this.admitted.delete(workspaceId);
  }

  private async checkTokens(workspaceId: string): Promise<void> {
    const limit = this.limits.modelTokensPerDay;
    if (limit === 0) return;
    const now = this.now();
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
