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
  /** When it was read (ms since the epoch, by the quotas' clock). */
  readonly readAt: number;
}

type WorkspaceQuotaName = 'runs' | 'tokens';

/**
 * How long a workspace's usage read serves the requests after it. Within a process the run
 * quota stays exact (the runs this process lets through are counted from memory until the
 * read model holds them, and the read's checkpoint says which those are); what this adds is
 * that runs other processes queued, and runs that ended, count from at most this much later.
 * A workspace posting 500 runs a second then costs Postgres one statement a second, not 500.
 */
export const USAGE_READ_TTL_MS = 1_000;
/** Workspaces whose last read is kept; past this the oldest is dropped (and read again when needed). */
const MAX_USAGE_READS = 10_000;

/**
 * The workspace quotas checked at POST /api/v1/runs, read from the runs read model (folded
 * from RunQueued and the usage in RunSucceeded/RunFailed, so the figures are the events'
 * own): one statement, which counts the workspace's runs of the last hour (up to
 * the quota, over the `(workspace_id, created_at)` index), reads the workspace's tokens of
 * today (one row the projection adds to as runs end), and reads the runs projection's
 * checkpoint in the same snapshot, and serves the workspace's requests of the next second
 * (USAGE_READ_TTL_MS). No rows come back, whatever the quota: a workspace allowed 100,000 runs
 * an hour costs a count, not 100,000 rows per request.
 *
 * The read model trails the stream by a few milliseconds, so this process also remembers the
 * runs it let through until the read model holds them: those whose RunQueued is past the
 * checkpoint read with the count (or still being appended) are added to it, the others are
 * in it already. The check and the reservation happen in one synchronous step after the
 * statement, so within a process the run quota is exact without a lock or a wait. Across HTTP
 * processes it is soft: a run another process admitted up to a second ago may not be counted
 * yet, so a simultaneous burst can overshoot by the runs the other processes admit in that
 * second. Tokens are counted when a run ends, so runs in flight can carry a workspace past
 * its token quota; the quota then stops the next run.
 */
export class WorkspaceQuotas {
  /**
   * Per workspace, the runs this process let through that the read model may not hold yet
   * (oldest first), and the checkpoint up to which the others were forgotten: a snapshot older
   * than that lacks runs no longer remembered here, and is not counted with.
   */
  private readonly unprojected = new Map<string, { readonly reservations: Reservation[]; readonly prunedUpTo: number }>();
  /** The last usage read of each workspace, oldest read first (see {@link USAGE_READ_TTL_MS}). */
  private readonly usage = new Map<string, WorkspaceUsage>();

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
   * (undefined: nothing was queued). `fresh` reads the read model even if it was read a moment
   * ago (the caller just waited for it to hold something, e.g. a run's end).
   * @throws QuotaExceededError naming the quota and when it resets.
   */
  async admit<T>(
    workspaceId: string,
    runId: string,
    queue: () => Promise<T>,
    sequenceOf: (queued: T) => number | undefined,
    options: { readonly fresh?: boolean } = {},
  ): Promise<T> {
    if (this.limits.runsPerHour === 0 && this.limits.modelTokensPerDay === 0) return queue();
    let [usage, reused] = await this.usageOf(workspaceId, options.fresh ?? false);
    // From here to the reservation nothing awaits: concurrent admissions see each other.
    let verdict = this.reserve(workspaceId, runId, usage);
    // A refusal rests on a read of its own, never on one a moment old (runs may have left the
    // window since); a snapshot older than what this process already forgot is read again, and
    // that read is the truth even if still older (the read model was restored).
    if (verdict === 'stale' || (typeof verdict === 'string' && reused)) {
      [usage] = await this.usageOf(workspaceId, true);
      verdict = this.reserve(workspaceId, runId, usage, true);
    }
    if (verdict === 'tokens') throw this.tokensExceeded(usage.tokens);
    if (verdict === 'runs' || verdict === 'stale') throw await this.runQuotaExceeded(workspaceId);
    const reservation = verdict;
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

  /**
   * The workspace's usage in the read model, read at most {@link USAGE_READ_TTL_MS} ago unless
   * `fresh`, and whether it is an earlier request's read.
   */
  private async usageOf(workspaceId: string, fresh: boolean): Promise<[WorkspaceUsage, boolean]> {
    const now = this.now().getTime();
    const recent = this.usage.get(workspaceId);
    if (!fresh && recent && now - recent.readAt < USAGE_READ_TTL_MS) return [recent, true];
    const usage = await this.readUsage(workspaceId);
    const known = this.usage.get(workspaceId);
    // Reads of one workspace can finish out of order: only a newer snapshot replaces the one kept.
    if (!known || isNewer(usage, known)) {
      this.usage.delete(workspaceId);
      this.usage.set(workspaceId, usage);
      if (this.usage.size > MAX_USAGE_READS) this.usage.delete(this.usage.keys().next().value!);
    }
    return [usage, false];
  }

  /** The reservation, or which quota the workspace is at, or 'stale' (see {@link reserveRun}). Checks the tokens first. */
  private reserve(workspaceId: string, runId: string, usage: WorkspaceUsage, acceptOlder = false): Reservation | WorkspaceQuotaName | 'stale' {
    const tokens = this.limits.modelTokensPerDay;
    if (tokens > 0 && usage.tokens >= tokens) return 'tokens';
    return this.reserveRun(workspaceId, runId, usage, acceptOlder) ?? 'runs';
  }

  private async readUsage(workspaceId: string): Promise<WorkspaceUsage> {
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
    return { runs: Number(row.runs ?? 0), runsCheckpoint: Number(row.runs_checkpoint ?? 0), tokens: Number(row.tokens ?? 0), readAt: now.getTime() };
  }

  /**
   * @returns the reservation; null when the workspace is at its run quota; 'stale' when `read`
   * is older than the snapshot this process last forgot its runs by (unless `acceptOlder`).
   */
  private reserveRun(workspaceId: string, runId: string, read: WorkspaceUsage, acceptOlder = false): Reservation | null | 'stale' {
    // The newest snapshot any request of this process has read: the reservations forgotten
    // below are in its count, and in that of every later one.
    const kept = this.usage.get(workspaceId);
    const usage = kept && isNewer(kept, read) ? kept : read;
    const limit = this.limits.runsPerHour;
    const at = this.now().getTime();
    if (limit === 0) return { runId, at };
    const held = this.unprojected.get(workspaceId);
    if (held && usage.runsCheckpoint < held.prunedUpTo && !acceptOlder) return 'stale';
    const windowStart = at - HOUR_MS;
    // The read model holds the ones at or below its checkpoint: counted there, forgotten here.
    const pending = (held?.reservations ?? []).filter(
      (reservation) => reservation.at > windowStart && (reservation.seq === undefined || reservation.seq > usage.runsCheckpoint),
    );
    const prunedUpTo = acceptOlder ? usage.runsCheckpoint : Math.max(held?.prunedUpTo ?? 0, usage.runsCheckpoint);
    if (usage.runs + pending.length >= limit) {
      this.keep(workspaceId, pending, prunedUpTo);
      return null;
    }
    const reservation: Reservation = { runId, at };
    this.keep(workspaceId, [...pending, reservation], prunedUpTo);
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
    for (const admission of [...recent, ...(this.unprojected.get(workspaceId)?.reservations ?? [])]) {
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

  private keep(workspaceId: string, reservations: Reservation[], prunedUpTo: number): void {
    this.unprojected.delete(workspaceId);
    this.unprojected.set(workspaceId, { reservations, prunedUpTo });
    if (this.unprojected.size <= MAX_USAGE_READS) return;
    // Past the bound, the least recently used workspace with nothing pending goes (its mark with it).
    for (const [workspace, held] of this.unprojected) {
      if (held.reservations.length > 0) continue;
      this.unprojected.delete(workspace);
      return;
    }
  }

  private forget(workspaceId: string, reservation: Reservation): void {
    const held = this.unprojected.get(workspaceId);
    if (held) this.keep(workspaceId, held.reservations.filter((other) => other !== reservation), held.prunedUpTo);
  }

  private tokensExceeded(used: number): QuotaExceededError {
    const now = this.now();
    return new QuotaExceededError('model_tokens_per_day', this.limits.modelTokensPerDay, used, new Date(utcDayStart(now).getTime() + 24 * HOUR_MS), now);
  }
}

/** Whether `a` is a later snapshot of the read model than `b` (by the runs checkpoint, then by when it was read). */
function isNewer(a: WorkspaceUsage, b: WorkspaceUsage): boolean {
  return a.runsCheckpoint > b.runsCheckpoint || (a.runsCheckpoint === b.runsCheckpoint && a.readAt > b.readAt);
}

function utcDayStart(now: Date): Date {
  return new Date(Date.UTC(now.getUTCFullYear(), now.getUTCMonth(), now.getUTCDate()));
}
