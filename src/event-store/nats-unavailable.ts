import { JetStreamApiError } from '@nats-io/jetstream';
import { ClosedConnectionError, ConnectionError, DrainingConnectionError, NoRespondersError, PermissionViolationError, RequestError, TimeoutError } from '@nats-io/nats-core';

/** HTTP-like status JetStream answers while no server can take the request (e.g. during a leader election). */
const JETSTREAM_UNAVAILABLE_STATUS = 503;

/**
 * Whether a nats.js failure means "the stream cannot be reached right now" rather than a
 * refusal: by nats.js's typed classes and JetStream's 503, anywhere in the cause chain, unless
 * a permission violation is in it.
 */
export function isNatsUnavailable(error: unknown): boolean {
  // A refusal, whatever wraps it (nats.js reports a refused request as a RequestError): waiting does not change it.
  if (isPermissionViolation(error)) return false;
  for (let current = error, depth = 0; current instanceof Error && depth < 5; current = current.cause, depth += 1) {
    if (
      current instanceof NoRespondersError ||
      current instanceof RequestError ||
      current instanceof TimeoutError ||
      current instanceof ConnectionError ||
      current instanceof ClosedConnectionError ||
      current instanceof DrainingConnectionError
    ) {
      return true;
    }
    if (current instanceof JetStreamApiError && current.status === JETSTREAM_UNAVAILABLE_STATUS) return true;
  }
  return false;
}

/** Whether the server refused the request for the user's permissions, anywhere in the cause chain. */
export function isPermissionViolation(error: unknown): boolean {
  for (let current = error, depth = 0; current instanceof Error && depth < 5; current = current.cause, depth += 1) {
    if (current instanceof PermissionViolationError) return true;
  }
  return false;
}
