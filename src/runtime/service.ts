import type { Config } from '../config/config.ts';
import type { Logger } from '../log/logger.ts';
import { PROJECTIONS } from '../../projections/index.ts';
import { Projector } from '../../projections/runtime/projector.ts';
import { createHttpApp } from '../http/app.ts';
import { startHttpServer, type HttpServer } from '../http/http-server.ts';
import { KeyDirectory } from '../auth/key-directory.ts';
import { IdempotencyStore } from '../http/idempotency/idempotency-store.ts';
import { TerminalRunCache } from '../http/routes/terminal-run-cache.ts';
import { runsRouter } from '../http/routes/runs-routes.ts';
import { accountsRouter } from '../http/routes/accounts-routes.ts';
import { openInfrastructure, type Infrastructure } from './infrastructure.ts';
import { ReadBarrier } from './read-barrier.ts';
import { readinessChecks } from './readiness.ts';

export interface RunningService {
  readonly infrastructure: Infrastructure;
  readonly http: HttpServer | undefined;
  readonly projectors: readonly Projector[];
  /** Stops accepting, finishes in-flight work, drains consumers and connections. */
  stop(): Promise<void>;
}

/**
 * Starts the roles named in config.roles in this process. Every role can also run alone
 * in its own process; none keeps state another copy would need.
 */
export async function startService(config: Config, logger: Logger): Promise<RunningService> {
  const infrastructure = await openInfrastructure(config, `ads-agent-runs:${config.roles.join('+')}`);
  const { database, store, writeModel, nc, js, jsm, subjects } = infrastructure;
  const stoppers: (() => Promise<void>)[] = [];

  const projectors: Projector[] = [];
  if (config.roles.includes('projectors')) {
    for (const projection of PROJECTIONS) {
      const projector = new Projector({
        db: database.db,
        js,
        jsm,
        stream: config.eventStream,
        filterSubject: subjects.all,
        projection,
        logger,
      });
      await projector.start();
      projectors.push(projector);
    }
    stoppers.push(async () => {
      await Promise.all(projectors.map((p) => p.stop()));
    });
  }

  let http: HttpServer | undefined;
  if (config.roles.includes('http')) {
    const keys = new KeyDirectory(database.db);
    keys.watch(nc, `${subjects.filter('*', '_', 'key')}`);
    const idempotency = new IdempotencyStore(database.db);
    const api = {
      config,
      logger,
      db: database.db,
      writeModel,
      barrier: new ReadBarrier(store, database.db),
      keys,
      idempotency,
      runCache: new TerminalRunCache(),
    };
    const app = createHttpApp({
      config,
      logger,
      routers: [runsRouter(api), accountsRouter(api)],
      readiness: readinessChecks({ infrastructure, projectors }),
    });
    http = await startHttpServer(app, { host: config.host, port: config.port, logger });
    const sweep = setInterval(() => void idempotency.sweep().catch(() => undefined), 3_600_000);
    sweep.unref();
    stoppers.unshift(async () => {
      clearInterval(sweep);
      await http!.stop(config.shutdownGraceMs);
      keys.stop();
    });
  }

  logger.info({ roles: config.roles, port: http?.port, stream: config.eventStream, schema: config.databaseSchema }, 'service started');
  return {
    infrastructure,
    http,
    projectors,
    stop: async () => {
      for (const stop of stoppers) await stop();
      await infrastructure.close();
      logger.info('service stopped');
    },
  };
}
