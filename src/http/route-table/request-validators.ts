import { Ajv, type ValidateFunction } from 'ajv';
import addFormats from 'ajv-formats';
import { ValidationError } from '../../errors/common-errors.ts';
import type { AppError } from '../../errors/app-error.ts';
import type { JsonSchema, MessageOverrides, QueryParameter } from './route-definition.ts';
import { teachingErrors, type RequestPart } from './teaching-messages.ts';

// verbose: each error carries its schema and data, which the teaching messages read.
// useDefaults: a body is handled (and fingerprinted for Idempotency-Key) with its schema's defaults filled in.
// strictRequired off: `oneOf: [{ required: ['a'] }, { required: ['b'] }]` is the plain way to say "exactly one of".
const ajv = new Ajv({ allErrors: true, verbose: true, strict: true, strictRequired: false, coerceTypes: false, useDefaults: true });
addFormats.default(ajv);

/** Plain decimal digits only: `Number()` would also take `1e21`, `0x10`, ` 7 `, `+7` or `Infinity`. */
const DIGITS = /^[0-9]{1,16}$/;

function throwing<T>(validate: ValidateFunction, part: RequestPart, overrides: MessageOverrides | undefined) {
  return (value: unknown): T => {
    if (validate(value)) return value as T;
    const errors = teachingErrors(validate.errors ?? [], part, overrides);
    // The detail joins the messages (docs/api.md): a client that shows only `detail` still learns what to send.
    throw new ValidationError(errors.map((e) => e.message).join('; '), errors);
  };
}

/**
 * Compiles a request-body schema once; the validator fills in defaults and throws a 422
 * `validation-error` whose `errors[]` name each field in plain words.
 *
 * @example
 * ```ts
 * const validate = bodyValidator<{ note?: string }>({ type: 'object', additionalProperties: false, properties: { note: { type: 'string' } } });
 * validate({ note: 5 }); // throws: errors [{ pointer: '/note', message: 'note: must be a string, not a number' }]
 * ```
 */
export function bodyValidator<T>(schema: JsonSchema, overrides?: MessageOverrides): (body: unknown) => T {
  return throwing<T>(ajv.compile(schema), 'body', overrides);
}

/** The JSON Schema of a route's query: its parameters, and nothing else. */
export function querySchema(parameters: Readonly<Record<string, QueryParameter>>): JsonSchema {
  return {
    type: 'object',
    additionalProperties: false,
    required: Object.entries(parameters).filter(([, p]) => p.required).map(([name]) => name),
    properties: Object.fromEntries(Object.entries(parameters).map(([name, p]) => [name, p.schema])),
  };
}

/**
 * Validates a query string (already parsed, values are strings or arrays of them) against
 * the route's parameters. An integer parameter is converted only from plain decimal digits,
 * so `0x10`, `1e3`, `+5` and ` 5` stay strings and fail as "not an integer"; a repeated
 * parameter stays an array and fails too. Unknown parameters fail by name.
 */
export function queryValidator<T>(parameters: Readonly<Record<string, QueryParameter>>, overrides?: MessageOverrides): (query: Readonly<Record<string, unknown>>) => T {
  const integers = Object.entries(parameters).filter(([, p]) => p.schema.type === 'integer').map(([name]) => name);
  const validate = throwing<T>(ajv.compile(querySchema(parameters)), 'query', overrides);
  return (query) => {
    const typed: Record<string, unknown> = { ...query };
    for (const name of integers) {
      const raw = typed[name];
      if (typeof raw === 'string' && DIGITS.test(raw)) typed[name] = Number(raw);
    }
    return validate(typed);
  };
}

/** A path parameter's check: a value its schema refuses names nothing, so it answers the route's 404. */
export function pathParameterValidator(schema: JsonSchema, notFound: (value: string) => AppError): (value: string) => string {
  const validate = ajv.compile(schema);
  return (value) => {
    if (!validate(value)) throw notFound(value);
    return value;
  };
}
