import type { Context } from 'koa';
import getRawBody from 'raw-body';
import { MalformedJsonError, PayloadTooLargeError, UnsupportedMediaTypeError } from './problems/http-errors.ts';
import { assertCleanRequestText } from './hostile-text-guard.ts';
import { jsonNestingDepth, MAX_JSON_DEPTH } from '../text/json-depth.ts';
import { ValidationError } from '../errors/common-errors.ts';
import { sanitizeText } from '../text/hostile-text.ts';
import { clipText } from '../text/clip-text.ts';

const JSON_TYPES = ['application/json', 'application/*+json'];

/** UTF-8 that throws on any ill-formed sequence; a leading BOM is dropped, as RFC 8259 allows. */
const STRICT_UTF8 = new TextDecoder('utf-8', { fatal: true });

/**
 * Reads and parses a JSON request body of at most `limitBytes`. Handlers call it
 * explicitly, so routes without a body never buffer one. With `optional`, a body that is
 * absent or empty (even sent chunked) reads as `{}`.
 *
 * @throws MalformedJsonError (400) for a missing, empty or unparsable body, or one that is not valid UTF-8.
 * @throws UnsupportedMediaTypeError (415) unless Content-Type is JSON in UTF-8 and the body has
 *   no content coding (gzip…) and no transfer coding but `chunked`.
 * @throws PayloadTooLargeError (413) when the body exceeds `limitBytes`.
 * @throws ValidationError (422) when a string or key holds U+0000, another C0 control
 *   (tab, newline and carriage return excepted) or an unpaired surrogate, which
 *   `JSON.parse` happily makes out of an escape such as `"\ud800"`; or when arrays and
 *   objects nest deeper than {@link MAX_JSON_DEPTH}.
 */
export async function readJsonBody(ctx: Context, limitBytes: number, options: { readonly optional?: boolean } = {}): Promise<unknown> {
  if (!hasBody(ctx)) {
    if (options.optional) return {};
    throw new MalformedJsonError('body is empty');
  }
  // An optional body may come chunked and empty, with any Content-Type or none: its type is judged once it has bytes.
  if (!options.optional) assertJsonMediaType(ctx);
  const encoding = ctx.get('Content-Encoding').trim();
  if (encoding !== '' && encoding.toLowerCase() !== 'identity') {
    closeAfterResponse(ctx);
    throw UnsupportedMediaTypeError.forContentEncoding(clipText(encoding, 100));
  }
  // Node's parser undoes `chunked` only: the bytes of `gzip, chunked` would still be gzip.
  const transfer = ctx.get('Transfer-Encoding').trim();
  if (transfer !== '' && transfer.toLowerCase() !== 'chunked') {
    closeAfterResponse(ctx);
    throw UnsupportedMediaTypeError.forTransferEncoding(clipText(transfer, 100));
  }
  const declaredLength = ctx.request.length;
  if (declaredLength !== undefined && declaredLength > limitBytes) {
    closeAfterResponse(ctx);
    throw new PayloadTooLargeError(limitBytes);
  }

  let bytes: Buffer;
  try {
    bytes = await getRawBody(ctx.req, { limit: limitBytes, length: declaredLength });
  } catch (error) {
    closeAfterResponse(ctx);
    if (rawBodyErrorType(error) === 'entity.too.large') throw new PayloadTooLargeError(limitBytes);
    throw error; // other raw-body errors are http-errors (400 aborted/size mismatch…) the error handler maps.
  }
  let text: string;
  try {
    // Refused, not repaired: a decoder that replaced bad bytes with U+FFFD would record text the client never sent.
    text = STRICT_UTF8.decode(bytes);
  } catch {
    throw new MalformedJsonError('the body is not valid UTF-8 (a byte sequence that is not UTF-8, such as an encoded lone surrogate or an overlong form)');
  }
  if (text.trim() === '') {
    if (options.optional) return {};
    throw new MalformedJsonError('body is empty');
  }
  if (options.optional) assertJsonMediaType(ctx);
  let parsed: unknown;
  try {
    parsed = JSON.parse(text) as unknown;
  } catch (error) {
    // V8's message quotes the start of the body: the client's own bytes, which may be anything
    // (a gzip stream's control characters, say), so they are made printable before they are echoed.
    throw new MalformedJsonError(error instanceof Error ? sanitizeText(clipText(error.message, 300)) : 'invalid JSON');
  }
  // Checked on parsed JSON only, so a malformed body keeps its parser message.
  if (jsonNestingDepth(text) > MAX_JSON_DEPTH) {
    const message = `nests arrays and objects deeper than ${MAX_JSON_DEPTH} levels`;
    throw new ValidationError(`/ ${message}`, [{ pointer: '/', message }]);
  }
  assertCleanRequestText(parsed);
  return parsed;
}

/** RFC 8259 makes UTF-8 the only interoperable JSON encoding, so other charsets are refused. */
function assertJsonMediaType(ctx: Context): void {
  if (!ctx.is(JSON_TYPES) || !/^(utf-?8)?$/i.test(ctx.request.charset)) {
    throw UnsupportedMediaTypeError.forContentType(ctx.get('Content-Type') || undefined);
  }
}

function hasBody(ctx: Context): boolean {
  if (ctx.get('Transfer-Encoding') !== '') return true;
  const length = ctx.request.length;
  return length !== undefined && length > 0;
}

/**
 * The unread rest of a refused body is still on the socket; closing the connection after
 * the response keeps it from being parsed as the next request or drained at our cost.
 */
function closeAfterResponse(ctx: Context): void {
  ctx.res.shouldKeepAlive = false;
}

function rawBodyErrorType(error: unknown): unknown {
  return typeof error === 'object' && error !== null ? (error as { type?: unknown }).type : undefined;
}
