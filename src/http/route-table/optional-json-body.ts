import type { Context } from 'koa';
import { readJsonBody } from '../json-body.ts';

/** For endpoints whose body is optional: no body (or an empty one) reads as `{}`. */
export async function readOptionalJsonBody(ctx: Context, limitBytes: number): Promise<unknown> {
  const length = ctx.get('content-length');
  const chunked = ctx.get('transfer-encoding') !== '';
  if (!chunked && (length === '' || length === '0')) return {};
  return readJsonBody(ctx, limitBytes);
}
