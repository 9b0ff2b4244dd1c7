import { expect } from 'chai';
import fc from 'fast-check';
import { openApiDocument, type OpenApiDocument, type OpenApiOperation, type OpenApiParameter } from '../../src/http/openapi/openapi-document.ts';
import { startRun, waitForTerminalRun } from '../support/runs.ts';
import { startTestService, type TestService, type TestTenant } from '../support/test-service.ts';
import { freshAccount } from '../api/support/api-call.ts';

/**
 * Issue #10 item 9: a property-based fuzz over every operation of the OpenAPI document (so
 * a new route is fuzzed as soon as it is documented, and openapi-coverage keeps the
 * document and the router equal): hostile path segments, query parameters, headers and
 * bodies, and random methods. No response may be a 5xx, none may hang, and the service
 * must be healthy afterwards.
 */

const RUNS = Number(process.env.FUZZ_RUNS ?? 400);
const REQUEST_TIMEOUT_MS = 5000;
/** Methods fetch can send (it refuses CONNECT, TRACE and TRACK). */
const METHODS = ['GET', 'POST', 'PUT', 'PATCH', 'DELETE', 'OPTIONS', 'HEAD'] as const;
const DOCUMENT_METHODS = ['get', 'put', 'post', 'delete', 'patch'];

interface Operation {
  readonly method: string;
  readonly template: string;
  readonly pathParams: readonly string[];
  readonly queryParams: readonly string[];
  readonly bodyProperties: readonly string[];
  /** Body members the schema types as strings. */
  readonly stringProperties: readonly string[];
}

function resolve<T>(document: OpenApiDocument, node: T | { $ref: string }): T {
  let current: unknown = node;
  while (current && typeof current === 'object' && '$ref' in current) {
    const path = (current as { $ref: string }).$ref.replace(/^#\//, '').split('/');
    current = path.reduce<unknown>((at, key) => (at as Record<string, unknown>)[key], document);
  }
  return current as T;
}

function operationsOf(document: OpenApiDocument): Operation[] {
  return Object.entries(document.paths).flatMap(([template, item]) =>
    Object.entries(item as Record<string, OpenApiOperation>)
      .filter(([method]) => DOCUMENT_METHODS.includes(method))
      .map(([method, operation]) => {
        const parameters = (operation.parameters ?? []).map((p) => resolve<OpenApiParameter>(document, p));
        const schema = operation.requestBody ? resolve<{ properties?: Record<string, unknown> }>(document, Object.values(operation.requestBody.content)[0]!.schema as never) : undefined;
        return {
          method: method.toUpperCase(),
          template,
          pathParams: [...template.matchAll(/\{([^}]+)\}/g)].map((m) => m[1]!),
          queryParams: parameters.filter((p) => p.in === 'query').map((p) => p.name),
          bodyProperties: Object.keys(schema?.properties ?? {}),
          stringProperties: Object.entries(schema?.properties ?? {})
            .filter(([, property]) => resolve<{ type?: unknown }>(document, property as never).type === 'string')
            .map(([name]) => name),
        };
      }),
  );
}

/** encodeURIComponent throws on lone surrogates; raw bytes (below) cover those. */
const wellFormed = (s: string): string => s.replace(/\p{Cs}/gu, '\ufffd');
/** Percent-encoded bytes that are not valid UTF-8 or hold control characters. */
const rawBytes = fc.uint8Array({ minLength: 1, maxLength: 12 }).map((bytes) => [...bytes].map((b) => `%${b.toString(16).padStart(2, '0').toUpperCase()}`).join(''));
const hostileText = fc.oneof(
  fc.string({ maxLength: 40 }),
  fc.string({ unit: 'grapheme', maxLength: 40 }),
  fc.string({ unit: 'binary', maxLength: 40 }),
  fc.constantFrom('', ' ', '\u0000', '\ud800', '\udfff', 'a\u0000b', '..', '../..', '%', '%00', '\u202e', '𝔘𝔫𝔦𝔠𝔬𝔡𝔢', 'ｆｕｌｌ', 'null', 'undefined', '[]', '{}', '__proto__', 'constructor', "' OR 1=1 --"),
  fc.integer({ min: 1, max: 200_000 }).map((n) => 'x'.repeat(n)),
);
const numberish = fc.oneof(
  fc.constantFrom('1e21', '1e3', '-1', '0', '1.5', 'NaN', 'Infinity', '0x10', '9007199254740993', '99999999999999999999999', '+7', ' 7'),
  fc.integer().map(String),
  fc.double().map(String),
);
/** A well-formed UTF-8 string as a URL component, or raw bytes. */
const urlComponent = (known: readonly string[]) =>
  fc.oneof(
    { weight: 3, arbitrary: fc.constantFrom(...known) },
    { weight: 3, arbitrary: fc.oneof(hostileText, numberish).map((s) => encodeURIComponent(wellFormed(s))) },
    { weight: 1, arbitrary: rawBytes },
  );
/** Header values fetch can send: no CR, LF or NUL, Latin-1 only. */
const headerValue = fc.oneof(
  fc.string({ maxLength: 300 }).map((s) => s.replace(/[^\x20-\x7e\x80-\xff]/g, '')),
  fc.constantFrom('', ' ', 'Bearer', 'Bearer ', 'Basic Zm9vOmJhcg==', '*', 'W/"x"', '"x"', '1e21', '-1', 'application/json', 'text/plain'),
  // Node refuses header sections over 16 KiB itself (431); mostly stay below to reach the app.
  fc.oneof({ weight: 12, arbitrary: fc.integer({ min: 1, max: 3000 }) }, { weight: 1, arbitrary: fc.constant(17_000) }).map((n) => 'a'.repeat(n)),
);
const anyJson = fc.jsonValue({ maxDepth: 4 });
const hostileValue = fc.oneof(anyJson, hostileText, fc.constantFrom(true, false, null, 0, -1, 1e308, [], {}, [null], { $ref: '#' }));

interface FuzzRequest {
  readonly method: string;
  readonly path: string;
  readonly headers: Record<string, string>;
  readonly body: string | undefined;
}

/** Hostile strings in otherwise valid bodies of every operation with a body: run first, every time. */
function seededExamples(operations: readonly Operation[], known: { ids: string[]; keys: string[] }): [FuzzRequest][] {
  const withBody = operations.filter((operation) => operation.stringProperties.length > 0);
  return withBody.flatMap((operation, index) =>
    ['\\ud800', '\\udfff', 'a\\u0000b'].map((bad, variant): [FuzzRequest] => {
      const id = known.ids[(index * 3 + variant) % known.ids.length]!;
      let path = operation.template;
      for (const name of operation.pathParams) path = path.replace(`{${name}}`, name === 'projectId' ? known.ids[0]! : id);
      const body = `{${operation.stringProperties.map((name) => `"${name}": "${name.endsWith('_id') ? known.ids[(index + variant) % 6]! : `x${bad}`}"`).join(', ')}}`;
      return [{ method: operation.method, path, headers: { authorization: `Bearer ${known.keys[2]!}`, 'content-type': 'application/json' }, body }];
    }),
  );
}

function requests(operations: readonly Operation[], known: { ids: string[]; keys: string[] }): fc.Arbitrary<FuzzRequest> {
  return fc.constantFrom(...operations).chain((operation) =>
    fc
      .record({
        method: fc.oneof({ weight: 4, arbitrary: fc.constant(operation.method) }, { weight: 1, arbitrary: fc.constantFrom(...METHODS) }),
        params: fc.tuple(...operation.pathParams.map(() => urlComponent(known.ids))),
        query: fc.array(
          fc.tuple(
            fc.oneof(fc.constantFrom(...(operation.queryParams.length > 0 ? operation.queryParams : ['q'])), fc.string({ maxLength: 10 }).map((s) => encodeURIComponent(wellFormed(s)))),
            fc.oneof(urlComponent(['1', '50', known.ids[0]!]), numberish.map(encodeURIComponent)),
          ),
          { maxLength: 4 },
        ),
        authorization: fc.oneof(
          { weight: 6, arbitrary: fc.constantFrom(...known.keys.map((key) => `Bearer ${key}`)) },
          fc.constant(undefined),
          headerValue,
          fc.constantFrom(...known.keys).map((key) => `Bearer ${key.slice(0, -2)}xx`),
        ),
        extraHeaders: fc.dictionary(
          fc.constantFrom('idempotency-key', 'x-request-id', 'last-event-id', 'if-none-match', 'content-type', 'accept', 'content-encoding', 'x-forwarded-for'),
          headerValue,
          { maxKeys: 4 },
        ),
        body: fc.oneof(
          { weight: 2, arbitrary: fc.constant(undefined) },
          fc
            .dictionary(
              fc.constantFrom(...(operation.bodyProperties.length > 0 ? operation.bodyProperties : ['x']), 'extra'),
              fc.oneof(hostileValue, fc.constantFrom(...known.ids), fc.double(), fc.boolean()),
              { maxKeys: 5 },
            )
            .map((b) => JSON.stringify(b)),
          // Lone surrogates and NUL inside otherwise valid bodies, so they reach the handlers.
          { weight: 2, arbitrary: fc
            .tuple(fc.constantFrom(...known.ids), fc.constantFrom('\ud800', '\udfff', 'a\u0000b', '\u0000'))
            .map(([id, bad]) => `{${operation.stringProperties.map((name) => `"${name}": "${name.endsWith('_id') ? id : `x${bad}`}"`).join(', ')}}`) },
          anyJson.map((v) => JSON.stringify(v)),
          fc.constantFrom('{', '{"brief": "\\ud800", "project_id": "x"}', '{"reason": "a\\u0000b"}', 'null', '[]', '"', '{"a":1,"a":2}', '\u0000', '{"brief":' + '['.repeat(5000)),
          fc.integer({ min: 1, max: 200_000 }).map((n) => JSON.stringify({ brief: 'b'.repeat(n), reason: 'r'.repeat(n) })),
        ),
      })
      .map(({ method, params, query, authorization, extraHeaders, body }) => {
        let path = operation.template;
        operation.pathParams.forEach((name, index) => {
          path = path.replace(`{${name}}`, params[index]!);
        });
        if (query.length > 0) path += `?${query.map(([k, v]) => `${k}=${v}`).join('&')}`;
        const headers: Record<string, string> = { ...extraHeaders };
        if (authorization !== undefined) headers.authorization = authorization;
        if (body !== undefined) headers['content-type'] ??= 'application/json';
        return { method, path, headers, body: method === 'GET' || method === 'HEAD' ? undefined : body };
      }),
  );
}

describe('API fuzz (fast-check, issue #10 item 9)', function () {
  this.timeout(120_000);
  let svc: TestService;
  let tenant: TestTenant;

  before(async () => {
    svc = await startTestService('api-fuzz', { ROLES: 'http,projectors,agent-worker', BODY_LIMIT_BYTES: '65536' });
    tenant = await svc.tenant('fuzz');
  });

  after(async () => {
    await svc?.stop();
  });

  it(`answers ${RUNS} hostile requests over every documented operation without a 5xx or a hang`, async () => {
    const operations = operationsOf(openApiDocument);
    expect(operations.length).to.be.at.least(15);
    const runId = await startRun(svc, tenant.keys.read, tenant.accounts.sandbox2, 'Summarise the account.');
    const campaigns = (await (await svc.request('GET', `/api/v1/accounts/${tenant.accounts.sandbox}/campaigns`, { key: tenant.keys.read })).json()) as { data: { id: string }[] };
    const idle = await Promise.all(Array.from({ length: 6 }, () => freshAccount(svc, tenant.workspaceId)));
    const known = {
      ids: [...idle, tenant.accounts.sandbox, tenant.accounts.disconnected, runId, campaigns.data[0]!.id, '00000000-0000-7000-8000-000000000000'],
      keys: [tenant.keys.read, tenant.keys.write, tenant.keys.admin],
    };
    const started = Date.now();
    let sent = 0;
    const statuses: Record<number, number> = {};
    await fc.assert(
      fc.asyncProperty(requests(operations, known), async (request) => {
        sent++;
        const response = await fetch(`${svc.baseUrl}${request.path}`, {
          method: request.method,
          headers: request.headers,
          body: request.body,
          signal: AbortSignal.timeout(REQUEST_TIMEOUT_MS),
          redirect: 'manual',
        });
        // A live event stream never ends by itself: its status is the answer.
        if ((response.headers.get('content-type') ?? '').startsWith('text/event-stream')) await response.body?.cancel();
        else await response.arrayBuffer();
        statuses[response.status] = (statuses[response.status] ?? 0) + 1;
        if (response.status < 500) return;
        const readiness = await (await fetch(`${svc.baseUrl}/readyz`)).text();
        throw new Error(`${request.method} ${request.path} answered ${response.status}; /readyz: ${readiness}`);
      }),
      { numRuns: RUNS, endOnFailure: true, maxSkipsPerRun: 100, examples: seededExamples(operations, known) },
    );
    console.log(`      fuzz: ${sent} requests over ${operations.length} operations in ${((Date.now() - started) / 1000).toFixed(1)} s; statuses ${JSON.stringify(statuses)}`);
    // The fuzz must reach the handlers, not only bounce off authentication.
    expect(Object.keys(statuses).filter((status) => Number(status) < 300).length, 'some requests succeed').to.be.at.least(1);
    expect(statuses[422] ?? 0, 'some requests reach validation').to.be.at.least(1);
  });

  it('is healthy afterwards: /readyz 200 and a normal run still succeeds', async () => {
    const ready = await svc.request('GET', '/readyz');
    expect(ready.status).to.equal(200);
    const fresh = await svc.tenant('after-fuzz-2');
    const runId = await startRun(svc, fresh.keys.write, fresh.accounts.sandbox, 'Which search terms waste money?');
    const run = await waitForTerminalRun(svc, fresh.keys.write, runId, 30_000);
    expect(run.status, JSON.stringify(run.error)).to.equal('succeeded');
  });
});

describe('API fuzz: NUL and lone surrogates in bodies (issue #9)', function () {
  this.timeout(60_000);
  let svc: TestService;

  after(async () => {
    await svc?.stop();
  });

  it('answers every operation’s body with NUL or a lone surrogate without a 5xx, and stays ready', async function () {
    svc = await startTestService('api-fuzz-issue9', { ROLES: 'http,projectors' });
    const tenant = await svc.tenant('issue9');
    const idle = await Promise.all(Array.from({ length: 6 }, () => freshAccount(svc, tenant.workspaceId)));
    const examples = seededExamples(operationsOf(openApiDocument), { ids: idle, keys: [tenant.keys.read, tenant.keys.write, tenant.keys.admin] });
    const failures: string[] = [];
    for (const [request] of examples) {
      const response = await fetch(`${svc.baseUrl}${request.path}`, { ...request, signal: AbortSignal.timeout(REQUEST_TIMEOUT_MS) });
      await response.arrayBuffer();
      if (response.status >= 500) failures.push(`${response.status} ${request.method} ${request.path} ${request.body}`);
    }
    // An accepted poison string shows up later, when the projectors fail on it.
    await new Promise((resolve) => setTimeout(resolve, 500));
    const readiness = await fetch(`${svc.baseUrl}/readyz`);
    if (readiness.status !== 200) failures.push(`afterwards /readyz ${readiness.status}: ${await readiness.text()}`);
    expect(failures).to.deep.equal([]);
  });
});
