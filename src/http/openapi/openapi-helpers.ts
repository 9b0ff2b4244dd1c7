import type { JsonSchema } from '../route-table/route-definition.ts';

/** Small builders for OpenAPI fragments, shared by the component schemas and the route declarations. */

export const PROBLEM_MEDIA_TYPE = 'application/problem+json';
export const JSON_MEDIA_TYPE = 'application/json';

export const ref = (name: string) => ({ $ref: `#/components/schemas/${name}` }) as const;
export const responseRef = (name: string) => ({ $ref: `#/components/responses/${name}` }) as const;
export const headerRef = (name: string) => ({ $ref: `#/components/headers/${name}` }) as const;
export const parameterRef = (name: string) => ({ $ref: `#/components/parameters/${name}` }) as const;
export const json = (schema: JsonSchema) => ({ [JSON_MEDIA_TYPE]: { schema } });
export const problem = (schemaName = 'Problem') => ({ [PROBLEM_MEDIA_TYPE]: { schema: ref(schemaName) } });

export const uuid = { type: 'string', format: 'uuid' } as const;
export const dateTime = { type: 'string', format: 'date-time' } as const;
export const nullableDateTime = { type: ['string', 'null'], format: 'date-time' } as const;
export const requestIdHeader = { 'X-Request-Id': headerRef('XRequestId') } as const;
export const nullable = (schema: JsonSchema) => ({ oneOf: [{ type: 'null' }, schema] }) as const;

/** A closed object: every listed member required unless named in `optional`. */
export const closed = (properties: { readonly [name: string]: JsonSchema }, optional: readonly string[] = []) => ({
  type: 'object',
  additionalProperties: false,
  required: Object.keys(properties).filter((name) => !optional.includes(name)),
  properties,
});

/** Longest free text (approve note, reject reason, target reason, kill-switch reason). */
export const TEXT_MAX_LENGTH = 2000;
