import {
  ClosedConnectionError,
  ConnectionError,
  DrainingConnectionError,
  NoRespondersError,
  RequestError,
  TimeoutError,
} from '@nats-io/nats-core';
import pg from 'pg';
import { EventStoreError, EventStoreErrorCode } from '../event-store/errors.ts';
import { ServiceUnavailableError } from './common-errors.ts';

/** Node's socket errors: the peer is not there (yet, or any more). */
const SOCKET_UNAVAILABLE_CODES = new Set(['ECONNREFUSED', 'ECONNRESET', 'ETIMEDOUT', 'EPIPE', 'EHOSTUNREACH', 'ENOTFOUND', 'EAI_AGAIN']);

/** SQLSTATEs of a server that is shutting down, starting up or lost the connection. */
const PG_UNAVAILABLE_SQLSTATES = new Set(['57P01', '57P02', '57P03', '08000', '08001', '08003', '08004', '08006']);

/**
 * undefined_table: the read models' tables are created by the first projector to run on a
 * database (projections/runtime), so an HTTP-only process started before any projector, or
 * reading during a rebuild's swap, finds them missing. That is a deployment still coming up,
 * not a fault of the request.
 */
const PG_READ_MODEL_MISSING_SQLSTATE = '42P01';

/** nats.js's own classes for a server that is not reachable or did not answer in time. */
const NATS_UNAVAILABLE_CLASSES = [
  ConnectionError,
  ClosedConnectionError,
  DrainingConnectionError,
  TimeoutError,
  NoRespondersError,
  RequestError,
] as const;

/**
 * A fault of a backing service (Postgres or NATS unreachable, restarting, timing out) is
 * not a bug of ours and not a client error: the caller should retry. Classified by the
 * drivers' typed classes and codes (never by message text), anywhere in the `cause` chain;
 * null for everything else.
 *
 * @example
 * ```ts
 * const unavailable = unavailableError(error);
 * if (unavailable) throw unavailable; // kind 'unavailable', retryAfterSeconds 5
 * ```
 */
export function unavailableError(error: unknown): ServiceUnavailableError | null {
  for (let current = error, depth = 0; current instanceof Error && depth < 5; current = current.cause, depth += 1) {
    const found = classify(current);
    if (found) return found;
  }
  return null;
}

function classify(error: Error): ServiceUnavailableError | null {
  if (error instanceof EventStoreError && (error.code === EventStoreErrorCode.AppendFailed || error.code === EventStoreErrorCode.Unavailable)) {
    return new ServiceUnavailableError('The event log is not reachable right now; retry shortly.');
  }
  if (NATS_UNAVAILABLE_CLASSES.some((errorClass) => error instanceof errorClass)) {
    return new ServiceUnavailableError('The event log is not reachable right now; retry shortly.');
  }
  if (error instanceof pg.DatabaseError && error.code !== undefined && PG_UNAVAILABLE_SQLSTATES.has(error.code)) {
    return new ServiceUnavailableError('The database is not reachable right now; retry shortly.');
  }
  if (error instanceof pg.DatabaseError && error.code === PG_READ_MODEL_MISSING_SQLSTATE) {
    return new ServiceUnavailableError('The read models are not built yet (no projector has run on this database); retry shortly.');
  }
  const { code } = error as { code?: unknown };
  if (typeof code === 'string' && SOCKET_UNAVAILABLE_CODES.has(code)) {
    return new ServiceUnavailableError('A backing service is not reachable right now; retry shortly.');
  }
  return null;
}
