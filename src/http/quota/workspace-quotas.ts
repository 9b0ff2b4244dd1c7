import { sql, type Kysely } from 'kysely';
import type { Database } from '../../db/schema.ts';
import { RUNS_PROJECTION } from '../../../projections/runs/runs-projection.ts';
import { QuotaExceededError } from './quota-errors.ts';

const HOUR_MS = 3_600_000;

export interface WorkspaceQuotaLimits {
  /** 0 means unlimited. */
  readonly runsPerHour: number;
  /** 0 means unlimited. */
  readonly modelTokensPerDay: number;
}

interface Admission {
  readonly runId: string;
  readonly at: number;
}

/** A run this process let through, until the runs read model holds it. */
interface Reservation extends Admission {
  /** Stream sequence of its RunQueued once appended; until then the append is in flight. */
  seq?: number;
}

/** What the read model says about a workspace, read in one statement (one snapshot). */
interface WorkspaceUsage {
  /** Runs queued in the last hour, counted up to the run quota (no further: nothing more is needed). */
  readonly runs: number;
  /** How far the runs read model has applied the stream: a run with a RunQueued at or below it is in `runs`. */
  readonly runsCheckpoint: number;
  /** Model tokens of the runs finished today. */
  readonly tokens: number;
}

/**
 * The workspace quotas checked at POST /api/v1/runs, read from the runs read model (folded
 * from RunQueued and the usage in RunSucceeded/RunFailed, so the figures are the events'
 * own): one statement per request, which counts the workspace's runs of the last hour (up to
 * the quota, over the `(workspace_id, created_at)` index), reads the workspace's tokens of
 * today (one row the projection adds to as runs end), and reads the runs projection's
 * checkpoint in the same snapshot. No rows come back, whatever the quota: a workspace allowed
 * 100,000 runs an hour costs a count, not 100,000 rows per request.
 *
 * The read model trails the stream by a few milliseconds, so this process also remembers the
 * runs it let through until the read model holds them: those whose RunQueued is past the
 * checkpoint read with the count (or still being appended) are added to it, the others are
 * in it already. The check and the reservation happen in one synchronous step after the
 * statement, so within a process the run quota is exact without a lock or a wait. Across HTTP
 * processes it is soft: a run another process admitted a moment ago may not be projected
 * yet, so a simultaneous burst can overshoot by the runs the other processes admit in that
 * moment. Tokens are counted when a run ends, so runs in flight can carry a workspace past
 * its token quota; the quota then stops the next run.
 */
export class WorkspaceQuotas {
  /** Runs this process let through that the read model may not hold yet, per workspace, oldest first. */
  private readonly unprojected = new Map<string, Reservation[]>();

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
   * Runs `queue` if the workspace is within its quotas; `runId` is the run it will queue and
   * `sequenceOf` tells the stream sequence of its RunQueued from what `queue` returned
   * (undefined: nothing was queued).
   * @throws QuotaExceededError naming the quota and when it resets.
   */
  async admit<T>(workspaceId: string, runId: string, queue: () => Promise<T>, sequenceOf: (queued: T) => number | undefined): Promise<T> {
    if (this.limits.runsPerHour === 0 && this.limits.modelTokensPerDay === 0) return queue();
    const usage = await this.usageOf(workspaceId);
    this.checkTokens(usage.tokens);
    // From here to the reservation nothing awaits: concurrent admissions see each other.
    const reservation = this.reserveRun(workspaceId, runId, usage);
    if (reservation === null) throw await this.runQuotaExceeded(workspaceId);
    let queued: T;
    try {
      queued = await queue();
    } catch (error) {
      this.forget(workspaceId, reservation);
      throw error;
    }
    const seq = sequenceOf(queued);
    // Nothing appended, nothing to count.
    if (seq === undefined) this.forget(workspaceId, reservation);
    else reservation.seq = seq;
    return queued;
  }

  private async usageOf(workspaceId: string): Promise<WorkspaceUsage> {
    const { runsPerHour, modelTokensPerDay } = this.limits;
    const now = this.now();
    const row = await this.db
      .selectNoFrom((eb) => [
        runsPerHour === 0
          ? sql<number>`0`.as('runs')
          : eb
              .selectFrom(
                eb
                  .selectFrom('runs')
                  .select(sql`1`.as('one'))
                  .where('workspace_id', '=', workspaceId)
                  .where('created_at', '>', new Date(now.getTime() - HOUR_MS))
                  .limit(runsPerHour)
                  .as('recent'),
              )
              .select(sql<number>`count(*)::int`.as('n'))
              .as('runs'),
        eb.selectFrom('projection_checkpoints').select('last_seq').where('projection', '=', RUNS_PROJECTION).as('runs_checkpoint'),
        modelTokensPerDay === 0
          ? sql<string>`0`.as('tokens')
          : eb
              .selectFrom('workspace_token_usage')
              .select('tokens')
              .where('workspace_id', '=', workspaceId)
              .where(sql<boolean>`day = ${utcDayStart(now).toISOString().slice(0, 10)}::date`)
              .as('tokens'),
      ])
      .executeTakeFirstOrThrow();
    return { runs: Number(row.runs ?? 0), runsCheckpoint: Number(row.runs_checkpoint ?? 0), tokens: Number(row.tokens ?? 0) };
  }

  /** @returns the reservation, or null when the workspace is at its run quota. */
  private reserveRun(workspaceId: string, runId: string, usage: WorkspaceUsage): Reservation | null {
    const limit = this.limits.runsPerHour;
    const at = this.now().getTime();
    if (limit === 0) return { runId, at };
    const windowStart = at - HOUR_MS;
    // The read model holds the ones at or below its checkpoint: counted there, forgotten here.
    const pending = (this.unprojected.get(workspaceId) ?? []).filter(
      (reservation) => reservation.at > windowStart && (reservation.seq === undefined || reservation.seq > usage.runsCheckpoint),
    );
    if (usage.runs + pending.length >= limit) {
      this.keep(workspaceId, pending);
      return null;
    }
    const reservation: Reservation = { runId, at };
    this.keep(workspaceId, [...pending, reservation]);
    return reservation;
  }

  /**
   * The refusal of a workspace at its run quota, with when the window frees a slot: an hour
   * after the limit-th newest run in it. Only a refusal reads the runs themselves.
   */
  private async runQuotaExceeded(workspaceId: string): Promise<QuotaExceededError> {
    const limit = this.limits.runsPerHour;
    const recent = await this.recentRuns(workspaceId);
    const now = this.now();
    const windowStart = now.getTime() - HOUR_MS;
    const byRun = new Map<string, number>();
    for (const admission of [...recent, ...(this.unprojected.get(workspaceId) ?? [])]) {
      if (admission.at > windowStart) byRun.set(admission.runId, Math.min(admission.at, byRun.get(admission.runId) ?? Infinity));
    }
    const newest = [...byRun.values()].sort((a, b) => b - a).slice(0, limit);
    // Runs that turned an hour old since the count have freed their slots already: retry at once.
    const resetsAt = newest.length >= limit ? new Date(newest[limit - 1]! + HOUR_MS) : now;
    return new QuotaExceededError('runs_per_hour', limit, newest.length, resetsAt, now);
  }

  /** The newest runs of the last hour in the read model, at most `runsPerHour` of them. */
  private async recentRuns(workspaceId: string): Promise<Admission[]> {
    const rows = await this.db
      .selectFrom('runs')
      .select(['id', 'created_at'])
      .where('workspace_id', '=', workspaceId)
      .where('created_at', '>', new Date(this.now().getTime() - HOUR_MS))
      .orderBy('created_at', 'desc')
      .limit(this.limits.runsPerHour)
      .execute();
    return rows.map((row) => ({ runId: row.id, at: row.created_at.getTime() }));
  }

  private keep(workspaceId: string, reservations: Reservation[]): void {
    if (reservations.length > 0) this.unprojected.set(workspaceId, reservations);
    else this.unprojected.delete(workspaceId);
  }

  private forget(workspaceId: string, reservation: Reservation): void {
    this.keep(workspaceId, (this.unprojected.get(workspaceId) ?? []).filter((held) => held !== reservation));
  }

  private checkTokens(used: number): void {
    const limit = this.limits.modelTokensPerDay;
    if (limit === 0 || used < limit) return;
    const now = this.now();
    throw new QuotaExceededError('model_tokens_per_day', limit, used, new Date(utcDayStart(now).getTime() + 24 * HOUR_MS), now);
  }
}

function utcDayStart(now: Date): Date {
  return new Date(Date.UTC(now.getUTCFullYear(), now.getUTCMonth(), now.getUTCDate()));
}
