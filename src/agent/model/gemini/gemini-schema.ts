import { SchemaType, type FunctionDeclaration, type FunctionDeclarationSchema, type Schema } from '@google/generative-ai';
import type { ToolDeclaration } from '../model-port.ts';

/**
 * JSON Schema (as our tools declare it, for Ajv) → Gemini's OpenAPI-3 subset.
 *
 * Gemini rejects the whole request on any keyword it does not know (`additionalProperties`,
 * `minimum`, `maxLength`, …), so everything outside the subset is dropped rather than passed
 * through: Ajv still validates the full schema when the call comes back, so nothing is lost
 * but a hint to the model. Constructs with no Gemini equivalent (real unions, arrays without
 * `items`) throw {@link GeminiSchemaError} instead of silently widening the contract.
 */
export class GeminiSchemaError extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'GeminiSchemaError';
  }
}

type JsonSchema = Record<string, unknown>;

/** The declaration Gemini gets for one of our tools. */
export function toFunctionDeclaration(tool: ToolDeclaration): FunctionDeclaration {
  const root = toGeminiSchema(tool.parameters as JsonSchema, `${tool.name}.parameters`);
  if (root.type !== SchemaType.OBJECT) throw new GeminiSchemaError(`${tool.name}.parameters: a tool's parameters must be an object schema`);
  // Gemini answers 400 "properties: should be non-empty for OBJECT type" for argument-less
  // tools, so such a tool is declared without parameters at all.
  if (Object.keys(root.properties).length === 0) return { name: tool.name, description: tool.description };
  const parameters: FunctionDeclarationSchema = { type: SchemaType.OBJECT, properties: root.properties };
  if (root.description !== undefined) parameters.description = root.description;
  if (root.required !== undefined) parameters.required = root.required;
  return { name: tool.name, description: tool.description, parameters };
}

/**
 * Converts one JSON Schema node (recursively).
 * @param path where this node sits, for error messages.
 * @throws GeminiSchemaError when the node cannot be expressed in Gemini's subset.
 */
export function toGeminiSchema(schema: JsonSchema, path = 'schema'): Schema {
  const { type, nullable } = resolveType(schema, path);
  if (type === undefined) {
    // `anyOf: [X, {type: 'null'}]` is how JSON Schema spells "optional X"; Gemini spells it `nullable`.
    const branch = nullableBranch(schema, path);
    return { ...toGeminiSchema(branch, path), ...common(schema), nullable: true };
  }
  const base = { ...common(schema), ...(nullable ? { nullable: true } : {}) };
  switch (type) {
    case 'string': {
      const values = Array.isArray(schema.enum) ? schema.enum.filter((v): v is string => typeof v === 'string') : [];
      if (values.length > 0) return { ...base, type: SchemaType.STRING, format: 'enum', enum: values };
      return schema.format === 'date-time' ? { ...base, type: SchemaType.STRING, format: 'date-time' } : { ...base, type: SchemaType.STRING };
    }
    case 'number':
      return schema.format === 'float' || schema.format === 'double' ? { ...base, type: SchemaType.NUMBER, format: schema.format } : { ...base, type: SchemaType.NUMBER };
    case 'integer':
      return schema.format === 'int32' || schema.format === 'int64' ? { ...base, type: SchemaType.INTEGER, format: schema.format } : { ...base, type: SchemaType.INTEGER };
    case 'boolean':
      return { ...base, type: SchemaType.BOOLEAN };
    case 'array': {
      if (!isSchema(schema.items)) throw new GeminiSchemaError(`${path}: an array needs a single 'items' schema`);
      return {
        ...base,
        type: SchemaType.ARRAY,
        items: toGeminiSchema(schema.items, `${path}.items`),
        ...(typeof schema.minItems === 'number' ? { minItems: schema.minItems } : {}),
        ...(typeof schema.maxItems === 'number' ? { maxItems: schema.maxItems } : {}),
      };
    }
    case 'object': {
      const source = isSchema(schema.properties) ? schema.properties : {};
      const properties: Record<string, Schema> = {};
      for (const [name, property] of Object.entries(source)) {
        if (!isSchema(property)) throw new GeminiSchemaError(`${path}.${name}: not a schema`);
        properties[name] = toGeminiSchema(property, `${path}.${name}`);
      }
      // Gemini rejects `required` entries that name no property.
      const required = Array.isArray(schema.required) ? schema.required.filter((n): n is string => typeof n === 'string' && n in properties) : [];
      return { ...base, type: SchemaType.OBJECT, properties, ...(required.length > 0 ? { required } : {}) };
    }
  }
}

type GeminiTypeName = 'string' | 'number' | 'integer' | 'boolean' | 'array' | 'object';
const TYPE_NAMES: ReadonlySet<string> = new Set<GeminiTypeName>(['string', 'number', 'integer', 'boolean', 'array', 'object']);

function resolveType(schema: JsonSchema, path: string): { type: GeminiTypeName | undefined; nullable: boolean } {
  let names: unknown[];
  if (typeof schema.type === 'string') names = [schema.type];
  else if (Array.isArray(schema.type)) names = schema.type;
  else {
    // Untyped nodes: infer from the keywords that only make sense for one type.
    if (isSchema(schema.properties)) return { type: 'object', nullable: schema.nullable === true };
    if (schema.items !== undefined) return { type: 'array', nullable: schema.nullable === true };
    if (Array.isArray(schema.enum)) return { type: 'string', nullable: schema.nullable === true };
    if (Array.isArray(schema.anyOf) || Array.isArray(schema.oneOf)) return { type: undefined, nullable: true };
    throw new GeminiSchemaError(`${path}: no 'type'`);
  }
  const nullable = names.includes('null') || schema.nullable === true;
  const rest = names.filter((n) => n !== 'null');
  const [only] = rest;
  if (rest.length !== 1 || typeof only !== 'string' || !TYPE_NAMES.has(only)) {
    throw new GeminiSchemaError(`${path}: type ${JSON.stringify(schema.type)} has no Gemini equivalent`);
  }
  return { type: only as GeminiTypeName, nullable };
}

function nullableBranch(schema: JsonSchema, path: string): JsonSchema {
  const branches = (Array.isArray(schema.anyOf) ? schema.anyOf : schema.oneOf) as unknown[];
  const nonNull = branches.filter((b) => !(isSchema(b) && b.type === 'null'));
  const [only] = nonNull;
  if (nonNull.length !== 1 || nonNull.length === branches.length || !isSchema(only)) {
    throw new GeminiSchemaError(`${path}: anyOf/oneOf is only supported as "X or null"`);
  }
  return only;
}

function common(schema: JsonSchema): { description?: string } {
  return typeof schema.description === 'string' ? { description: schema.description } : {};
}

function isSchema(value: unknown): value is JsonSchema {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}
