import { Ajv, type SchemaObject, type ValidateFunction } from 'ajv';
import addFormats from 'ajv-formats';
import { ValidationError } from '../errors/common-errors.ts';

// strictRequired off: `oneOf: [{ required: ['a'] }, { required: ['b'] }]` is the plain way to say "exactly one of".
const ajv = new Ajv({ allErrors: true, strict: true, strictRequired: false, coerceTypes: false, useDefaults: false });
addFormats.default(ajv);

/**
 * Compiles a request-body schema once and returns a typed validator that throws a 422
 * problem listing every violation with its JSON pointer.
 *
 * @example
 * ```ts
 * const validateCreateRun = bodyValidator<CreateRunBody>(createRunSchema);
 * const body = validateCreateRun(await readJsonBody(ctx, limit));
 * ```
 */
export function bodyValidator<T>(schema: SchemaObject): (body: unknown) => T {
  const validate: ValidateFunction = ajv.compile(schema);
  return (body: unknown): T => {
    if (validate(body)) return body as T;
    const errors = (validate.errors ?? []).map((error) => {
      const pointer =
        error.keyword === 'required'
          ? `${error.instancePath}/${String(error.params.missingProperty)}`
          : error.keyword === 'additionalProperties'
            ? `${error.instancePath}/${String(error.params.additionalProperty)}`
            : error.instancePath || '/';
      const message =
        error.keyword === 'required'
          ? 'is required'
          : error.keyword === 'additionalProperties'
            ? 'is not a known field'
            : (error.message ?? 'is invalid');
      return { pointer, message };
    });
    throw new ValidationError(errors.map((e) => `${e.pointer} ${e.message}`).join('; '), errors);
  };
}
