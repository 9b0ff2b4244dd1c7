import { expect } from 'chai';
import { readFileSync } from 'node:fs';
import { connect } from 'node:net';
import { openApiDocumentRoute } from '../../src/http/openapi/openapi-document.ts';
import { PROBLEM_CATALOGUE } from '../../src/http/problems/problem-catalogue.ts';
import { resolveLimits, type JsonSchema, type RouteDefinition } from '../../src/http/route-table/route-definition.ts';
import { ROUTE_TABLE } from '../../src/http/routes/route-table.ts';
import { startRun } from '../support/runs.ts';
import { startTestService, type TestService, type TestTenant } from '../support/test-service.ts';
import { campaignsByStrategy, proposeTarget } from '../safe-apply/helpers.ts';
import { API_TEST_ROLES, PUBLIC_BASE_URL } from './support/api-call.ts';
import { seededRandom } from '../support/seeded-random.ts';

/**
 * A seeded fuzz of every route of the route table (and the OpenAPI document's own) with hostile
 * input: body fields, query parameters, path segments and headers replaced by NUL, lone
 * surrogates, bidi and zero-width characters, odd numbers, over-limit strings, deep nesting,
 * duplicate keys, wrong types, non-UTF-8 bytes and broken framing headers. Every response must be
 * no 5xx, every 4xx an RFC 9457 problem of a type docs/api.md lists, none may hang, and a refused
 * request must append nothing to the event log. Requests are written byte for byte on a socket,
 * so nothing (fetch, undici) normalises them first.
 *
 * FUZZ_SEED=<n> replays another seed; FUZZ_REQUESTS=<n> changes the number of requests.
 */
const SEED = Number(process.env.FUZZ_SEED ?? 20260511);
const REQUESTS = Number(process.env.FUZZ_REQUESTS ?? 420);
const REQUEST_TIMEOUT_MS = 6000;

// ---------------------------------------------------------------------------------------------
// A raw HTTP/1.1 client: bytes out exactly as built, response parsed minimally.

type HeaderValue = string | Buffer;
interface RawRequest {
  readonly method: string;
  /** As written on the request line (already percent-encoded, or deliberately not). */
  readonly target: string;
  readonly headers: ReadonlyArray<readonly [string, HeaderValue]>;
  readonly body?: Buffer;
  /** When false, no Content-Length is added for the body (the headers say what they say). */
  readonly autoLength?: boolean;
}

interface RawResponse {
  readonly status: number;
  readonly headers: Record<string, string[]>;
  readonly body: Buffer;
}

function requestBytes(request: RawRequest): Buffer {
  const parts: Buffer[] = [Buffer.from(`${request.method} ${request.target} HTTP/1.1\r\nHost: 127.0.0.1\r\n`, 'latin1')];
  for (const [name, value] of request.headers) {
    parts.push(Buffer.from(`${name}: `, 'latin1'), typeof value === 'string' ? Buffer.from(value, 'latin1') : value, Buffer.from('\r\n', 'latin1'));
  }
  if (request.body && request.autoLength !== false) parts.push(Buffer.from(`Content-Length: ${request.body.length}\r\n`, 'latin1'));
  parts.push(Buffer.from('Connection: close\r\n\r\n', 'latin1'));
  if (request.body) parts.push(request.body);
  return Buffer.concat(parts);
}

function dechunk(data: Buffer): Buffer | undefined {
  const out: Buffer[] = [];
  let at = 0;
  for (;;) {
    const lineEnd = data.indexOf('\r\n', at);
    if (lineEnd === -1) return undefined;
    const size = parseInt(data.subarray(at, lineEnd).toString('latin1'), 16);
    if (Number.isNaN(size)) return undefined;
    if (size === 0) return Buffer.concat(out);
    if (data.length < lineEnd + 2 + size + 2) return undefined;
    out.push(data.subarray(lineEnd + 2, lineEnd + 2 + size));
    at = lineEnd + 2 + size + 2;
  }
}

/** Sends the bytes; resolves with the response, or 'timeout' when none came whole in time. */
function send(port: number, request: RawRequest): Promise<RawResponse | 'timeout'> {
  return new Promise((resolve) => {
    const socket = connect({ port, host: '127.0.0.1' });
    let data = Buffer.alloc(0);
    let done = false;
    const finish = (result: RawResponse | 'timeout') => {
      if (done) return;
      done = true;
      clearTimeout(timer);
      socket.destroy();
      resolve(result);
    };
    const timer = setTimeout(() => finish('timeout'), REQUEST_TIMEOUT_MS);
    const tryParse = (closed: boolean) => {
      const headEnd = data.indexOf('\r\n\r\n');
      if (headEnd === -1) return;
      const lines = data.subarray(0, headEnd).toString('latin1').split('\r\n');
      const status = Number(lines[0]!.split(' ')[1]);
      const headers: Record<string, string[]> = {};
      for (const line of lines.slice(1)) {
        const colon = line.indexOf(':');
        (headers[line.slice(0, colon).trim().toLowerCase()] ??= []).push(line.slice(colon + 1).trim());
      }
      const rest = data.subarray(headEnd + 4);
      const type = headers['content-type']?.[0] ?? '';
      if (type.startsWith('text/event-stream') || request.method === 'HEAD' || status === 204 || status === 304) {
        finish({ status, headers, body: Buffer.alloc(0) });
        return;
      }
      const length = headers['content-length']?.[0];
      if (length !== undefined) {
        if (rest.length >= Number(length)) finish({ status, headers, body: rest.subarray(0, Number(length)) });
        return;
      }
      if ((headers['transfer-encoding']?.[0] ?? '').includes('chunked')) {
        const body = dechunk(rest);
        if (body) finish({ status, headers, body });
        return;
      }
      if (closed) finish({ status, headers, body: rest });
    };
    socket.on('data', (chunk: Buffer) => {
      data = Buffer.concat([data, chunk]);
      tryParse(false);
    });
    socket.on('end', () => tryParse(true));
    socket.on('close', () => tryParse(true));
    socket.on('error', () => tryParse(true));
    socket.write(requestBytes(request));
  });
}

// ---------------------------------------------------------------------------------------------
// Hostile material

/** A JSON value written as raw text (so escapes such as \ud800 reach JSON.parse as escapes). */
interface Hostile {
  readonly label: string;
  /** The JSON text of the value; a Buffer for bytes that are not UTF-8. */
  readonly json: string | Buffer;
  /** The docs say this must be refused (422 or 400) wherever a string is expected. */
  readonly refusedAsString: boolean;
}

const HOSTILE_VALUES: readonly Hostile[] = [
  { label: 'NUL escape', json: '"a\\u0000b"', refusedAsString: true },
  { label: 'only NUL', json: '"\\u0000"', refusedAsString: true },
  { label: 'lone high surrogate escape', json: '"x\\ud800"', refusedAsString: true },
  { label: 'lone low surrogate escape', json: '"\\udc00y"', refusedAsString: true },
  { label: 'reversed surrogate pair escape', json: '"\\udc00\\ud800"', refusedAsString: true },
  { label: 'ESC escape', json: '"\\u001b[31m"', refusedAsString: true },
  { label: 'raw NUL byte in string', json: Buffer.from('"a\u0000b"', 'latin1'), refusedAsString: true },
  { label: 'raw CESU-8 lone surrogate bytes', json: Buffer.from([0x22, 0x61, 0xed, 0xa0, 0x80, 0x62, 0x22]), refusedAsString: true },
  { label: 'raw non-UTF-8 bytes (FF FE)', json: Buffer.from([0x22, 0x61, 0xff, 0xfe, 0x62, 0x22]), refusedAsString: true },
  { label: 'raw overlong UTF-8 slash (C0 AF)', json: Buffer.from([0x22, 0xc0, 0xaf, 0x22]), refusedAsString: true },
  { label: 'bidi override', json: '"safe\u202egnp.exe"', refusedAsString: false },
  { label: 'zero-width joiner/space', json: '"a\u200b\u200d\ufeffb"', refusedAsString: false },
  { label: 'non-character U+FFFF', json: '"\\uffff"', refusedAsString: false },
  { label: 'number 1e400', json: '1e400', refusedAsString: true },
  { label: 'number -1e400', json: '-1e400', refusedAsString: true },
  { label: 'number -0', json: '-0', refusedAsString: true },
  { label: 'number 2^53+1', json: '9007199254740993', refusedAsString: true },
  { label: 'number 1e-400', json: '1e-400', refusedAsString: true },
  { label: 'bare NaN', json: 'NaN', refusedAsString: true },
  { label: 'bare Infinity', json: 'Infinity', refusedAsString: true },
  { label: 'string "NaN"', json: '"NaN"', refusedAsString: false },
  { label: 'string "-Infinity"', json: '"-Infinity"', refusedAsString: false },
  { label: 'null', json: 'null', refusedAsString: true },
  { label: 'true', json: 'true', refusedAsString: true },
  { label: 'empty array', json: '[]', refusedAsString: true },
  { label: 'array of strings', json: '["a","b"]', refusedAsString: true },
  { label: 'object', json: '{"a":1}', refusedAsString: true },
  { label: 'object with NUL key', json: '{"\\u0000":1}', refusedAsString: true },
  { label: '__proto__ object', json: '{"__proto__":{"polluted":1}}', refusedAsString: true },
  { label: 'nested 40 deep', json: `${'['.repeat(40)}${']'.repeat(40)}`, refusedAsString: true },
  { label: 'nested 5000 deep', json: `${'{"a":'.repeat(5000)}1${'}'.repeat(5000)}`, refusedAsString: true },
  { label: 'empty string', json: '""', refusedAsString: false },
  { label: 'whitespace only', json: '" \\t\\n "', refusedAsString: false },
];

/** Hostile keys (for a member added to a body object). */
const HOSTILE_KEYS: readonly string[] = ['"\\u0000"', '"k\\ud800"', '"__proto__"', '"constructor"', '"toString"', '"hasOwnProperty"', '"\u202e"', '""', '"a".repeat'];

/** Values for a whole body. */
const HOSTILE_BODIES: ReadonlyArray<{ label: string; body: Buffer; refused: boolean }> = [
  { label: 'empty', body: Buffer.alloc(0), refused: false },
  { label: 'whitespace', body: Buffer.from(' \r\n\t '), refused: false },
  { label: 'array', body: Buffer.from('[]'), refused: true },
  { label: 'array of object', body: Buffer.from('[{}]'), refused: true },
  { label: 'string', body: Buffer.from('"x"'), refused: true },
  { label: 'number', body: Buffer.from('1e400'), refused: true },
  { label: 'null', body: Buffer.from('null'), refused: true },
  { label: 'true', body: Buffer.from('true'), refused: true },
  { label: 'truncated object', body: Buffer.from('{"a":'), refused: true },
  { label: 'two documents', body: Buffer.from('{}{}'), refused: true },
  { label: 'trailing garbage', body: Buffer.from('{} x'), refused: true },
  // RFC 8259 §8.1: a parser MAY ignore a byte order mark.
  { label: 'UTF-8 BOM then {}', body: Buffer.from([0xef, 0xbb, 0xbf, 0x7b, 0x7d]), refused: false },
  { label: 'UTF-16LE {}', body: Buffer.from('{}', 'utf16le'), refused: true },
  { label: 'raw NUL bytes', body: Buffer.from([0, 0, 0, 0]), refused: true },
  { label: 'non-UTF-8 bytes', body: Buffer.from([0xff, 0xfe, 0xfd]), refused: true },
  { label: 'deep array 10000', body: Buffer.from(`${'['.repeat(10_000)}${']'.repeat(10_000)}`), refused: true },
  { label: 'over the body limit', body: Buffer.from(`{"x":"${'a'.repeat(70_000)}"}`), refused: true },
  { label: 'comment', body: Buffer.from('/* c */ {}'), refused: true },
  { label: 'single quotes', body: Buffer.from("{'a':1}"), refused: true },
];

const PATH_SEGMENTS: readonly string[] = [
  '%00',
  'a%00b',
  '%ED%A0%80',
  '%ED%B0%80x',
  '%FF%FE',
  '%C0%AF',
  '%E2%80%AE',
  '%E2%80%8B',
  '%EF%BB%BF',
  '%',
  '%zz',
  '%2e%2e',
  '..',
  '%2F',
  'a%2Fb',
  '-0',
  '1e400',
  '9007199254740993',
  'NaN',
  'null',
  'undefined',
  '__proto__',
  'constructor',
  'x'.repeat(65),
  'y'.repeat(7000),
  '%01',
  '%7F',
  '00000000-0000-0000-0000-000000000000',
  'FFFFFFFF-FFFF-FFFF-FFFF-FFFFFFFFFFFF',
  '\u00ff\u00fe', // raw latin1 bytes on the request line
];

const QUERY_VALUES: readonly string[] = [
  '%00',
  '%ED%A0%80',
  '%FF',
  '%E2%80%AE',
  '%E2%80%8B',
  '1e400',
  '-0',
  '-1',
  '0',
  '9007199254740991',
  '9007199254740992',
  '9007199254740993',
  '99999999999999999999',
  '9999999999999999',
  '0x10',
  '+5',
  '%205',
  '1.5',
  'NaN',
  'Infinity',
  '',
  '%01',
  'z'.repeat(3000),
  '00000000-0000-0000-0000-000000000000',
];

const QUERY_NAMES_EXTRA: readonly string[] = ['__proto__', 'constructor', 'hasOwnProperty', 'toString', '%00', 'a%ED%A0%80', 'limit[]', 'x%01'];

// ---------------------------------------------------------------------------------------------
// What docs/api.md lists

function documentedSlugs(): Set<string> {
  const text = readFileSync(new URL('../../docs/api.md', import.meta.url), 'utf8');
  const start = text.indexOf('### Problem types');
  const slugs = new Set<string>();
  for (const match of text.slice(start).matchAll(/^\| `([a-z0-9-]+)` \| (\d{3}) \|/gm)) slugs.add(match[1]!);
  return slugs;
}

// ---------------------------------------------------------------------------------------------

interface Case {
  readonly route: string;
  readonly label: string;
  readonly request: RawRequest;
  /** Docs say this request cannot succeed. */
  readonly mustRefuse: boolean;
}

interface Violation {
  readonly n: number;
  readonly kase: Case;
  readonly status: number | 'timeout';
  readonly problems: string[];
  readonly responseBody: string;
}

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

function describeRequest(request: RawRequest): string {
  const bytes = requestBytes(request);
  const shown = bytes.length > 600 ? Buffer.concat([bytes.subarray(0, 400), Buffer.from(`…(${bytes.length} bytes)…`), bytes.subarray(-120)]) : bytes;
  return JSON.stringify(shown.toString('latin1'));
}

describe('hostile input fuzz: every route, seeded', function () {
  this.timeout(120_000);
  let svc: TestService;
  let tenant: TestTenant;
  let port: number;
  const ids: Record<string, string> = {};

  before(async () => {
    svc = await startTestService('hostile-fuzz', { ROLES: API_TEST_ROLES });
    tenant = await svc.tenant('fuzz');
    port = Number(new URL(svc.baseUrl).port);
    const { cpa } = await campaignsByStrategy(svc, tenant.keys.read, tenant.accounts.sandbox);
    const action = await proposeTarget(svc, tenant.keys.write, tenant.accounts.sandbox, cpa.id, { target_cpa: Math.round(cpa.bidding_strategy.target_cpa! * 0.97 * 100) / 100 });
    ids.projectId = tenant.accounts.sandbox;
    ids.campaignId = cpa.id;
    ids.actionId = action.id;
    // No agent worker in these roles: the run stays queued.
    ids.runId = await startRun(svc, tenant.keys.write, tenant.accounts.sandbox2, 'Find wasted spend.');
  });

  after(async () => {
    await svc?.stop();
  });

  it(`never 5xx, always a documented problem, never hangs, never appends when refusing (seed ${SEED})`, async function () {
    console.log(`      hostile-input-fuzz seed=${SEED} requests=${REQUESTS} (FUZZ_SEED to replay)`);
    const random = seededRandom(SEED);
    const pick = <T>(items: readonly T[]): T => items[Math.floor(random() * items.length)]!;
    const slugs = documentedSlugs();
    const limits = svc.config;
    const store = svc.service.infrastructure.store;
    const routes: RouteDefinition<any>[] = [...ROUTE_TABLE, openApiDocumentRoute as RouteDefinition<any>];

    const keyFor = (route: RouteDefinition<any>): string | undefined =>
      route.access === 'public' ? undefined : route.access === 'read' ? tenant.keys.read : route.access === 'write' ? tenant.keys.write : tenant.keys.admin;

    const validBody = (route: RouteDefinition<any>): Record<string, string> => {
      // JSON text of each member's value, valid for its schema.
      switch (route.body?.component) {
        case 'CreateRunRequest':
          return { brief: '"Audit the search terms."', project_id: JSON.stringify(tenant.accounts.sandbox2), auto_apply: 'false' };
        case 'SetTargetRequest':
          return { target_cpa: '12.34', reason: '"fuzz"', auto_apply: 'false' };
        case 'ApproveRequest':
          return { note: '"ok"', expected_version: '"v-none"' };
        case 'RejectRequest':
          return { reason: '"no"', expected_version: '"v-none"' };
        case 'KillSwitchRequest':
          return { reason: '"fuzz"' };
        default:
          return {};
      }
    };
    const objectText = (members: ReadonlyArray<readonly [string, string | Buffer]>): Buffer =>
      Buffer.concat([
        Buffer.from('{'),
        ...members.flatMap(([key, value], i) => [Buffer.from(`${i > 0 ? ',' : ''}${key}:`), typeof value === 'string' ? Buffer.from(value, 'utf8') : value]),
        Buffer.from('}'),
      ]);

    const pathOf = (route: RouteDefinition<any>, override?: { name: string; segment: string }): string =>
      route.path.replace(/\{([^}]+)\}/g, (_m, name: string) => (override?.name === name ? override.segment : ids[name]!));

    const baseHeaders = (route: RouteDefinition<any>): Array<[string, HeaderValue]> => {
      const key = keyFor(route);
      return key ? [['Authorization', `Bearer ${key}`]] : [];
    };

    const buildCase = (route: RouteDefinition<any>): Case => {
      const method = route.method.toUpperCase();
      const name = `${method} ${route.path}`;
      const schema: JsonSchema | undefined = route.body ? resolveLimits(route.body.schema, limits) : undefined;
      const properties = (schema?.properties ?? {}) as Record<string, JsonSchema>;
      const members = Object.entries(validBody(route));
      const jsonHeaders = (): Array<[string, HeaderValue]> => [...baseHeaders(route), ['Content-Type', 'application/json']];
      const validBodyBytes = () => objectText(members.map(([k, v]) => [JSON.stringify(k), v]));
      const kinds: string[] = ['header', 'method'];
      if (route.body) kinds.push('field', 'field', 'field', 'key', 'whole', 'duplicate', 'overlimit', 'framing', 'framing');
      if (route.pathParameters) kinds.push('path', 'path');
      if (route.path.startsWith('/api/')) kinds.push('query', 'query');
      if (route.query) kinds.push('query');
      const kind = pick(kinds);

      switch (kind) {
        case 'field': {
          const [field] = pick(members.length > 0 ? members : [['note', '""'] as [string, string]]);
          const hostile = pick(HOSTILE_VALUES);
          const body = objectText(members.length > 0 ? members.map(([k, v]) => [JSON.stringify(k), k === field ? hostile.json : v]) : [[JSON.stringify(field), hostile.json]]);
          const stringField = (properties[field]?.type ?? 'string') === 'string';
          const booleanTrue = properties[field]?.type === 'boolean' && hostile.label === 'true';
          const mustRefuse = stringField ? hostile.refusedAsString : !booleanTrue;
          return { route: name, label: `body /${field} = ${hostile.label}`, request: { method, target: pathOf(route), headers: jsonHeaders(), body }, mustRefuse };
        }
        case 'key': {
          const key = pick(HOSTILE_KEYS);
          const keyText = key === '"a".repeat' ? JSON.stringify('k'.repeat(5000)) : key;
          const body = objectText([...members.map(([k, v]) => [JSON.stringify(k), v] as const), [keyText, '1']]);
          return { route: name, label: `extra member ${key}`, request: { method, target: pathOf(route), headers: jsonHeaders(), body }, mustRefuse: true };
        }
        case 'whole': {
          const hostile = pick(HOSTILE_BODIES);
          const optional = route.body && (!route.body.required || route.body.absentIsEmptyObject);
          return {
            route: name,
            label: `whole body = ${hostile.label}`,
            request: { method, target: pathOf(route), headers: jsonHeaders(), body: hostile.body },
            mustRefuse: hostile.refused || !optional,
          };
        }
        case 'duplicate': {
          const [field, valid] = pick(members.length > 0 ? members : [['reason', '"x"'] as [string, string]]);
          const hostile = pick(HOSTILE_VALUES.filter((h) => h.refusedAsString));
          const validFirst = random() < 0.5;
          const dup: Array<readonly [string, string | Buffer]> = validFirst ? [[JSON.stringify(field), valid], [JSON.stringify(field), hostile.json]] : [[JSON.stringify(field), hostile.json], [JSON.stringify(field), valid]];
          const body = objectText([...members.filter(([k]) => k !== field).map(([k, v]) => [JSON.stringify(k), v] as const), ...dup]);
          // Duplicate names (RFC 8259 leaves them to the parser; the docs say nothing): JSON.parse keeps the last,
          // so only a hostile LAST value must be refused.
          const mustRefuse = validFirst && (properties[field]?.type !== 'boolean' || hostile.label !== 'true');
          return { route: name, label: `duplicate /${field}: ${validFirst ? 'valid then' : 'then valid after'} ${hostile.label}`, request: { method, target: pathOf(route), headers: jsonHeaders(), body }, mustRefuse };
        }
        case 'overlimit': {
          const limited = Object.entries(properties).filter(([, p]) => typeof p.maxLength === 'number');
          if (limited.length === 0) return buildCase(route);
          const [field, p] = pick(limited);
          const over = 'é'.repeat((p.maxLength as number) + 1);
          const body = objectText([...members.filter(([k]) => k !== field).map(([k, v]) => [JSON.stringify(k), v] as const), [JSON.stringify(field), JSON.stringify(over)]]);
          return { route: name, label: `body /${field} = ${(p.maxLength as number) + 1} characters (limit ${p.maxLength})`, request: { method, target: pathOf(route), headers: jsonHeaders(), body }, mustRefuse: true };
        }
        case 'framing': {
          const body = validBodyBytes();
          const variants: Array<{ label: string; headers: Array<[string, HeaderValue]>; autoLength: boolean; body: Buffer; mustRefuse: boolean }> = [
            { label: 'no Content-Type', headers: [...baseHeaders(route)], autoLength: true, body, mustRefuse: true },
            { label: 'Content-Type text/plain', headers: [...baseHeaders(route), ['Content-Type', 'text/plain']], autoLength: true, body, mustRefuse: true },
            { label: 'Content-Type charset=latin1', headers: [...baseHeaders(route), ['Content-Type', 'application/json; charset=latin1']], autoLength: true, body, mustRefuse: true },
            { label: 'Content-Type charset=utf-16', headers: [...baseHeaders(route), ['Content-Type', 'application/json; charset=utf-16']], autoLength: true, body, mustRefuse: true },
            { label: 'Content-Type empty', headers: [...baseHeaders(route), ['Content-Type', '']], autoLength: true, body, mustRefuse: true },
            { label: 'Content-Type garbage', headers: [...baseHeaders(route), ['Content-Type', ';;;/;=']], autoLength: true, body, mustRefuse: true },
            { label: 'Content-Type with NUL-ish latin1', headers: [...baseHeaders(route), ['Content-Type', Buffer.from([0x61, 0x70, 0x70, 0xff, 0x2f, 0x6a])]], autoLength: true, body, mustRefuse: true },
            { label: 'Content-Type twice (text then json)', headers: [...baseHeaders(route), ['Content-Type', 'text/plain'], ['Content-Type', 'application/json']], autoLength: true, body, mustRefuse: true },
            { label: 'Content-Type list', headers: [...baseHeaders(route), ['Content-Type', 'application/json, text/plain']], autoLength: true, body, mustRefuse: true },
            { label: 'Content-Length twice, same', headers: [...jsonHeaders(), ['Content-Length', String(body.length)], ['Content-Length', String(body.length)]], autoLength: false, body, mustRefuse: false },
            { label: 'Content-Length twice, different', headers: [...jsonHeaders(), ['Content-Length', String(body.length)], ['Content-Length', String(body.length + 1)]], autoLength: false, body, mustRefuse: true },
            { label: 'Content-Length negative', headers: [...jsonHeaders(), ['Content-Length', '-1']], autoLength: false, body, mustRefuse: true },
            { label: 'Content-Length not a number', headers: [...jsonHeaders(), ['Content-Length', 'abc']], autoLength: false, body, mustRefuse: true },
            { label: 'Content-Length 1e3', headers: [...jsonHeaders(), ['Content-Length', '1e3']], autoLength: false, body, mustRefuse: true },
            { label: 'Content-Length huge', headers: [...jsonHeaders(), ['Content-Length', '99999999999999999999']], autoLength: false, body, mustRefuse: true },
            { label: 'Content-Length 2^53+1', headers: [...jsonHeaders(), ['Content-Length', '9007199254740993']], autoLength: false, body, mustRefuse: true },
            { label: 'Content-Length shorter than body', headers: [...jsonHeaders(), ['Content-Length', String(Math.max(1, body.length - 3))]], autoLength: false, body, mustRefuse: true },
            { label: 'complete request, then pipelined garbage', headers: [...jsonHeaders(), ['Content-Length', String(body.length)]], autoLength: false, body: Buffer.concat([body, Buffer.from('garbage\r\n\r\n')]), mustRefuse: false },
            { label: 'Content-Length 0 with body', headers: [...jsonHeaders(), ['Content-Length', '0']], autoLength: false, body, mustRefuse: false },
            { label: 'chunked and Content-Length', headers: [...jsonHeaders(), ['Transfer-Encoding', 'chunked'], ['Content-Length', String(body.length)]], autoLength: false, body: Buffer.concat([Buffer.from(`${body.length.toString(16)}\r\n`), body, Buffer.from('\r\n0\r\n\r\n')]), mustRefuse: true },
            { label: 'chunked, empty', headers: [...jsonHeaders(), ['Transfer-Encoding', 'chunked']], autoLength: false, body: Buffer.from('0\r\n\r\n'), mustRefuse: false },
            { label: 'chunked, bad chunk size', headers: [...jsonHeaders(), ['Transfer-Encoding', 'chunked']], autoLength: false, body: Buffer.from('zz\r\n{}\r\n0\r\n\r\n'), mustRefuse: true },
            { label: 'Transfer-Encoding gzip, chunked', headers: [...jsonHeaders(), ['Transfer-Encoding', 'gzip, chunked']], autoLength: false, body: Buffer.concat([Buffer.from(`${body.length.toString(16)}\r\n`), body, Buffer.from('\r\n0\r\n\r\n')]), mustRefuse: true },
            { label: 'Content-Encoding gzip (not gzipped)', headers: [...jsonHeaders(), ['Content-Encoding', 'gzip']], autoLength: true, body, mustRefuse: true },
            { label: 'Content-Encoding identity, gzip', headers: [...jsonHeaders(), ['Content-Encoding', 'identity, gzip']], autoLength: true, body, mustRefuse: true },
          ];
          const v = pick(variants);
          return { route: name, label: `framing: ${v.label}`, request: { method, target: pathOf(route), headers: v.headers, body: v.body, autoLength: v.autoLength }, mustRefuse: v.mustRefuse };
        }
        case 'path': {
          const names = Object.keys(route.pathParameters ?? {});
          const param = pick(names);
          const segment = pick(PATH_SEGMENTS);
          const body = route.body ? validBodyBytes() : undefined;
          return {
            route: name,
            label: `path {${param}} = ${JSON.stringify(segment.length > 80 ? `${segment.slice(0, 10)}…(${segment.length})` : segment)}`,
            request: { method, target: pathOf(route, { name: param, segment }), headers: route.body ? jsonHeaders() : baseHeaders(route), ...(body ? { body } : {}) },
            mustRefuse: true,
          };
        }
        case 'query': {
          const known = Object.keys(route.query ?? {});
          const qname = known.length > 0 && random() < 0.7 ? pick(known) : pick(QUERY_NAMES_EXTRA);
          const value = pick(QUERY_VALUES);
          const repeated = random() < 0.15;
          const query = repeated ? `${qname}=${value}&${qname}=${value}` : `${qname}=${value}`;
          const body = route.body ? validBodyBytes() : undefined;
          const known1 = known.includes(qname);
          return {
            route: name,
            label: `query ${JSON.stringify(query.length > 100 ? `${query.slice(0, 40)}…(${query.length})` : query)}`,
            request: { method, target: `${pathOf(route)}?${query}`, headers: route.body ? jsonHeaders() : baseHeaders(route), ...(body ? { body } : {}) },
            // An unknown parameter, a repeated one, or NUL/surrogate in any is a 422 on /api/ routes.
            mustRefuse: route.path.startsWith('/api/') && (!known1 || repeated || ['%00', '%01', '%ED%A0%80'].includes(value)),
          };
        }
        case 'method': {
          const other = pick(['PUT', 'PATCH', 'DELETE', 'POST', 'OPTIONS', 'HEAD', 'PROPFIND', 'GET', 'TRACE', 'CONNECT-ish']);
          if (other === method || other === 'CONNECT-ish') return buildCase(route);
          return {
            route: name,
            label: `method ${other}`,
            request: { method: other, target: pathOf(route), headers: [...baseHeaders(route), ['Content-Type', 'application/json']], body: Buffer.from('{}') },
            // Refused unless the table has another route at this path with that method (GET also answers HEAD).
            mustRefuse: !['HEAD', 'OPTIONS'].includes(other) && !routes.some((r) => r.path === route.path && r.method.toUpperCase() === other),
          };
        }
        default: {
          // header
          const body = route.body ? validBodyBytes() : undefined;
          const auth = route.access === 'public' ? null : keyFor(route)!;
          const secretless = auth ? auth.slice(0, auth.lastIndexOf('_') + 1) : 'ak_';
          const variants: Array<{ label: string; headers: Array<[string, HeaderValue]>; mustRefuse: boolean }> = [
            { label: 'no Authorization', headers: [], mustRefuse: auth !== null },
            { label: 'Authorization empty', headers: [['Authorization', '']], mustRefuse: auth !== null },
            { label: 'Authorization "Bearer"', headers: [['Authorization', 'Bearer']], mustRefuse: auth !== null },
            { label: 'Authorization Basic', headers: [['Authorization', 'Basic YTpi']], mustRefuse: auth !== null },
            { label: 'Authorization without secret', headers: [['Authorization', `Bearer ${secretless}`]], mustRefuse: auth !== null },
            { label: 'Authorization with wrong secret', headers: [['Authorization', `Bearer ${secretless}AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA`]], mustRefuse: auth !== null },
            { label: 'Authorization with trailing junk', headers: [['Authorization', `Bearer ${auth ?? 'x'} junk`]], mustRefuse: auth !== null },
            { label: 'Authorization key + NUL-ish latin1', headers: [['Authorization', Buffer.concat([Buffer.from(`Bearer ${auth ?? 'x'}`), Buffer.from([0xff])])]], mustRefuse: auth !== null },
            { label: 'Authorization key + UTF-8 bidi', headers: [['Authorization', Buffer.from(`Bearer ${auth ?? 'x'}\u202e`, 'utf8')]], mustRefuse: auth !== null },
            { label: 'Authorization twice (junk first)', headers: [['Authorization', 'Bearer nope'], ['Authorization', `Bearer ${auth ?? 'x'}`]], mustRefuse: auth !== null },
            { label: 'Authorization 12 KiB', headers: [['Authorization', `Bearer ${'a'.repeat(12_000)}`]], mustRefuse: auth !== null },
            { label: 'Authorization 20 KiB', headers: [['Authorization', `Bearer ${'a'.repeat(20_000)}`]], mustRefuse: true },
            { label: 'Authorization key id with surrogate-ish bytes', headers: [['Authorization', Buffer.concat([Buffer.from('Bearer ak_'), Buffer.from([0xed, 0xa0, 0x80]), Buffer.from('_secret')])]], mustRefuse: auth !== null },
            { label: 'Idempotency-Key empty', headers: [...(auth ? [['Authorization', `Bearer ${auth}`] as [string, string]] : []), ['Idempotency-Key', '']], mustRefuse: route.headers?.includes('IdempotencyKey') === true },
            { label: 'Idempotency-Key 256 chars', headers: [...(auth ? [['Authorization', `Bearer ${auth}`] as [string, string]] : []), ['Idempotency-Key', 'k'.repeat(256)]], mustRefuse: route.headers?.includes('IdempotencyKey') === true },
            { label: 'Idempotency-Key with space', headers: [...(auth ? [['Authorization', `Bearer ${auth}`] as [string, string]] : []), ['Idempotency-Key', 'a b']], mustRefuse: route.headers?.includes('IdempotencyKey') === true },
            { label: 'Idempotency-Key latin1 byte', headers: [...(auth ? [['Authorization', `Bearer ${auth}`] as [string, string]] : []), ['Idempotency-Key', Buffer.from([0x6b, 0xe9])]], mustRefuse: route.headers?.includes('IdempotencyKey') === true },
            { label: 'Idempotency-Key UTF-8 zero-width', headers: [...(auth ? [['Authorization', `Bearer ${auth}`] as [string, string]] : []), ['Idempotency-Key', Buffer.from('k\u200b', 'utf8')]], mustRefuse: route.headers?.includes('IdempotencyKey') === true },
            { label: 'Idempotency-Key twice', headers: [...(auth ? [['Authorization', `Bearer ${auth}`] as [string, string]] : []), ['Idempotency-Key', `fz-${SEED}-a`], ['Idempotency-Key', `fz-${SEED}-b`]], mustRefuse: route.headers?.includes('IdempotencyKey') === true },
            { label: 'Idempotency-Key with control byte', headers: [...(auth ? [['Authorization', `Bearer ${auth}`] as [string, string]] : []), ['Idempotency-Key', Buffer.from([0x6b, 0x01])]], mustRefuse: true },
            { label: 'Last-Event-ID abc', headers: [...(auth ? [['Authorization', `Bearer ${auth}`] as [string, string]] : []), ['Last-Event-ID', 'abc']], mustRefuse: route.headers?.includes('LastEventId') === true },
            { label: 'Last-Event-ID -1', headers: [...(auth ? [['Authorization', `Bearer ${auth}`] as [string, string]] : []), ['Last-Event-ID', '-1']], mustRefuse: route.headers?.includes('LastEventId') === true },
            { label: 'Last-Event-ID 1e1', headers: [...(auth ? [['Authorization', `Bearer ${auth}`] as [string, string]] : []), ['Last-Event-ID', '1e1']], mustRefuse: route.headers?.includes('LastEventId') === true },
            { label: 'Last-Event-ID 2^53+1', headers: [...(auth ? [['Authorization', `Bearer ${auth}`] as [string, string]] : []), ['Last-Event-ID', '9007199254740993']], mustRefuse: route.headers?.includes('LastEventId') === true },
            { label: 'Last-Event-ID 20 digits', headers: [...(auth ? [['Authorization', `Bearer ${auth}`] as [string, string]] : []), ['Last-Event-ID', '9'.repeat(20)]], mustRefuse: route.headers?.includes('LastEventId') === true },
            { label: 'Last-Event-ID latin1 byte', headers: [...(auth ? [['Authorization', `Bearer ${auth}`] as [string, string]] : []), ['Last-Event-ID', Buffer.from([0x31, 0xff])]], mustRefuse: route.headers?.includes('LastEventId') === true },
            { label: 'Last-Event-ID twice', headers: [...(auth ? [['Authorization', `Bearer ${auth}`] as [string, string]] : []), ['Last-Event-ID', '1'], ['Last-Event-ID', '2']], mustRefuse: route.headers?.includes('LastEventId') === true },
            { label: 'X-Request-Id hostile', headers: [...(auth ? [['Authorization', `Bearer ${auth}`] as [string, string]] : []), ['X-Request-Id', Buffer.from('id\u202e\u0085', 'utf8')]], mustRefuse: false },
            { label: 'header with NUL byte', headers: [...(auth ? [['Authorization', `Bearer ${auth}`] as [string, string]] : []), ['X-Fuzz', Buffer.from([0x61, 0x00, 0x62])]], mustRefuse: true },
            { label: 'If-None-Match garbage', headers: [...(auth ? [['Authorization', `Bearer ${auth}`] as [string, string]] : []), ['If-None-Match', Buffer.from('"\u00ff", W/"x", *', 'latin1')]], mustRefuse: false },
          ];
          const v = pick(variants);
          const headers: Array<[string, HeaderValue]> = route.body ? [...v.headers, ['Content-Type', 'application/json']] : v.headers;
          // A header variant alone may be harmless: keep the request refusable by its own rule only.
          return { route: name, label: `header: ${v.label}`, request: { method, target: pathOf(route), headers, ...(body ? { body } : {}) }, mustRefuse: v.mustRefuse };
        }
      }
    };

    const violations: Violation[] = [];
    const statusCounts: Record<string, number> = {};
    const started = Date.now();
    for (let n = 0; n < REQUESTS; n++) {
      const route = pick(routes);
      const kase = buildCase(route);
      const before = await store.lastSequence();
      const response = await send(port, kase.request);
      // Node's parser refusal is written at once, maybe while a request parsed before it still runs: let that finish.
      if (response !== 'timeout' && response.status === 400 && response.body.includes('malformed-request')) await sleep(300);
      const after = await store.lastSequence();
      const problems: string[] = [];
      let responseBody = '';
      if (response === 'timeout') {
        problems.push(`no complete response within ${REQUEST_TIMEOUT_MS} ms`);
      } else {
        statusCounts[response.status] = (statusCounts[response.status] ?? 0) + 1;
        responseBody = response.body.toString('utf8');
        const isUnknownMethod501 = response.status === 501 && !['GET', 'POST', 'DELETE', 'PUT', 'PATCH', 'HEAD', 'OPTIONS'].includes(kase.request.method);
        if (response.status >= 500 && !isUnknownMethod501) problems.push(`answered ${response.status}`);
        if (response.status >= 400) {
          const type = response.headers['content-type']?.[0] ?? '';
          if (!/^application\/problem\+json(;|$)/.test(type)) problems.push(`Content-Type ${JSON.stringify(type)}, not application/problem+json`);
          let problem: any;
          try {
            // HEAD answers carry no body (RFC 9110 §9.3.2).
            if (kase.request.method !== 'HEAD') problem = JSON.parse(responseBody);
          } catch {
            problems.push('body is not JSON');
          }
          if (problem && typeof problem === 'object') {
            const slug = typeof problem.type === 'string' && problem.type.startsWith(`${PUBLIC_BASE_URL}/problems/`) ? problem.type.slice(`${PUBLIC_BASE_URL}/problems/`.length) : undefined;
            if (slug === undefined) problems.push(`type ${JSON.stringify(problem.type)} is not <PUBLIC_BASE_URL>/problems/<slug>`);
            else if (!slugs.has(slug) && slug !== `http-${response.status}`) problems.push(`type slug ${slug} is not listed in docs/api.md`);
            else if (slug in PROBLEM_CATALOGUE && PROBLEM_CATALOGUE[slug as keyof typeof PROBLEM_CATALOGUE].status !== response.status) problems.push(`slug ${slug} documented as ${PROBLEM_CATALOGUE[slug as keyof typeof PROBLEM_CATALOGUE].status}`);
            if (typeof problem.title !== 'string' || problem.title === '') problems.push('no title');
            if (problem.status !== response.status) problems.push(`status member ${problem.status} ≠ ${response.status}`);
            if (typeof problem.detail !== 'string') problems.push('no detail');
            if (typeof problem.instance !== 'string') problems.push('no instance');
            if (problem.request_id !== response.headers['x-request-id']?.[0]) problems.push(`request_id ${problem.request_id} ≠ X-Request-Id ${response.headers['x-request-id']?.[0]}`);
          }
        }
        if (response.status >= 200 && response.status < 300 && kase.mustRefuse && kase.request.method !== 'HEAD' && kase.request.method !== 'OPTIONS') {
          problems.push(`accepted (${response.status}) a request the docs say is refused`);
        }
      }
      const refused = response === 'timeout' || response.status >= 400;
      if (refused && after !== before) problems.push(`event log moved ${before} → ${after} on a refused request`);
      if (process.env.FUZZ_VERBOSE) console.log(`      #${n} ${kase.route} — ${kase.label} → ${response === 'timeout' ? 'timeout' : `${response.status} ${responseBody.slice(0, 160)}`}`);
      if (problems.length > 0) violations.push({ n, kase, status: response === 'timeout' ? 'timeout' : response.status, problems, responseBody: responseBody.slice(0, 600) });
    }
    console.log(`      ${REQUESTS} requests in ${Date.now() - started} ms; statuses ${JSON.stringify(statusCounts)}`);
    for (const v of violations) {
      console.log(`      #${v.n} ${v.kase.route} — ${v.kase.label}\n        → ${v.status}: ${v.problems.join('; ')}\n        request ${describeRequest(v.kase.request)}\n        response ${JSON.stringify(v.responseBody)}`);
    }
    expect(violations.map((v) => `#${v.n} ${v.kase.route} — ${v.kase.label} → ${v.status}: ${v.problems.join('; ')}`)).to.deep.equal([]);
  });

  /**
   * What the fuzz found, each sent twice with fixed bytes: a failure here is the defect itself,
   * independent of the seed.
   */
  describe('what the fuzz found, pinned with fixed bytes', () => {
    const post = (path: string, key: string, body: Buffer, extra: Array<[string, HeaderValue]> = []): RawRequest => ({
      method: 'POST',
      target: path,
      headers: [['Authorization', `Bearer ${key}`], ['Content-Type', 'application/json'], ...extra],
      body,
    });
    const problemSlug = (response: RawResponse | 'timeout'): string =>
      response === 'timeout' ? 'timeout' : `${response.status} ${String(JSON.parse(response.body.toString('utf8') || '{}').type ?? '').replace(`${PUBLIC_BASE_URL}/problems/`, '')}`;

    it('refuses a body string whose bytes are not UTF-8 (docs/api.md: bodies are UTF-8) instead of storing U+FFFD', async () => {
      const repro = await svc.tenant('fuzz-utf8');
      const store = svc.service.infrastructure.store;
      const cases: Array<[string, RawRequest]> = [
        ['kill-switch reason with CESU-8 \\ud800 (ED A0 80)', post('/api/v1/workspace/kill-switch/engage', repro.keys.admin, Buffer.concat([Buffer.from('{"reason":"a'), Buffer.from([0xed, 0xa0, 0x80]), Buffer.from('b"}')]))],
        ['brief with FF FE', post('/api/v1/runs', repro.keys.write, Buffer.concat([Buffer.from('{"brief":"audit '), Buffer.from([0xff, 0xfe]), Buffer.from(` terms","project_id":"${repro.accounts.sandbox}"}`)]))],
      ];
      const seen: string[] = [];
      for (const [label, request] of cases) {
        for (const attempt of [1, 2]) {
          const before = await store.lastSequence();
          const response = await send(port, request);
          const after = await store.lastSequence();
          seen.push(`${label} #${attempt}: ${response === 'timeout' ? 'timeout' : `${response.status} ${response.body.toString('utf8').slice(0, 200)}`}; log ${before} → ${after}`);
          // Release what an accepted engage did, so the second attempt would append again.
          await send(port, post('/api/v1/workspace/kill-switch/release', repro.keys.admin, Buffer.from('{}')));
          if (response !== 'timeout' && response.status === 202) {
            const id = JSON.parse(response.body.toString('utf8')).id as string;
            await send(port, { method: 'DELETE', target: `/api/v1/runs/${id}`, headers: [['Authorization', `Bearer ${repro.keys.write}`]] });
          }
        }
      }
      if (process.env.FUZZ_VERBOSE) console.log(seen.map((line) => `      ${line}`).join('\n'));
      expect(seen.filter((line) => !/: 400 .*malformed-json.*; log (\d+) → \1$/.test(line))).to.deep.equal([]);
    });

    it('never answers 400 malformed-request for a request it executed (a complete request followed by pipelined garbage)', async () => {
      const repro = await svc.tenant('fuzz-pipeline');
      const store = svc.service.infrastructure.store;
      const seen: string[] = [];
      for (const attempt of [1, 2]) {
        await send(port, post('/api/v1/workspace/kill-switch/engage', repro.keys.admin, Buffer.from('{}')));
        const before = await store.lastSequence();
        const request: RawRequest = {
          method: 'POST',
          target: '/api/v1/workspace/kill-switch/release',
          headers: [['Authorization', `Bearer ${repro.keys.admin}`]],
          body: Buffer.from('garbage\r\n\r\n'), // no Content-Length: these bytes are a second, broken request
          autoLength: false,
        };
        const response = await send(port, request);
        await sleep(300);
        const after = await store.lastSequence();
        const state = await send(port, { method: 'GET', target: '/api/v1/workspace/kill-switch', headers: [['Authorization', `Bearer ${repro.keys.read}`]] });
        const engaged = state === 'timeout' ? 'timeout' : JSON.parse(state.body.toString('utf8')).engaged;
        seen.push(`#${attempt}: answered ${problemSlug(response)}; log ${before} → ${after}; engaged ${engaged}`);
      }
      if (process.env.FUZZ_VERBOSE) console.log(seen.map((line) => `      ${line}`).join('\n'));
      // Either the release is answered (200) or, refused, it changed nothing.
      expect(seen.filter((line) => !/answered 200 |answered 400 malformed-request; log (\d+) → \1; engaged true/.test(line))).to.deep.equal([]);
    });

    it('does not read a body sent with Transfer-Encoding: gzip as if it were not encoded', async () => {
      const repro = await svc.tenant('fuzz-te');
      const store = svc.service.infrastructure.store;
      const seen: string[] = [];
      for (const attempt of [1, 2]) {
        await send(port, post('/api/v1/workspace/kill-switch/release', repro.keys.admin, Buffer.from('{}')));
        const json = Buffer.from('{"reason":"te"}');
        const before = await store.lastSequence();
        const response = await send(port, {
          method: 'POST',
          target: '/api/v1/workspace/kill-switch/engage',
          headers: [['Authorization', `Bearer ${repro.keys.admin}`], ['Content-Type', 'application/json'], ['Transfer-Encoding', 'gzip, chunked']],
          body: Buffer.concat([Buffer.from(`${json.length.toString(16)}\r\n`), json, Buffer.from('\r\n0\r\n\r\n')]),
          autoLength: false,
        });
        const after = await store.lastSequence();
        seen.push(`#${attempt}: answered ${response === 'timeout' ? 'timeout' : `${response.status} ${response.body.toString('utf8').slice(0, 120)}`}; log ${before} → ${after}`);
      }
      if (process.env.FUZZ_VERBOSE) console.log(seen.map((line) => `      ${line}`).join('\n'));
      expect(seen.filter((line) => !/answered 415 .*unsupported-media-type.*; log (\d+) → \1$/.test(line))).to.deep.equal([]);
    });
  });
});
