import type { InvalidParam } from '../errors/common-errors.ts';

/** Plain decimal digits only: `Number()` would also take `1e21`, `0x10`, ` 7 ` or `Infinity`. */
const DIGITS = /^[0-9]{1,16}$/;

/**
 * Reads an integer query parameter. Only plain digits within `min..max` pass (max is at
 * most Number.MAX_SAFE_INTEGER, so the value survives a bigint column and JSON); a repeated
 * parameter, `1e21`, `-1` or `1.5` each add one entry to `errors` (pointer `/<name>`).
 */
export function integerQueryParam(
  query: Readonly<Record<string, string | string[] | undefined>>,
  name: string,
  range: { readonly min: number; readonly max: number; readonly fallback: number },
  errors: InvalidParam[],
  message = `must be an integer from ${range.min} to ${range.max}`,
): number {
  const raw = query[name];
  if (raw === undefined) return range.fallback;
  const value = typeof raw === 'string' && DIGITS.test(raw) ? Number(raw) : Number.NaN;
  if (!Number.isSafeInteger(value) || value < range.min || value > range.max) {
    errors.push({ pointer: `/${name}`, message });
    return range.fallback;
  }
  return value;
}
