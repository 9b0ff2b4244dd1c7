import Ajv2020 from 'ajv/dist/2020.js';
import addFormats from 'ajv-formats';
import { expect } from 'chai';
import { openApiDocument, type OpenApiDocument, type OpenApiOperation } from '../../../src/http/openapi/openapi-document.ts';

/**
 * Checks live responses against the OpenAPI document: the status must be documented for
 * the operation, required headers present and well-formed, the media type documented and
 * the body valid under the response schema (compiled with ajv in JSON Schema 2020-12 mode,
 * component `$ref`s resolved). Every API test runs its responses through it, so the
 * document cannot drift from what the service does.
 */

type Json = unknown;
type Ajv = InstanceType<typeof Ajv2020.default>;
type Validate = ReturnType<Ajv['compile']>;

const SCHEMA_BASE = 'https://openapi.test/components/schemas/';
const COMPONENT_SCHEMA_REF = '#/components/schemas/';

interface ResponseObject {
  readonly description: string;
  readonly headers?: Record<string, HeaderObject | RefObject>;
  readonly content?: Record<string, { schema: Json }>;
}
interface HeaderObject {
  readonly required?: boolean;
  readonly schema: Json;
}
interface RefObject {
  readonly $ref: string;
}

function isRef(value: unknown): value is RefObject {
  return typeof value === 'object' && value !== null && typeof (value as RefObject).$ref === 'string';
}

/** Rewrites `#/components/schemas/X` to the absolute id under which X is registered with ajv. */
function rewriteSchemaRefs(value: Json): Json {
  if (Array.isArray(value)) return value.map(rewriteSchemaRefs);
  if (typeof value !== 'object' || value === null) return value;
  return Object.fromEntries(
    Object.entries(value).map(([key, inner]) => [
      key,
      key === '$ref' && typeof inner === 'string' && inner.startsWith(COMPONENT_SCHEMA_REF)
        ? SCHEMA_BASE + inner.slice(COMPONENT_SCHEMA_REF.length)
        : rewriteSchemaRefs(inner),
    ]),
  );
}

/** Resolves a local JSON pointer (`#/a/b`) in the document; undefined when it points nowhere. */
export function resolvePointer(document: Json, ref: string): Json {
  if (!ref.startsWith('#/')) return undefined;
  let node: Json = document;
  for (const raw of ref.slice(2).split('/')) {
    const token = decodeURIComponent(raw).replaceAll('~1', '/').replaceAll('~0', '~');
    if (typeof node !== 'object' || node === null || !(token in node)) return undefined;
    node = (node as Record<string, Json>)[token];
  }
  return node;
}

/** Every `$ref` in the document that does not resolve inside it. */
export function unresolvedRefs(document: Json): string[] {
  const missing: string[] = [];
  const walk = (value: Json): void => {
    if (Array.isArray(value)) return value.forEach(walk);
    if (typeof value !== 'object' || value === null) return;
    for (const [key, inner] of Object.entries(value)) {
      if (key === '$ref' && typeof inner === 'string' && resolvePointer(document, inner) === undefined) missing.push(inner);
      else walk(inner);
    }
  };
  walk(document);
  return missing;
}

export function createAjv(): Ajv {
  const ajv = new Ajv2020.default({ allErrors: true, strict: true, allowUnionTypes: true, strictRequired: false, validateFormats: true });
  addFormats.default(ajv);
  return ajv;
}

export class OpenApiResponseValidator {
  private readonly ajv: Ajv;
  private readonly compiled = new Map<string, Validate>();

  readonly document: OpenApiDocument;

  constructor(document: OpenApiDocument = openApiDocument) {
    this.document = document;
    this.ajv = createAjv();
    for (const [name, schema] of Object.entries(document.components.schemas)) {
      this.ajv.addSchema({ ...(rewriteSchemaRefs(schema) as object), $id: SCHEMA_BASE + name });
    }
  }

  /** Compiles every component schema; throws on the first that ajv refuses. */
  compileAllComponents(): string[] {
    return Object.keys(this.document.components.schemas).map((name) => {
      this.componentValidator(name);
      return name;
    });
  }

  componentValidator(name: string): Validate {
    const validate = this.ajv.getSchema(SCHEMA_BASE + name);
    if (!validate) throw new Error(`no component schema ${name}`);
    return validate;
  }

  /** Asserts that `value` is valid under the component schema `name` (e.g. Problem). */
  assertComponent(name: string, value: Json, what = name): void {
    const validate = this.componentValidator(name);
    expect(validate(value), `${what} does not match #/components/schemas/${name}: ${this.ajv.errorsText(validate.errors)}\n${JSON.stringify(value)}`).to.equal(true);
  }

  compileSchema(schema: Json): Validate {
    return this.ajv.compile(rewriteSchemaRefs(schema) as object);
  }

  private follow<T>(value: T | RefObject): T {
    let node: unknown = value;
    for (let hops = 0; isRef(node); hops++) {
      if (hops > 10) throw new Error('reference cycle');
      const target = resolvePointer(this.document, node.$ref);
      if (target === undefined) throw new Error(`unresolved $ref ${node.$ref}`);
      node = target;
    }
    return node as T;
  }

  private cachedCompile(key: string, schema: Json): Validate {
    let validate = this.compiled.get(key);
    if (!validate) {
      validate = this.compileSchema(schema);
      this.compiled.set(key, validate);
    }
    return validate;
  }

  /**
   * @param body the parsed JSON body, or the text of a non-JSON body, or undefined / '' when there is none.
   */
  assertMatches(method: string, pathTemplate: string, response: Pick<Response, 'status' | 'headers'>, body: Json): void {
    const where = `${method.toUpperCase()} ${pathTemplate} → ${response.status}`;
    const pathItem = this.document.paths[pathTemplate] as Partial<Record<string, OpenApiOperation>> | undefined;
    expect(pathItem, `path ${pathTemplate} is not in the OpenAPI document`).to.not.equal(undefined);
    const operation = pathItem![method.toLowerCase()];
    expect(operation, `${method.toUpperCase()} ${pathTemplate} is not in the OpenAPI document`).to.not.equal(undefined);
    const documented = Object.keys(operation!.responses);
    const declared = operation!.responses[String(response.status)];
    expect(declared, `${where}: status not documented (documented: ${documented.join(', ')}); body ${JSON.stringify(body)}`).to.not.equal(
      undefined,
    );
    const responseObject = this.follow<ResponseObject>(declared as ResponseObject | RefObject);

    for (const [name, headerOrRef] of Object.entries(responseObject.headers ?? {})) {
      const header = this.follow<HeaderObject>(headerOrRef);
      const value = response.headers.get(name);
      if (value === null) {
        expect(header.required ?? false, `${where}: required header ${name} is missing`).to.equal(false);
        continue;
      }
      const validate = this.cachedCompile(`header ${where} ${name}`, header.schema);
      expect(validate(value), `${where}: header ${name}: ${JSON.stringify(value)} ${this.ajv.errorsText(validate.errors)}`).to.equal(true);
    }

    const contentType = response.headers.get('content-type');
    if (!responseObject.content) {
      expect(body === undefined || body === null || body === '', `${where}: documented without a body, got ${JSON.stringify(body)}`).to.equal(true);
      return;
    }
    expect(contentType, `${where}: no Content-Type`).to.be.a('string');
    const mediaType = contentType!.split(';')[0]!.trim().toLowerCase();
    const media = responseObject.content[mediaType];
    expect(media, `${where}: media type ${mediaType} not documented (documented: ${Object.keys(responseObject.content).join(', ')})`).to.not.equal(
      undefined,
    );
    const validate = this.cachedCompile(`body ${where} ${mediaType}`, media!.schema);
    expect(validate(body), `${where}: body does not match the schema: ${this.ajv.errorsText(validate.errors)}\n${JSON.stringify(body)}`).to.equal(true);
  }
}

let shared: OpenApiResponseValidator | undefined;

/** The validator of the service's own document. */
export function openApiValidator(): OpenApiResponseValidator {
  shared ??= new OpenApiResponseValidator();
  return shared;
}

/** Asserts that the response is documented for the operation and that its headers and body match the document. */
export function assertMatchesOpenApi(method: string, pathTemplate: string, response: Pick<Response, 'status' | 'headers'>, body: Json): void {
  openApiValidator().assertMatches(method, pathTemplate, response, body);
}
