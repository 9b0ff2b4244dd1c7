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
class Reservation implements Admission {
  /** Stream sequence of its RunQueued once appended; until then the append is in flight. */
  seq: number | undefined;
  readonly runId: string;
  readonly at: number;

  constructor(runId: string, at: number) {
    this.runId = runId;
    this.at = at;
  }
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

/**
 * How long a workspace's usage read serves the requests after it. Within a process the run
 * quota stays exact (the runs this process lets through are counted from memory until the
 * read model holds them, and the read's checkpoint says which those are); what this adds is
 * that runs other processes queued, and runs that ended, count from at most this much later.
 * A workspace posting 500 runs a second then costs Postgres one statement a second, not 500.
 */
export const USAGE_READ_TTL_MS = 1_000;
/** Workspaces whose ledger is kept; past this the least recently used with nothing pending is dropped (and read again when needed). */
const MAX_LEDGERS = 10_000;

/**
 * What this process knows of a workspace: the latest snapshot of the read model it has read,
 * and the runs it let through that are not in that snapshot (RunQueued past its checkpoint,
 * or still being appended). Runs a newer snapshot holds are forgotten here at the next
 * reservation, so snapshot and reservations always count each run once between them.
 */
interface WorkspaceLedger {
  usage: WorkspaceUsage;
  reservations: Reservation[];
}

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
  /** What this process knows of each workspace, least recently used first (see {@link WorkspaceLedger}). */
  private readonly ledgers = new Map<string, WorkspaceLedger>();

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
    let [usage, reused] = await this.read(workspaceId, options.fresh ?? false);
    // From here to the reservation nothing awaits: concurrent admissions see each other.
    let verdict = this.reserve(workspaceId, runId, usage);
    // A refusal rests on a read of its own, never on one a moment old (runs may have left the window since).
    if (!(verdict instanceof Reservation) && reused) {
      [usage] = await this.read(workspaceId, true);
      verdict = this.reserve(workspaceId, runId, usage);
    }
    if (verdict === 'runs') throw await this.runQuotaExceeded(workspaceId);
    if (!(verdict instanceof Reservation)) throw this.tokensExceeded(verdict.tokensUsed);
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
   * The workspace's usage, read at most {@link USAGE_READ_TTL_MS} ago (now when `fresh`), and
   * whether it is an earlier request's read.
   */
  private async read(workspaceId: string, fresh: boolean): Promise<[WorkspaceUsage, boolean]> {
    const kept = this.ledgers.get(workspaceId)?.usage;
    if (!fresh && kept && this.now().getTime() - kept.readAt < USAGE_READ_TTL_MS) return [kept, true];
    return [await this.readUsage(workspaceId), false];
  }

  /**
   * The reservation, or the quota the workspace is at (tokens first), by the latest snapshot of
   * `read` and the one the ledger holds: reads of one workspace can finish out of order. The
   * runs this process let through that the snapshot holds (RunQueued at or below its
   * checkpoint) are counted there and forgotten here; the others are counted here.
   */
  private reserve(workspaceId: string, runId: string, read: WorkspaceUsage): Reservation | 'runs' | { readonly tokensUsed: number } {
    let ledger = this.ledgers.get(workspaceId);
    if (!ledger) ledger = { usage: read, reservations: [] };
    else if (isLater(read, ledger.usage)) ledger.usage = read;
    this.keep(workspaceId, ledger);
    const { usage } = ledger;
    const tokens = this.limits.modelTokensPerDay;
    if (tokens > 0 && usage.tokens >= tokens) return { tokensUsed: usage.tokens };
    const at = this.now().getTime();
    const limit = this.limits.runsPerHour;
    if (limit === 0) return new Reservation(runId, at);
    ledger.reservations = ledger.reservations.filter(
      (reservation) => reservation.at > at - HOUR_MS && (reservation.seq === undefined || reservation.seq > usage.runsCheckpoint),
    );
    if (usage.runs + ledger.reservations.length >= limit) return 'runs';
    const reservation = new Reservation(runId, at);
    ledger.reservations.push(reservation);
    return reservation;
  }

  /** Marks the ledger as the most recently used; past the bound, the least recently used with nothing pending goes. */
  private keep(workspaceId: string, ledger: WorkspaceLedger): void {
    this.ledgers.delete(workspaceId);
    this.ledgers.set(workspaceId, ledger);
    if (this.ledgers.size <= MAX_LEDGERS) return;
    for (const [workspace, other] of this.ledgers) {
      if (other.reservations.length > 0) continue;
      this.ledgers.delete(workspace);
      return;
    }
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
              .where(sql<boolean>`day = ${now.toISOString().slice(0, 10)}::date`)
              .as('tokens'),
      ])
      .executeTakeFirstOrThrow();
    return { runs: Number(row.runs ?? 0), runsCheckpoint: Number(row.runs_checkpoint ?? 0), tokens: Number(row.tokens ?? 0), readAt: now.getTime() };
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
    for (const admission of [...recent, ...(this.ledgers.get(workspaceId)?.reservations ?? [])]) {
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

  private forget(workspaceId: string, reservation: Reservation): void {
    const ledger = this.ledgers.get(workspaceId);
    if (ledger) ledger.reservations = ledger.reservations.filter((other) => other !== reservation);
  }

  private tokensExceeded(used: number): QuotaExceededError {
    const now = this.now();
    return new QuotaExceededError('model_tokens_per_day', this.limits.modelTokensPerDay, used, new Date(utcDayStart(now).getTime() + 24 * HOUR_MS), now);
  }
}

/**
 * Whether `a` is a later snapshot of the read model than `b`: by the runs checkpoint, then by
 * when it was read. A read a whole TTL after the kept one wins whatever its checkpoint: a
 * checkpoint that went back is a read model restored or rebuilt, and that is the truth now.
 */
function isLater(a: WorkspaceUsage, b: WorkspaceUsage): boolean {
  if (a.readAt - b.readAt >= USAGE_READ_TTL_MS) return true;
  return a.runsCheckpoint > b.runsCheckpoint || (a.runsCheckpoint === b.runsCheckpoint && a.readAt > b.readAt);
}

function utcDayStart(now: Date): Date {
  return new Date(Date.UTC(now.getUTCFullYear(), now.getUTCMonth(), now.getUTCDate()));
}
