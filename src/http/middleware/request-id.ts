import type { Context, Middleware } from 'koa';
import { fastUuidV7 } from '../fast-uuid-v7.ts';

export const REQUEST_ID_HEADER = 'X-Request-Id';

/** Restrictive so a caller-chosen id can be logged and echoed without escaping or header injection. */
const SAFE_REQUEST_ID = /^[A-Za-z0-9._-]{1,128}$/;

/**
 * Gives every request an id: the caller's `X-Request-Id` when it is safe (so traces join
 * up across services), otherwise a fresh UUIDv7. Sets it on the response and in
 * `ctx.state.requestId`.
 */
export function requestId(): Middleware {
  return async (ctx, next) => {
    const id = requestIdFor(ctx.get(REQUEST_ID_HEADER));
    ctx.state.requestId = id;
    ctx.set(REQUEST_ID_HEADER, id);
    await next();
  };
}

/** The id a request with this `X-Request-Id` (empty when absent) is known by. */
export function requestIdFor(incoming: string): string {
  return SAFE_REQUEST_ID.test(incoming) ? incoming : fastUuidV7();
}

/** The id `requestId()` assigned; a fresh one if that middleware did not run (e.g. in a unit test). */
export function requestIdOf(ctx: Context): string {
  const id: unknown = ctx.state.requestId;
  if (typeof id === 'string') return id;
  const fresh = fastUuidV7();
  ctx.state.requestId = fresh;
  return fresh;
}
