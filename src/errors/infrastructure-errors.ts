import { EventStoreError, EventStoreErrorCode } from '../event-store/errors.ts';
import { ServiceUnavailableError } from './common-errors.ts';

const PG_UNAVAILABLE_CODES = new Set([
  'ECONNREFUSED',
  'ECONNRESET',
  'ETIMEDOUT',
  'EPIPE',
  '57P01', // admin_shutdown
  '57P02', // crash_shutdown
  '57P03', // cannot_connect_now
  '08000', // connection_exception
  '08001',
  '08003',
  '08006',
]);

const UNAVAILABLE_MESSAGES = [
  /Connection terminated/i,
  /timeout exceeded when trying to connect/i,
  /Client has encountered a connection error/i,
  /closed connection/i,
  /no responders/i,
  /TIMEOUT/,
  /disconnect/i,
];

/**
 * A fault of a backing service (Postgres or NATS unreachable, restarting, timing out) is
 * not a bug of ours and not a client error: the client should retry. Anything that looks
 * like one maps to 503 with Retry-After; null for everything else.
 */
export function unavailableProblem(error: unknown): ServiceUnavailableError | null {
  if (error instanceof EventStoreError && error.code === EventStoreErrorCode.AppendFailed) {
    return new ServiceUnavailableError('The event log is not reachable right now; retry shortly.');
  }
  if (typeof error !== 'object' || error === null) return null;
  const { code, message, name } = error as { code?: unknown; message?: unknown; name?: unknown };
  if (typeof code === 'string' && PG_UNAVAILABLE_CODES.has(code)) {
    return new ServiceUnavailableError('The database is not reachable right now; retry shortly.');
  }
  const text = `${typeof name === 'string' ? name : ''}: ${typeof message === 'string' ? message : ''}`;
  if (UNAVAILABLE_MESSAGES.some((pattern) => pattern.test(text)) || /ConnectionError|TimeoutError|ClosedConnectionError|NoRespondersError/.test(text)) {
    return new ServiceUnavailableError('A backing service is not reachable right now; retry shortly.');
  }
  return null;
}
