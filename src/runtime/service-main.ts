import { flushCompileCache } from 'node:module';
import { ConfigError, loadConfig } from '../config/config.ts';
import { PostgresUnreachableError } from '../db/database.ts';
import { NatsUnreachableError } from '../event-store/nats-connection.ts';
import { EventStreamSetupError } from '../event-store/stream-setup.ts';
import { createLogger } from '../log/logger.ts';
import { startService } from './service.ts';
import { SigningKeyError } from '../events/signing/signing-keys.ts';

/** How long past SHUTDOWN_GRACE_MS a stop may take to close its connections before the process exits anyway. */
const SHUTDOWN_OVERRUN_MS = 5000;

/** What `npm start` (src/main.ts) runs: every role in one process unless ROLES says otherwise. */
export async function main(): Promise<void> {
  let config;
  try {
    config = loadConfig();
  } catch (error) {
    if (error instanceof ConfigError) {
      for (const problem of error.problems) console.error(`config: ${problem}`);
      process.exit(2);
    }
    throw error;
  }
  const logger = createLogger(config.logLevel);
  let service;
  try {
    service = await startService(config, logger);
  } catch (error) {
    console.error(`startup: ${describeStartupError(error, config.host, config.port)}`);
    process.exit(1);
  }
  const listening = service.http ? service.http.url : `${service.operations!.url} (health and metrics only: no http role)`;
  console.error(`ads-agent-runs listening on ${listening} (roles: ${config.roles.join(', ')})`);
  // Written now, not only at a clean exit: a process that is killed still leaves the next start its cache.
  flushCompileCache();
  let stopping = false;
  const shutdown = (signal: string) => {
    if (stopping) {
      // An operator (or an orchestrator) insisting: do not make them wait again.
      logger.warn({ signal }, 'second signal while shutting down: exiting now');
      process.exit(1);
    }
    stopping = true;
    logger.info({ signal, grace_ms: config.shutdownGraceMs }, 'shutting down');
    // Each step of stop() bounds its own wait, but closing connections to a server that went
    // away can take long past the grace (NATS drain): SHUTDOWN_GRACE_MS bounds the whole.
    setTimeout(() => {
      logger.error({ grace_ms: config.shutdownGraceMs, overrun_ms: SHUTDOWN_OVERRUN_MS }, 'shutdown did not finish in time: exiting');
      process.exit(1);
    }, config.shutdownGraceMs + SHUTDOWN_OVERRUN_MS).unref();
    service
      .stop()
      .then(() => process.exit(0))
      .catch((error: unknown) => {
        logger.error({ err: error }, 'shutdown failed');
        process.exit(1);
      });
  };
  process.on('SIGTERM', () => shutdown('SIGTERM'));
  process.on('SIGINT', () => shutdown('SIGINT'));
}

/** One line a user can act on; the details of anything unexpected go to the debug log. */
function describeStartupError(error: unknown, host: string, port: number): string {
  if (error instanceof NatsUnreachableError || error instanceof PostgresUnreachableError || error instanceof EventStreamSetupError) return error.message;
  if (error instanceof SigningKeyError) {
    return `${error.message}; check EVENT_SIGNING_KEY_FILE and EVENT_SIGNING_RETIRED_PUBLIC_KEYS (docs/operations.md, "Event signing keys")`;
  }
  const code = (error as { code?: string }).code;
  if (code === 'EADDRINUSE') return `port ${port} on ${host} is already in use; stop what holds it or set PORT`;
  if (code === 'EACCES' && (error as { syscall?: string }).syscall === 'listen') return `not allowed to listen on ${host}:${port}; choose a port above 1024 with PORT`;
  if (code === 'ENOTFOUND' || code === 'EADDRNOTAVAIL' || code === 'EAI_AGAIN') {
    return `cannot listen on HOST ${host}: it is not an address of this machine (${code}); set HOST to one, e.g. 127.0.0.1, or 0.0.0.0 for every interface`;
  }
  return error instanceof Error ? error.message : String(error);
}

