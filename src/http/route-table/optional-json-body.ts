import type { Context } from 'koa';
import { readJsonBody } from '../json-body.ts';

/** For endpoints whose body is optional: no body, or an empty one (sent chunked too), reads as `{}`. */
export function readOptionalJsonBody(ctx: Context, limitBytes: number): Promise<unknown> {
  return readJsonBody(ctx, limitBytes, { optional: true });
}
