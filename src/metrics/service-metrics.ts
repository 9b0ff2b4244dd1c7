import { Counter, Gauge, Histogram, Registry, collectDefaultMetrics } from 'prom-client';
import type { ProjectorStatus } from '../../projections/runtime/projector.ts';
import type { SealCounts } from '../../projections/runtime/admission-seals.ts';
import { CopyRole } from '../../projections/runtime/leased-projector.ts';

export interface MetricsSources {
  /** Status of the projectors this process runs (empty when it runs none). */
  projectors(): readonly ProjectorStatus[];
  /** The stream's last sequence, for projector lag. */
  streamHead(): Promise<number>;
  /** Events parked in the quarantine, per projection (projections/runtime/quarantine.ts). */
  quarantined?(): Promise<ReadonlyMap<string, number>>;
  /** What this process's projectors did with admission seals (projections/runtime/admission-seals.ts). */
  seals?(): SealCounts | undefined;
  /** This process's copy of the projectors role (projections/runtime/leased-projector.ts); undefined without the role. */
  projectorCopy?(): { readonly role: CopyRole; readonly takeovers: number } | undefined;
}

/**
 * The process's Prometheus metrics (GET /metrics). One registry per service instance, so
 * several services in one process (the tests) do not share counters. Counters count what
 * this process did; sum them across processes.
 */
const MAX_CACHED_LABEL_SETS = 2_000;

export class ServiceMetrics {
  readonly registry = new Registry();
  readonly httpRequests: Histogram<'method' | 'route' | 'status'>;
  readonly runsFinished: Counter<'outcome' | 'code'>;
  readonly applyResults: Counter<'result'>;
  readonly workerParkedMessages: Counter<'worker' | 'reason'>;
  readonly workerLoopRestarts: Counter<'worker'>;
  readonly apiKeyLookups: Counter<'source'>;
  readonly rateLimited: Counter<'policy'>;
  readonly googleAdsRequests: Histogram<'method' | 'status'>;
  readonly agentSteps: Histogram<'step'>;

  /** Labelled children of httpRequests by "method route status": prom-client hashes a label object on every observe. */
  private readonly httpRequestChildren = new Map<string, ReturnType<Histogram<'method' | 'route' | 'status'>['labels']>>();

  /**
   * Records one finished request, at a fraction of `httpRequests.observe(labels, s)`'s cost.
   * @example
   * ```ts
   * metrics.observeHttpRequest('GET', '/api/v1/runs/:runId', 200, 0.0012);
   * ```
   */
  observeHttpRequest(method: string, route: string, status: number, seconds: number): void {
    const key = `${method} ${route} ${status}`;
    let child = this.httpRequestChildren.get(key);
    if (!child) {
      child = this.httpRequests.labels(method, route, String(status));
      // Methods come from clients: past the bound, requests are still counted, only uncached.
      if (this.httpRequestChildren.size < MAX_CACHED_LABEL_SETS) this.httpRequestChildren.set(key, child);
    }
    child.observe(seconds);
  }

  private readonly agentStepChildren = new Map<string, ReturnType<Histogram<'step'>['labels']>>();

  /**
   * Records one step of a run (src/agent/agent-loop.ts, `AgentStep`): a closed set of labels, each child made once.
   * @example
   * ```ts
   * metrics.observeAgentStep('model_turn', 0.84);
   * ```
   */
  observeAgentStep(step: string, seconds: number): void {
    let child = this.agentStepChildren.get(step);
    if (!child) this.agentStepChildren.set(step, (child = this.agentSteps.labels(step)));
    child.observe(seconds);
  }

  /** `projector_lease_held` and `projector_lease_takeovers_total`, read from this process's copy of the role. */
  private registerLeaseMetrics(projectorCopy: NonNullable<MetricsSources['projectorCopy']>, registers: Registry[]): void {
    new Gauge({
      name: 'projector_lease_held',
      help: '1 while this copy of the projectors role holds the lease and projects, 0 while it stands by (absent without the role).',
      registers,
      collect() {
        const copy = projectorCopy();
        this.reset();
        if (copy && copy.role !== CopyRole.Stopped) this.set(copy.role === CopyRole.Active ? 1 : 0);
      },
    });
    new Counter({
      name: 'projector_lease_takeovers_total',
      help: 'Times this copy of the projectors role took the lease over after standing by (another copy died or lost its connection).',
      registers,
      collect() {
        const copy = projectorCopy();
        this.reset();
        if (copy) this.inc(copy.takeovers);
      },
    });
  }

  constructor(sources: MetricsSources) {
    const registers = [this.registry];
    collectDefaultMetrics({ register: this.registry });
    this.httpRequests = new Histogram({
      name: 'http_request_duration_seconds',
      help: 'HTTP requests by method, route template and status.',
      labelNames: ['method', 'route', 'status'],
      buckets: [0.001, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5],
      registers,
    });
    this.runsFinished = new Counter({
      name: 'agent_runs_finished_total',
      help: 'Runs this process ended, by outcome and error code.',
      labelNames: ['outcome', 'code'],
      registers,
    });
    this.applyResults = new Counter({
      name: 'apply_results_total',
      help: 'Apply attempts this process ended: applied, failed (will retry) or returned to the queue.',
      labelNames: ['result'],
      registers,
    });
    this.workerParkedMessages = new Counter({
      name: 'worker_parked_messages_total',
      help: 'Poison messages this process parked (terminated; they stay in the stream), by worker and reason.',
      labelNames: ['worker', 'reason'],
      registers,
    });
    this.workerLoopRestarts = new Counter({
      name: 'worker_loop_restarts_total',
      help: 'Worker pull loops this process restarted after they failed.',
      labelNames: ['worker'],
      registers,
    });
    this.apiKeyLookups = new Counter({
      name: 'api_key_lookups_total',
      help: 'API key lookups by where they were answered: cache, unknown_cache (a key id known not to exist) or database.',
      labelNames: ['source'],
      registers,
    });
    this.rateLimited = new Counter({
      name: 'http_rate_limited_total',
      help: 'Requests refused with 429 rate-limited, by policy: api-key or client-address.',
      labelNames: ['policy'],
      registers,
    });
    this.googleAdsRequests = new Histogram({
      name: 'google_ads_request_duration_seconds',
      help: 'HTTP requests this process made to the Google Ads API: search or mutate:<service>, by status (or network_error).',
      labelNames: ['method', 'status'],
      buckets: [0.01, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30],
      registers,
    });
    this.agentSteps = new Histogram({
      name: 'agent_step_duration_seconds',
      help: 'Steps of the runs this process worked on, timed where they ran: model_turn, check (may the run go on), tool, record (the ToolCalled append).',
      labelNames: ['step'],
      buckets: [0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30],
      registers,
    });
    new Gauge({
      name: 'projector_checkpoint_sequence',
      help: 'Last stream sequence each projector applied.',
      labelNames: ['projection'],
      registers,
      collect() {
        // Reset first: a copy that went from active to standby reports no projector, not its last values.
        this.reset();
        for (const status of sources.projectors()) this.set({ projection: status.name }, status.lastSeq);
      },
    });
    new Gauge({
      name: 'projector_stalled',
      help: '1 while a projector fails to apply a batch (it retries; nothing is skipped).',
      labelNames: ['projection'],
      registers,
      collect() {
        this.reset();
        for (const status of sources.projectors()) this.set({ projection: status.name }, status.stalled ? 1 : 0);
      },
    });
    new Gauge({
      name: 'projector_quarantined_events',
      help: 'Events a projection parked in the quarantine instead of applying (adsagent projections quarantine list).',
      labelNames: ['projection'],
      registers,
      async collect() {
        if (!sources.quarantined) return;
        const counts = await sources.quarantined();
        this.reset();
        for (const status of sources.projectors()) this.set({ projection: status.name }, counts.get(status.name) ?? 0);
        for (const [projection, count] of counts) this.set({ projection }, count);
      },
    });
    new Counter({
      name: 'admission_seals_total',
      help: 'Admission seals this process wrote (written), and seals it found but did not believe (rejected: a signature that does not verify, or messages that are not the ones sealed).',
      labelNames: ['outcome'],
      registers,
      collect() {
        const counts = sources.seals?.();
        if (!counts) return;
        this.reset();
        this.inc({ outcome: 'written' }, counts.written);
        this.inc({ outcome: 'rejected' }, counts.rejected);
      },
    });
    new Counter({
      name: 'projector_events_admitted_from_seals_total',
      help: 'Events whose admission verdict a projector of this process took from a verified seal instead of checking schema, hash and signature again.',
      registers,
      collect() {
        const counts = sources.seals?.();
        if (!counts) return;
        this.reset();
        this.inc(counts.eventsFromSeals);
      },
    });
    // Registered by a process with the projectors role only: a label-less gauge always prints
    // a value, and a 0 from every other process would read as copies standing by.
    if (sources.projectorCopy) this.registerLeaseMetrics(sources.projectorCopy, registers);
    new Gauge({
      name: 'projector_lag_events',
      help: 'Events in the stream a projector has not applied yet.',
      labelNames: ['projection'],
      registers,
      async collect() {
        const statuses = sources.projectors();
        this.reset();
        if (statuses.length === 0) return;
        const head = await sources.streamHead();
        for (const status of statuses) this.set({ projection: status.name }, Math.max(0, head - status.lastSeq));
      },
    });
  }
}
