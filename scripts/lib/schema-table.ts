import type { SchemaObject } from 'ajv';

/** One field of an object schema, nested fields flattened to dotted paths (`usage.steps`, `items[].id`). */
export interface FieldRow {
  readonly path: string;
  readonly type: string;
  readonly required: boolean;
  readonly constraints: readonly string[];
  readonly description: string | undefined;
}

/** Every field of an object schema, depth first, in declaration order. */
export function fieldRows(schema: SchemaObject, prefix = ''): FieldRow[] {
  const rows: FieldRow[] = [];
  const properties = (schema.properties ?? {}) as Record<string, SchemaObject>;
  const required = new Set<string>((schema.required ?? []) as string[]);
  for (const [name, property] of Object.entries(properties)) {
    const path = `${prefix}${name}`;
    rows.push({
      path,
      type: typeOf(property),
      required: required.has(name),
      constraints: constraintsOf(property),
      description: typeof property.description === 'string' ? property.description : undefined,
    });
    for (const nested of nestedObjects(property)) rows.push(...fieldRows(nested.schema, `${path}${nested.suffix}.`));
  }
  return rows;
}

/** Object schemas with listed properties inside a property (itself, a branch of anyOf, array items). */
function nestedObjects(schema: SchemaObject): { schema: SchemaObject; suffix: string }[] {
  if (schema.properties && Object.keys(schema.properties).length > 0) return [{ schema, suffix: '' }];
  if (Array.isArray(schema.anyOf)) return (schema.anyOf as SchemaObject[]).flatMap(nestedObjects);
  if (schema.type === 'array' && schema.items && typeof schema.items === 'object') {
    return nestedObjects(schema.items as SchemaObject).map((n) => ({ ...n, suffix: `[]${n.suffix}` }));
  }
  return [];
}

export function typeOf(schema: SchemaObject): string {
  if (Array.isArray(schema.anyOf)) return (schema.anyOf as SchemaObject[]).map(typeOf).join(' | ');
  if ('const' in schema && schema.type === undefined) return JSON.stringify(schema.const);
  const type = Array.isArray(schema.type) ? (schema.type as string[]).join(' | ') : (schema.type as string | undefined);
  if (type === 'array') return schema.items ? `array of ${typeOf(schema.items as SchemaObject)}` : 'array';
  if (type === undefined && Array.isArray(schema.enum)) return 'string';
  return type ?? 'any';
}

const code = (text: string) => `\`${text}\``;

/** Human-readable constraints: lengths, bounds, patterns, enums, closed objects. */
export function constraintsOf(schema: SchemaObject): string[] {
  if (Array.isArray(schema.anyOf)) {
    return (schema.anyOf as SchemaObject[]).filter((branch) => branch.type !== 'null').flatMap(constraintsOf);
  }
  const out: string[] = [];
  if ('const' in schema) out.push(`always ${code(JSON.stringify(schema.const))}`);
  if (Array.isArray(schema.enum)) out.push(`one of ${(schema.enum as unknown[]).map((v) => code(String(v))).join(', ')}`);
  if (typeof schema.format === 'string') out.push(`format ${code(schema.format)}`);
  const minLength = schema.minLength as number | undefined;
  const maxLength = schema.maxLength as number | undefined;
  if (minLength !== undefined && maxLength !== undefined) out.push(`length ${minLength}–${maxLength}`);
  else if (minLength !== undefined) out.push(`length ≥ ${minLength}`);
  else if (maxLength !== undefined) out.push(`length ≤ ${maxLength}`);
  if (typeof schema.pattern === 'string') out.push(`pattern ${code(schema.pattern)}`);
  if (typeof schema.minimum === 'number') out.push(`≥ ${schema.minimum}`);
  if (typeof schema.maximum === 'number') out.push(`≤ ${schema.maximum}`);
  if (typeof schema.exclusiveMinimum === 'number') out.push(`> ${schema.exclusiveMinimum}`);
  if (typeof schema.exclusiveMaximum === 'number') out.push(`< ${schema.exclusiveMaximum}`);
  if (schema.type === 'object') {
    const hasProperties = schema.properties && Object.keys(schema.properties).length > 0;
    if (!hasProperties && schema.additionalProperties === false) out.push('always `{}`');
    else if (!hasProperties) out.push('any JSON object');
    else if (schema.additionalProperties === false) out.push('no other fields');
  }
  if (schema.type === 'array' && schema.items && typeof schema.items === 'object') {
    const items = constraintsOf(schema.items as SchemaObject);
    if (items.length > 0) out.push(`items: ${items.join(', ')}`);
  }
  return out;
}
