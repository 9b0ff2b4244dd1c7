import type { EventEnvelope } from '../../src/events/envelope.ts';
import type { Infrastructure } from '../../src/runtime/infrastructure.ts';
import { startTestService, type TestService } from '../../test/support/test-service.ts';
import { releaseConfig, trackConfig } from './isolation.ts';
import { now } from './report.ts';

/**
 * Shared pieces of the service-level benchmarks: an isolated in-process service whose
 * stream and schema the runner drops even on failure, a bounded-concurrency pool, an HTTP
 * load loop, and a watcher that timestamps run lifecycle events as they reach the stream.
 */

/** startTestService (every role unless `env.ROLES` says otherwise) on a private stream and schema. */
export async function startBenchService(label: string, env: Record<string, string> = {}): Promise<TestService> {
  const svc = await startTestService(`bench${label}`, { LOG_LEVEL: 'silent', ...env });
  trackConfig(svc.config);
  return {
    ...svc,
    stop: async () => {
      try {
        await svc.stop();
      } finally {
        await releaseConfig(svc.config);
      }
    },
  };
}

/** Runs `work` over `items` with at most `concurrency` in flight. */
export async function inPool<T, R>(items: readonly T[], concurrency: number, work: (item: T, index: number) => Promise<R>): Promise<R[]> {
  const results: R[] = new Array(items.length);
  let next = 0;
  const worker = async () => {
    while (next < items.length) {
      const index = next++;
      results[index] = await work(items[index]!, index);
    }
  };
  await Promise.all(Array.from({ length: Math.min(concurrency, items.length) }, worker));
  return results;
}

export interface LoadResult {
  /** Per-request latency in ms, request sent to body read. */
  readonly latencies: number[];
  /** Wall time of the whole batch. */
  readonly ms: number;
  readonly bodies: string[];
}

/**
 * Sends `count` requests, `concurrency` at a time, each built by `send(i)`; reads every
 * body. Throws when a response's status is not `expectStatus`.
 */
export async function httpLoad(count: number, concurrency: number, expectStatus: number, send: (i: number) => Promise<Response>): Promise<LoadResult> {
  const latencies: number[] = new Array(count);
  const bodies: string[] = new Array(count);
  const started = now();
  await inPool(
    Array.from({ length: count }, (_, i) => i),
    concurrency,
    async (i) => {
      const t0 = now();
      const response = await send(i);
      const body = await response.text();
      latencies[i] = now() - t0;
      if (response.status !== expectStatus) throw new Error(`request #${i} answered ${response.status} (expected ${expectStatus}): ${body.slice(0, 300)}`);
      bodies[i] = body;
    },
  );
  return { latencies, ms: now() - started, bodies };
}

export const TERMINAL_RUN_EVENTS: ReadonlySet<string> = new Set(['RunSucceeded', 'RunFailed', 'RunCanceled']);

/** When (performance.now() in this process) each lifecycle event of a run reached the watcher, plus the events. */
export interface RunTimeline {
  /** Last arrival per event type. */
  readonly seen: Map<string, number>;
  /** Last event per type. */
  readonly events: Map<string, EventEnvelope>;
  /** Every ToolCalled of the run, in order, with its arrival time. */
  readonly toolCalls: { readonly at: number; readonly durationMs: number }[];
}

/**
 * Follows the subjects of one workspace from the current head and timestamps every event
 * on arrival, grouped by run for those carrying a run id (lifecycle events, ToolCalled). `waitFor(runId, type)` resolves once the event is seen;
 * `waitTerminal(runId)` on the first of RunSucceeded, RunFailed, RunCanceled.
 */
export class RunWatcher {
  readonly runs = new Map<string, RunTimeline>();
  /** Arrival time of every event seen, by event id. */
  readonly arrivals = new Map<string, number>();
  private readonly waiters = new Map<string, (() => void)[]>();
  private readonly controller = new AbortController();
  private loop: Promise<void> | undefined;
  private failure: unknown;

  private constructor() {}

  static async start(infra: Infrastructure, workspaceId: string): Promise<RunWatcher> {
    const watcher = new RunWatcher();
    const from = (await infra.store.lastSequence()) + 1;
    const filter = infra.subjects.filter(workspaceId, '*', '*');
    watcher.loop = (async () => {
      try {
        for await (const stored of infra.store.follow(filter, from, watcher.controller.signal)) watcher.record(stored.event);
      } catch (error) {
        if (!watcher.controller.signal.aborted) watcher.failure = error;
      }
    })();
    return watcher;
  }

  private record(event: EventEnvelope): void {
    const at = now();
    this.arrivals.set(event.id, at);
    this.wake(`event:${event.id}`);
    const runId = (event.data as { run_id?: unknown } | null)?.run_id;
    if (typeof runId !== 'string') return;
    let timeline = this.runs.get(runId);
    if (!timeline) {
      timeline = { seen: new Map(), events: new Map(), toolCalls: [] };
      this.runs.set(runId, timeline);
    }
    timeline.seen.set(event.type, at);
    timeline.events.set(event.type, event);
    if (event.type === 'ToolCalled') timeline.toolCalls.push({ at, durationMs: Number((event.data as { duration_ms?: unknown }).duration_ms) });
    if (TERMINAL_RUN_EVENTS.has(event.type)) this.wake(`${runId}:terminal`);
    this.wake(`${runId}:${event.type}`);
  }

  private wake(key: string): void {
    const waiting = this.waiters.get(key);
    if (!waiting) return;
    this.waiters.delete(key);
    for (const resolve of waiting) resolve();
  }

  private has(runId: string, type: string): boolean {
    if (runId === 'event') return this.arrivals.has(type);
    const seen = this.runs.get(runId)?.seen;
    if (!seen) return false;
    return type === 'terminal' ? [...TERMINAL_RUN_EVENTS].some((t) => seen.has(t)) : seen.has(type);
  }

  /** Resolves once the run's `type` event (or 'terminal') has been seen. */
  async waitFor(runId: string, type: string, timeoutMs = 30_000): Promise<RunTimeline> {
    if (this.failure) throw this.failure;
    if (!this.has(runId, type)) {
      await new Promise<void>((resolve, reject) => {
        const timer = setTimeout(() => reject(new Error(`run ${runId}: no ${type} event within ${timeoutMs} ms`)), timeoutMs);
        const key = `${runId}:${type}`;
        const list = this.waiters.get(key) ?? [];
        list.push(() => {
          clearTimeout(timer);
          resolve();
        });
        this.waiters.set(key, list);
      });
    }
    return this.runs.get(runId)!;
  }

  /** Resolves with the arrival time of the event with this id. */
  async waitForEvent(eventId: string, timeoutMs = 30_000): Promise<number> {
    await this.waitFor('event', eventId, timeoutMs);
    return this.arrivals.get(eventId)!;
  }

  waitTerminal(runId: string, timeoutMs = 30_000): Promise<RunTimeline> {
    return this.waitFor(runId, 'terminal', timeoutMs);
  }

  /** The type of the run's terminal event, if seen. */
  outcome(runId: string): string | undefined {
    const seen = this.runs.get(runId)?.seen;
    return seen ? [...TERMINAL_RUN_EVENTS].find((t) => seen.has(t)) : undefined;
  }

  async stop(): Promise<void> {
    this.controller.abort();
    await this.loop;
  }
}

/** Milliseconds between two envelope times (ISO strings). */
export function envelopeGapMs(from: EventEnvelope, to: EventEnvelope): number {
  return Date.parse(to.time) - Date.parse(from.time);
}
