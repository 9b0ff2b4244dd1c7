import type { Config } from '../config/config.ts';
import type { Logger } from '../log/logger.ts';
import { PROJECTIONS } from '../../projections/index.ts';
import { Projector } from '../../projections/runtime/projector.ts';
import { LeasedProjector } from '../../projections/runtime/leased-projector.ts';
import { ProjectorLease, projectorLeaseName } from '../../projections/runtime/projector-lease.ts';
import { countQuarantined } from '../../projections/runtime/quarantine.ts';
import { createHttpApp } from '../http/app.ts';
import { HEALTH_PROBE_PATHS, isLoopback } from '../http/health-routes.ts';
import { authenticateHeader, type Authentication } from '../auth/authenticate.ts';
import { startHttpServer, type HttpServer } from '../http/http-server.ts';
import { KeyDirectory } from '../auth/key-directory.ts';
import { IdempotencyStore } from '../http/idempotency/idempotency-store.ts';
import { TerminalRunCache } from '../http/routes/terminal-run-cache.ts';
import { cacheTerminalRun, runsRouter } from '../http/routes/runs-routes.ts';
import { accountsRouter } from '../http/routes/accounts-routes.ts';
import { openApiRouter } from '../http/openapi/openapi-routes.ts';
import { approvalsRouter } from '../http/routes/approvals-routes.ts';
import { campaignTargetRouter } from '../http/routes/campaign-target-routes.ts';
import { campaignsRouter } from '../http/routes/campaigns-routes.ts';
import { historyRouter } from '../http/routes/history-routes.ts';
import { killSwitchRouter } from '../http/routes/kill-switch-routes.ts';
import { runEventsRouter } from '../http/routes/run-events-routes.ts';
import type { ApiContext } from '../http/routes/api-context.ts';
import { createModel } from '../agent/model/create-model.ts';
import { createPlatform } from '../platform/create-platform.ts';
import { requireCredentialsKeyIfNeeded } from '../platform/credentials/credentials-key-check.ts';
import { ProposalService } from '../policy/proposal-service.ts';
import { AgentWorker } from '../workers/agent-worker.ts';
import { ApplyWorker } from '../workers/apply-worker.ts';
import { PlatformChangeImporter } from '../workers/platform-change-importer.ts';
import { admissionSealsOf, type AdmissionSeals } from '../../projections/runtime/admission-seals.ts';
import { ServiceMetrics } from '../metrics/service-metrics.ts';
import { metricsRouter } from '../http/routes/metrics-routes.ts';
import { eventSigningKeysRouter } from '../http/routes/event-signing-keys-routes.ts';
import { rateLimit } from '../http/middleware/rate-limit.ts';
import { openInfrastructure, type Infrastructure } from './infrastructure.ts';
import { watchNatsServerErrors } from '../event-store/nats-connection.ts';
import { ReadBarrier } from './read-barrier.ts';
import { identityFreshnessOf } from './identity-freshness.ts';
import { RunStateFollower } from './run-state-follower.ts';
import { readinessChecks } from './readiness.ts';
import { ApprovalsAppliedChangeLookup } from '../../projections/approvals/applied-change-lookup.ts';
import { Commands } from '../../commands/command-bus.ts';

export interface RunningService {
  readonly infrastructure: Infrastructure;
  /** The API (and health and metrics), in a process with the http role. */
  readonly http: HttpServer | undefined;
  /** Health and metrics only, in a process without the http role. */
  readonly operations: HttpServer | undefined;
  /** This process's copy of the projectors role (active, with its projector, or standing by); none without the role. */
  readonly projectorCopy: LeasedProjector | undefined;
  readonly agentWorker: AgentWorker | undefined;
  readonly applyWorker: ApplyWorker | undefined;
  /** Stops accepting, finishes in-flight work, drains consumers and connections. */
  stop(): Promise<void>;
}

/**
 * Starts the roles named in config.roles in this process. Every role can also run alone
 * in its own process; none keeps state another copy would need.
 */
export async function startService(config: Config, logger: Logger): Promise<RunningService> {
  const infrastructure = await openInfrastructure(config, `ads-agent-runs:${config.roles.join('+')}`, {
    notice: (message) => logger.info(message),
    onReadStall: (stall) => logger.warn({ filter: stall.filter, waiting_for: stall.waitingFor, last_matching: stall.lastMatching }, 'a read of the event stream stalled (its NATS server went away); it goes on with a new consumer'),
  });
  const { database, store, aggregates, commands, nc, js, jsm, subjects } = infrastructure;
  const foreignKey = infrastructure.signing.foreignActivationKeyId;
  if (foreignKey !== null) {
    logger.warn(
      { stream: config.eventStream, key_id: foreignKey },
      `signing of this event stream began with key ${foreignKey}, which this process does not hold (a development key of another checkout, or a lost production key): ` +
        'every event it signed is refused as untrusted and parked; start from the checkout that made them, or set EVENT_SIGNING_KEY_FILE to that key ' +
        '(EVENT_SIGNING_RETIRED_PUBLIC_KEYS to its public key), or give this checkout EVENT_STREAM and DATABASE_SCHEMA of its own',
    );
  }
  watchNatsServerErrors(nc, (message) => logger.error({ nats_error: message }, 'NATS refused an operation; if it is a permission, compare deploy/nats/auth.conf with EVENT_STREAM and EVENT_SUBJECT_PREFIX'));
  // Shutdown order: stop taking requests, let workers finish (they append the runs' last
  // events), then stop projectors so those events are projected, then close connections.
  const stopHttp: (() => Promise<void>)[] = [];
  const stopWorkers: (() => Promise<void>)[] = [];
  const stopProjectors: (() => Promise<void>)[] = [];
  await requireCredentialsKeyIfNeeded(config, database.db).catch(async (error: unknown) => {
    await infrastructure.close();
    throw error;
  });
  // `metrics` exists by the time the platform makes its first request.
  const platform = createPlatform(database.db, config, {
    googleAds: { onRequest: (method, status, seconds) => metrics.googleAdsRequests.observe({ method, status }, seconds) },
  });
  const proposals = new ProposalService(commands, new ApprovalsAppliedChangeLookup(database.db), { platform });

  let projectorCopy: LeasedProjector | undefined;
  let seals: AdmissionSeals | undefined;
  const metrics = new ServiceMetrics({
    projectors: () => projectorCopy?.statuses() ?? [],
    // Only a process with the role has a lease to report: without it the lease metrics are absent, not 0.
    ...(config.roles.includes('projectors') ? { projectorCopy: () => projectorCopy } : {}),
    seals: () => seals?.counts,
    streamHead: () => store.lastSequence(),
    quarantined: () => countQuarantined(database.db),
  });
  // A process without the http role (a worker or projector scaled out on its own) still answers
  // its orchestrator's probes and Prometheus's scrapes: what it counts is in its /metrics alone.
  // Its port is taken before any consumer starts: a start that fails on it must not have picked
  // up work first.
  const readiness = readinessChecks({ infrastructure, projectorCopy: () => projectorCopy, runsProjectors: config.roles.includes('projectors') });
  let operations: HttpServer | undefined;
  if (!config.roles.includes('http')) {
    const app = createHttpApp({
      config,
      logger,
      routers: [metricsRouter(metrics.registry)],
      readiness,
      publicPages: false,
    });
    try {
      operations = await startHttpServer(app, { host: config.host, port: config.port, logger, publicBaseUrl: config.publicBaseUrl });
    } catch (error) {
      await infrastructure.close();
      throw error;
    }
  }
  if (config.roles.includes('projectors')) {
    // Blocks of the stream admitted before (by this process or another with the key) are believed from their seals.
    seals = admissionSealsOf(infrastructure, logger);
    // One consumer and one admission of each batch for every projection, each in its own transaction,
    // in the one copy of the role that holds the lease; other copies stand by (leased-projector.ts).
    const copy = new LeasedProjector({
      lease: new ProjectorLease({
        connect: database.newSession,
        name: projectorLeaseName(config.databaseSchema, config.eventStream),
      }),
      projector: () =>
        new Projector({
          db: database.db,
          js,
          jsm,
          stream: config.eventStream,
          filterSubject: subjects.all,
          projections: PROJECTIONS,
          admission: store.admission,
          seals,
          logger,
        }),
      logger,
    });
    await copy.start();
    projectorCopy = copy;
    stopProjectors.push(() => copy.stop());
  }

  let http: HttpServer | undefined;
  if (config.roles.includes('http')) {
    // Children made on first use (a source never seen stays out of /metrics, as before), then reused: no label hashing per request.
    const lookups = new Map<string, { inc(): void }>();
    const keys = new KeyDirectory(database.db, {
      onLookup: (source) => {
        let child = lookups.get(source);
        if (!child) lookups.set(source, (child = metrics.apiKeyLookups.labels(source)));
        child.inc();
      },
    });
    const barrier = new ReadBarrier(store, database.db);
    keys.watch(nc, `${subjects.filter('*', '_', 'key')}`, identityFreshnessOf(store, subjects, barrier));
    const idempotency = new IdempotencyStore(database.db);
    // Ends open event streams when the server stops, so in-flight requests can finish.
    const httpShutdown = new AbortController();
    const runCache = new TerminalRunCache();
    const liveRuns = new RunStateFollower({
      store,
      filter: subjects.all,
      logger,
      onTerminal: (run) => cacheTerminalRun(runCache, run, config.publicBaseUrl),
      // What other processes (agent workers, other HTTP processes) append keeps this process's
      // remembered write-model states current: a command decided on them needs no reload.
      onEvent: (result) => aggregates.followed(result),
      connectionStatus: nc.status(),
    });
    await liveRuns.start();
    // Same caches, but reads and writes of an API request fail at once when the log is unreachable.
    const apiAggregates = aggregates.withOptions({ outageRideThroughMs: 0 });
    const apiCommands = new Commands(apiAggregates);
    const api: ApiContext = {
      platform,
      // The target endpoint proposes through the same policy as the agent, without its ride-through.
      proposals: new ProposalService(apiCommands, new ApprovalsAppliedChangeLookup(database.db), { platform }),
      config,
      logger,
      db: database.db,
      // An API request does not wait out an event-log outage: the client gets 503 with Retry-After at once.
      commands: apiCommands,
      aggregates: apiAggregates,
      store,
      subjects,
      barrier,
      keys,
      idempotency,
      runCache,
      liveRuns,
    };
    const app = createHttpApp({
      config,
      logger,
      routers: [
        runsRouter(api),
        runEventsRouter(api, httpShutdown.signal),
        accountsRouter(api),
        campaignsRouter(api),
        campaignTargetRouter(api),
        approvalsRouter(api),
        historyRouter(api),
        killSwitchRouter(api),
        openApiRouter(config),
        eventSigningKeysRouter(infrastructure.signing),
        metricsRouter(metrics.registry),
      ],
      observeRequest: (method, route, status, seconds) => metrics.observeHttpRequest(method, route, status, seconds),
      readiness,
      readinessAudience: async (ctx) => {
        if (isLoopback(ctx.ip)) return true;
        const header = ctx.get('authorization');
        if (!header) return false;
        const authentication = (ctx.state.authentication as Authentication | undefined) ?? (await authenticateHeader(keys, header));
        return authentication.kind === 'authenticated' && authentication.principal.scope === 'admin';
      },
      beforeRoutes: config.rateLimitRps === 0 ? [] : [
        rateLimit({
          keys,
          perKey: { name: 'api-key', ratePerSecond: config.rateLimitRps, burst: config.rateLimitBurst },
          perAddress: { name: 'client-address', ratePerSecond: config.rateLimitAnonymousRps, burst: config.rateLimitAnonymousBurst },
          exemptPaths: HEALTH_PROBE_PATHS,
          onLimited: (policy) => metrics.rateLimited.inc({ policy }),
        }),
      ],
    });
    http = await startHttpServer(app, { host: config.host, port: config.port, logger, publicBaseUrl: config.publicBaseUrl });
    const sweep = setInterval(() => void idempotency.sweep().catch(() => undefined), 3_600_000);
    sweep.unref();
    stopHttp.push(async () => {
      clearInterval(sweep);
      httpShutdown.abort();
      await http!.stop(config.shutdownGraceMs);
      keys.stop();
      await liveRuns.stop();
    });
  }

  let agentWorker: AgentWorker | undefined;
  if (config.roles.includes('agent-worker')) {
    agentWorker = new AgentWorker({
      infrastructure,
      executor: {
        platform,
        proposals,
        model: createModel(config),
        wallClockMs: config.runTimeoutMs,
        modelBudgetMs: config.runModelBudgetMs,
        logger,
        observeStep: (step, seconds) => metrics.observeAgentStep(step, seconds),
      },
      concurrency: config.agentWorkerConcurrency,
      logger,
      shutdownGraceMs: config.shutdownGraceMs,
      ackWaitMs: config.agentAckWaitMs,
      onRunFinished: (outcome, code) => metrics.runsFinished.inc({ outcome, code }),
      maxDeliveries: config.workerMaxDeliveries,
      maxRunsPerWorkspace: config.agentMaxRunsPerWorkspace,
      onParked: (parked) => metrics.workerParkedMessages.inc({ worker: 'agent-worker', reason: parked.reason }),
      onLoopRestart: () => metrics.workerLoopRestarts.inc({ worker: 'agent-worker' }),
    });
    await agentWorker.start();
    const worker = agentWorker;
    stopWorkers.push(() => worker.stop());
  }

  let applyWorker: ApplyWorker | undefined;
  if (config.roles.includes('apply-worker')) {
    applyWorker = new ApplyWorker({
      infrastructure,
      platform,
      logger,
      ackWaitMs: config.applyAckWaitMs,
      onApplyResult: (result) => metrics.applyResults.inc({ result }),
      maxDeliveries: config.workerMaxDeliveries,
      onParked: (parked) => metrics.workerParkedMessages.inc({ worker: 'apply-worker', reason: parked.reason }),
      onLoopRestart: () => metrics.workerLoopRestarts.inc({ worker: 'apply-worker' }),
    });
    await applyWorker.start();
    const worker = applyWorker;
    stopWorkers.push(() => worker.stop());
    const changeImporter = new PlatformChangeImporter({ infrastructure, platform, logger, intervalMs: config.googleAdsChangeImportIntervalMs });
    changeImporter.start();
    stopWorkers.push(() => changeImporter.stop());
  }

  const listening = http ?? operations;
  logger.info({ roles: config.roles, port: listening?.port, stream: config.eventStream, schema: config.databaseSchema }, 'service started');
  return {
    infrastructure,
    http,
    operations,
    projectorCopy,
    agentWorker,
    applyWorker,
    stop: async () => {
      for (const stop of stopHttp) await stop();
      await Promise.all(stopWorkers.map((stop) => stop()));
      for (const stop of stopProjectors) await stop();
      // Probed and scraped until the work is done.
      await operations?.stop(config.shutdownGraceMs);
      await infrastructure.close();
      logger.info('service stopped');
    },
  };
}
