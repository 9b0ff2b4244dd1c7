import type { ErrorObject } from 'ajv';
import type { InvalidParam } from '../../errors/common-errors.ts';
import type { JsonSchema, MessageOverrides } from './route-definition.ts';

/** Where the violations were found: body members are "fields", query members "query parameters". */
export type RequestPart = 'body' | 'query';

/** The pointer a violation is about: a missing or unknown member is named by its own pointer, not its parent's. */
function pointerOf(error: ErrorObject): string {
  if (error.keyword === 'required') return `${error.instancePath}/${String(error.params.missingProperty)}`;
  if (error.keyword === 'additionalProperties') return `${error.instancePath}/${String(error.params.additionalProperty)}`;
  return error.instancePath || '/';
}

function fieldName(pointer: string, part: RequestPart): string {
  if (pointer === '/') return part === 'body' ? 'the body' : 'the query';
  return pointer.slice(1).split('/').map((token) => token.replaceAll('~1', '/').replaceAll('~0', '~')).join('.');
}

const TYPE_WORDS: Readonly<Record<string, string>> = {
  string: 'a string',
  number: 'a number',
  integer: 'an integer',
  boolean: 'true or false',
  object: 'a JSON object',
  array: 'a JSON array',
  null: 'null',
};

function typeOf(value: unknown): string {
  if (value === null) return 'null';
  if (Array.isArray(value)) return 'an array';
  if (typeof value === 'object') return 'an object';
  if (typeof value === 'string') return 'a string';
  return typeof value === 'number' ? 'a number' : typeof value === 'boolean' ? 'a boolean' : typeof value;
}

function propertyNames(schema: unknown): string[] {
  const properties = (schema as { properties?: Record<string, unknown> } | undefined)?.properties;
  return properties ? Object.keys(properties) : [];
}

function list(names: readonly unknown[]): string {
  const words = names.map((name) => JSON.stringify(name).replace(/^"(.*)"$/, '$1'));
  return words.length <= 1 ? (words[0] ?? '') : `${words.slice(0, -1).join(', ')} or ${words.at(-1)}`;
}

/** Well-known patterns in words; any other pattern is quoted. */
const PATTERN_WORDS: Readonly<Record<string, string>> = {
  '\\S': 'must contain at least one non-space character',
  '^[0-9]+$': 'must be plain decimal digits',
};

/**
 * One ajv violation as a sentence a client can act on: what was wrong, and what to send
 * instead. Needs ajv's `verbose` (schema, parentSchema and data on each error).
 */
function sentence(error: ErrorObject, part: RequestPart): string {
  const params = error.params as Record<string, unknown>;
  const parent = error.parentSchema as JsonSchema | undefined;
  switch (error.keyword) {
    case 'required': {
      const wanted = (parent?.properties as Record<string, JsonSchema> | undefined)?.[String(params.missingProperty)];
      const type = typeof wanted?.type === 'string' ? TYPE_WORDS[wanted.type] : undefined;
      return `is required${type ? `; send ${type}` : ''}`;
    }
    case 'additionalProperties': {
      const known = propertyNames(parent);
      const what = part === 'body' ? 'a field of this body' : 'a query parameter of this endpoint';
      return known.length === 0 ? `is not ${what}; send none` : `is not ${what}; it takes ${list(known)}`;
    }
    case 'type': {
      const wanted = Array.isArray(params.type) ? params.type : String(params.type).split(',');
      if (part === 'query' && wanted.includes('integer')) return integerRange(parent);
      // JSON.parse reads a number past ±1.8e308 (1e400) as Infinity, which no number type takes.
      if (typeof error.data === 'number' && !Number.isFinite(error.data)) return `must be ${list(wanted.map((t) => TYPE_WORDS[t] ?? t)).replaceAll('"', '')}, not a number too large to represent${rangeHint(parent)}`;
      return `must be ${list(wanted.map((t) => TYPE_WORDS[t] ?? t)).replaceAll('"', '')}, not ${typeOf(error.data)}`;
    }
    case 'minLength':
      return params.limit === 1 ? 'must not be empty' : `must be at least ${String(params.limit)} characters long`;
    case 'maxLength':
      return `must be at most ${String(params.limit)} characters long${typeof error.data === 'string' ? ` (it has ${error.data.length})` : ''}`;
    case 'pattern':
      return PATTERN_WORDS[String(params.pattern)] ?? `must match the pattern ${String(params.pattern)}`;
    case 'enum':
      return `must be one of ${list(params.allowedValues as unknown[])}`;
    case 'const':
      return `must be ${JSON.stringify(params.allowedValue)}`;
    case 'minimum':
    case 'maximum':
      return part === 'query' && parent?.type === 'integer' ? integerRange(parent) : `must be ${error.keyword === 'minimum' ? 'at least' : 'at most'} ${String(params.limit)}`;
    case 'exclusiveMinimum':
      return `must be greater than ${String(params.limit)}`;
    case 'exclusiveMaximum':
      return `must be less than ${String(params.limit)}`;
    case 'format':
      return params.format === 'uuid' ? 'must be a UUID' : `must be a valid ${String(params.format)}`;
    case 'oneOf':
      return `must take exactly one of the allowed shapes${parent ? `: ${list((parent.oneOf as JsonSchema[]).flatMap((s) => (s.required as string[] | undefined) ?? []))}` : ''}`;
    default:
      return error.message ?? 'is invalid';
  }
}

/** '; send one above 0 and at most 100' (the bounds the schema sets), or '' when it sets none. */
function rangeHint(schema: JsonSchema | undefined): string {
  const bounds = [
    typeof schema?.minimum === 'number' ? `at least ${schema.minimum}` : typeof schema?.exclusiveMinimum === 'number' ? `above ${schema.exclusiveMinimum}` : null,
    typeof schema?.maximum === 'number' ? `at most ${schema.maximum}` : typeof schema?.exclusiveMaximum === 'number' ? `below ${schema.exclusiveMaximum}` : null,
  ].filter((bound) => bound !== null);
  return bounds.length === 0 ? '' : `; send one ${bounds.join(' and ')}`;
}

function integerRange(schema: JsonSchema | undefined): string {
  const min = schema?.minimum;
  const max = schema?.maximum;
  return typeof min === 'number' && typeof max === 'number'
    ? `must be an integer from ${min} to ${max}, in plain decimal digits`
    : 'must be an integer in plain decimal digits';
}

/**
 * Turns ajv's violations into `errors[]` entries: the JSON pointer as the machine field and
 * a plain sentence ("brief: must contain at least one non-space character") as the message,
 * from `overrides` where the schema's author wrote one. Violations inside the branches of a
 * failed `oneOf`/`anyOf` are left out: the branch's own complaint ("target_cpa is required")
 * is not what the client should do; the `oneOf`'s sentence is. One entry per pointer.
 */
export function teachingErrors(errors: readonly ErrorObject[], part: RequestPart, overrides: MessageOverrides = {}): InvalidParam[] {
  const failedAlternatives = errors
    .filter((error) => error.keyword === 'oneOf' || error.keyword === 'anyOf')
    .map((error) => `${error.schemaPath}/`);
  const taught: InvalidParam[] = [];
  const seen = new Set<string>();
  for (const error of errors) {
    if (failedAlternatives.some((prefix) => error.schemaPath.startsWith(prefix))) continue;
    if (error.keyword === 'if') continue;
    const pointer = pointerOf(error);
    const message = `${fieldName(pointer, part)}: ${overrides[pointer]?.[error.keyword] ?? sentence(error, part)}`;
    const key = `${pointer} ${message}`;
    if (seen.has(key)) continue;
    seen.add(key);
    taught.push({ pointer, message });
  }
  return taught;
}
