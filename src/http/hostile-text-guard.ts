import type { Middleware } from 'koa';
import { ValidationError, type InvalidParam } from '../errors/common-errors.ts';
import { describeHostileCharacter, findHostileText } from '../text/hostile-text.ts';

/**
 * Refuses a request value holding characters no event may carry (src/text/hostile-text.ts)
 * with a 422 naming each JSON pointer, before any of it reaches a command, a log line or
 * the event log.
 *
 * The detail lists each pointer with what it holds, as `errors[]` does.
 * @throws ValidationError
 */
export function assertCleanRequestText(value: unknown): void {
  const findings = findHostileText(value);
  if (findings.length === 0) return;
  const errors: InvalidParam[] = findings.map((finding) => ({
    pointer: finding.pointer,
    message: `${finding.inKey ? 'key ' : ''}${describeHostileCharacter(finding.character)}`,
  }));
  throw new ValidationError(errors.map((e) => `${e.pointer} ${e.message}`).join('; '), errors);
}

/**
 * Checks every query parameter (names too) of every API request. Pointers read `/<name>`,
 * as the routes' own query errors do; a repeated parameter gets `/<name>/<index>`. Health,
 * metrics and the OpenAPI document read no query, so they are left alone.
 */
export function rejectHostileQuery(): Middleware {
  return async (ctx, next) => {
    if (ctx.querystring !== '' && ctx.path.startsWith('/api/')) assertCleanRequestText(ctx.query);
    await next();
  };
}
