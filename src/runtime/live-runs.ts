import { foldRunEvents, runIdOf, type RunActionRecord, type RunRecord } from '../../projections/runs/fold-runs.ts';
import { isTerminal, type RunActionFacts, type RunRow } from '../../projections/runs/run-view.ts';
import type { DomainEvent } from '../events/catalogue/index.ts';
import type { StoredEvent } from '../event-store/event-store.ts';

/** A run as the live fold holds it: the same row and actions the runs read model would hold. */
export interface LiveRun {
  readonly row: RunRow;
  readonly actions: readonly RunActionFacts[];
}

export interface LiveRunsOptions {
  /** Most runs held; the oldest go first (a run not held is read from Postgres). */
  readonly maxRuns?: number;
  /**
   * Most bytes held, counted as the JSON of the runs' events (briefs, tool calls with their
   * outputs, answers); past it the oldest runs go first. Default 16 MiB: 20,000 running runs
   * of ten tool calls each would otherwise hold gigabytes.
   */
  readonly maxBytes?: number;
  /** Sees each run the moment its terminal event is folded; the run is then let go. */
  readonly onTerminal?: (run: LiveRun) => void;
}

/**
 * The runs of the runs read model, folded in memory with the projection's own fold
 * (projections/runs/fold-runs.ts) from the events of the stream, in stream order. Only runs
 * whose RunQueued was folded here are held: a run that began before this process followed
 * the stream is simply not known, and its reader goes to Postgres. Runs leave when they end
 * (handed to `onTerminal`, e.g. for the terminal-run cache) or when `maxRuns` is passed.
 *
 * @example
 * ```ts
 * const live = new LiveRuns({ onTerminal: (run) => cache(run) });
 * live.apply(storedEvents);
 * live.get(runId)?.row.status; // 'queued'
 * ```
 */
export class LiveRuns {
  private readonly rows = new Map<string, RunRecord>();
  private readonly actions = new Map<string, RunActionRecord[]>();
  /** The LiveRun last handed out per run, until the run's next event: readers may memoize by identity. */
  private readonly views = new Map<string, LiveRun>();
  private readonly maxRuns: number;
  private readonly maxBytes: number;
  /** Per held run, the JSON length of the events folded into it. */
  private readonly bytes = new Map<string, number>();
  private heldBytes = 0;
  private readonly onTerminal: ((run: LiveRun) => void) | undefined;

  constructor(options: LiveRunsOptions = {}) {
    this.maxRuns = options.maxRuns ?? 20_000;
    this.maxBytes = options.maxBytes ?? 16 * 1024 * 1024;
    this.onTerminal = options.onTerminal;
  }

  get size(): number {
    return this.rows.size;
  }

  /** What the held runs weigh, as counted for `maxBytes`. */
  get bytesHeld(): number {
    return this.heldBytes;
  }

  /** Folds consecutive events of the stream (any events: those of no run are skipped). */
  apply(events: readonly StoredEvent[]): void {
    for (const stored of events) {
      const runId = runIdOf(stored.event as DomainEvent);
      if (runId === null) continue;
      const { actions } = foldRunEvents(this.rows, [stored]);
      this.views.delete(runId);
      const row = this.rows.get(runId);
      if (!row) continue;
      if (actions.length > 0) {
        const held = this.actions.get(runId);
        if (held) held.push(...actions);
        else this.actions.set(runId, actions);
      }
      if (isTerminal(row.status)) {
        const run = this.toLiveRun(row);
        this.forget(runId);
        this.onTerminal?.(run);
        continue;
      }
      const weight = JSON.stringify(stored.event.data).length;
      this.bytes.set(runId, (this.bytes.get(runId) ?? 0) + weight);
      this.heldBytes += weight;
      while (this.rows.size > this.maxRuns || this.heldBytes > this.maxBytes) {
        const oldest = this.rows.keys().next().value;
        if (oldest === undefined) break;
        this.forget(oldest);
      }
    }
  }

  /** The run as last folded; the same object until the run's next event (so it can key a memo). */
  get(runId: string): LiveRun | undefined {
    const held = this.views.get(runId);
    if (held) return held;
    const row = this.rows.get(runId);
    if (!row) return undefined;
    const run = this.toLiveRun(row);
    this.views.set(runId, run);
    return run;
  }

  /** Lets go of every run (e.g. when the follower lost its place in the stream). */
  clear(): void {
    this.rows.clear();
    this.actions.clear();
    this.views.clear();
    this.bytes.clear();
    this.heldBytes = 0;
  }

  private forget(runId: string): void {
    this.rows.delete(runId);
    this.actions.delete(runId);
    this.views.delete(runId);
    this.heldBytes -= this.bytes.get(runId) ?? 0;
    this.bytes.delete(runId);
  }

  /** The row as Postgres returns it: Date timestamps, JSON columns in jsonb's key order. */
  private toLiveRun(record: RunRecord): LiveRun {
    const row: RunRow = {
      ...record,
      agent: inJsonbOrder(record.agent),
      usage: inJsonbOrder(record.usage),
      error: inJsonbOrder(record.error),
      tool_calls: inJsonbOrder(record.tool_calls),
      created_at: new Date(record.created_at),
      started_at: record.started_at === null ? null : new Date(record.started_at),
      finished_at: record.finished_at === null ? null : new Date(record.finished_at),
    };
    const actions = (this.actions.get(record.id) ?? []).map((action) => ({
      id: action.id,
      account_id: action.account_id,
      kind: action.kind,
      summary: action.summary,
      risk_tier: action.risk_tier,
      disposition: action.disposition,
      policy_reasons: action.policy_reasons,
    }));
    return { row, actions };
  }
}

/**
 * A copy of a JSON value with object keys in the order Postgres's jsonb keeps them (shorter
 * keys first, then bytewise), so a representation built from memory has the same bytes as
 * one built from the read model.
 */
export function inJsonbOrder<T>(value: T): T {
  if (Array.isArray(value)) return value.map((item: unknown) => inJsonbOrder(item)) as T;
  if (value === null || typeof value !== 'object') return value;
  const keys = Object.keys(value).sort((a, b) => a.length - b.length || (a < b ? -1 : a > b ? 1 : 0));
  const ordered: Record<string, unknown> = {};
  for (const key of keys) ordered[key] = inJsonbOrder((value as Record<string, unknown>)[key]);
  return ordered as T;
}
