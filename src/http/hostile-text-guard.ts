import type { Middleware } from 'koa';
import { ValidationError, type InvalidParam } from '../errors/common-errors.ts';
import { describeHostileCharacter, findHostileText } from '../text/hostile-text.ts';

/**
 * Refuses a request value holding characters no event may carry (src/text/hostile-text.ts)
 * with a 422 naming each JSON pointer, before any of it reaches a command, a log line or
 * the event log.
 *
 * @param prefix put before every pointer, e.g. `/query` for query parameters.
 * @throws ValidationError
 */
export function assertCleanRequestText(value: unknown, prefix: string): void {
  const findings = findHostileText(value);
  if (findings.length === 0) return;
  const errors: InvalidParam[] = findings.map((finding) => ({
    pointer: `${prefix}${finding.pointer === '/' && prefix !== '' ? '' : finding.pointer}`,
    message: `${finding.inKey ? 'key ' : ''}${describeHostileCharacter(finding.character)}`,
  }));
  throw new ValidationError(errors.map((e) => `${e.pointer} ${e.message}`).join('; '), errors);
}

/**
 * Checks every query parameter (names too) of every request. Pointers read
 * `/query/<name>`; a repeated parameter gets `/query/<name>/<index>`.
 */
export function rejectHostileQuery(): Middleware {
  return async (ctx, next) => {
    if (ctx.querystring !== '') assertCleanRequestText(ctx.query, '/query');
    await next();
  };
}
