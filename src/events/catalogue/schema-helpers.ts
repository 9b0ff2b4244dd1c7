import type { SchemaObject } from 'ajv';

/** Shorthands that keep the catalogue's schemas readable; each returns plain JSON Schema. */
export const str = (extra: SchemaObject = {}): SchemaObject => ({ type: 'string', ...extra });
export const id = (): SchemaObject => ({ type: 'string', pattern: '^[A-Za-z0-9_-]{1,64}$' });
export const int = (minimum = 0): SchemaObject => ({ type: 'integer', minimum });
export const bool = (): SchemaObject => ({ type: 'boolean' });
export const nullable = (schema: SchemaObject): SchemaObject => ({ anyOf: [schema, { type: 'null' }] });
export const enumOf = (values: readonly string[]): SchemaObject => ({ type: 'string', enum: [...values] });

/** A closed object: every listed property required unless named in `optional`. */
export function object(properties: Record<string, SchemaObject>, optional: readonly string[] = []): SchemaObject {
  return {
    type: 'object',
    additionalProperties: false,
    required: Object.keys(properties).filter((key) => !optional.includes(key)),
    properties,
  };
}

/** The schema of one event type at one version, as published in docs/events.md. */
export interface EventDefinition {
  readonly type: string;
  readonly version: number;
  readonly aggregate: 'workspace' | 'key' | 'account' | 'run' | 'action' | 'quota';
  readonly description: string;
  readonly data: SchemaObject;
}
