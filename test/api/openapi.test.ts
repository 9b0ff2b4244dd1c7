import { expect } from 'chai';
import { DOCUMENTED_ROUTES, openApiDocument, type OpenApiDocument, type OpenApiOperation } from '../../src/http/openapi/openapi-document.ts';
import { routeName } from '../../src/http/route-table/route-definition.ts';
import { RUN_STREAM_EVENTS } from '../../src/http/routes/run-event-stream.ts';
import { startTestService, type TestService } from '../support/test-service.ts';
import { API_TEST_ROLES, call, PUBLIC_BASE_URL } from './support/api-call.ts';
import { OpenApiResponseValidator, resolvePointer, unresolvedRefs } from './support/openapi-response-validator.ts';

/** Every operation, from the route table the app is mounted from (test/api/openapi-coverage.test.ts checks the live app against it). */
const ENDPOINTS = DOCUMENTED_ROUTES.map(routeName);
/** Operations without authentication. */
const PUBLIC_OPERATIONS = DOCUMENTED_ROUTES.filter((route) => route.access === 'public').map(routeName);
/** Operations that need more than a read key, with the scope they need. */
const SCOPED_OPERATIONS = Object.fromEntries(
  DOCUMENTED_ROUTES.filter((route) => route.access === 'write' || route.access === 'admin').map((route) => [routeName(route), route.access]),
) as Record<string, string>;
const METHODS = ['get', 'put', 'post', 'delete', 'options', 'head', 'patch', 'trace'];

function operationsOf(document: OpenApiDocument): { name: string; path: string; operation: OpenApiOperation }[] {
  return Object.entries(document.paths).flatMap(([path, item]) =>
    Object.entries(item as Record<string, OpenApiOperation>)
      .filter(([method]) => METHODS.includes(method))
      .map(([method, operation]) => ({ name: `${method.toUpperCase()} ${path}`, path, operation })),
  );
}

describe('OpenAPI document', function () {
  this.timeout(30_000);
  let svc: TestService;
  let served: OpenApiDocument;

  before(async () => {
    svc = await startTestService('api-openapi', { ROLES: API_TEST_ROLES, BRIEF_MAX_LENGTH: '321' });
    const response = await call(svc, 'GET', '/api/v1/openapi.json');
    expect(response.status).to.equal(200);
    expect(response.headers.get('content-type')).to.match(/^application\/json/);
    served = response.body as OpenApiDocument;
  });

  after(async () => {
    await svc?.stop();
  });

  it('is served without authentication as OpenAPI 3.1 with PUBLIC_BASE_URL as its server', () => {
    expect(served.openapi).to.match(/^3\.1\.\d+$/);
    expect(served.servers).to.deep.equal([{ url: PUBLIC_BASE_URL }]);
    expect(served.info.title).to.be.a('string').and.not.equal('');
    expect(served.info.version).to.be.a('string').and.not.equal('');
  });

  it("carries the deployment's brief limit in the create-run schema", () => {
    const schema = served.components.schemas.CreateRunRequest as { properties: { brief: { maxLength: number } } };
    expect(schema.properties.brief.maxLength).to.equal(321);
  });

  it('describes exactly the endpoints the service has', () => {
    expect(operationsOf(served).map((o) => o.name)).to.have.members(ENDPOINTS);
  });

  it('resolves every $ref', () => {
    expect(unresolvedRefs(served)).to.deep.equal([]);
    expect(unresolvedRefs(openApiDocument)).to.deep.equal([]);
  });

  it('gives every operation a unique operationId and documented responses with descriptions', () => {
    const ids = operationsOf(served).map((o) => o.operation.operationId);
    expect(new Set(ids).size).to.equal(ids.length);
    for (const { name, operation } of operationsOf(served)) {
      const statuses = Object.keys(operation.responses ?? {});
      expect(statuses, name).to.not.be.empty;
      expect(statuses.some((s) => /^2\d\d$/.test(s)), `${name} has no success response`).to.equal(true);
      for (const status of statuses) {
        expect(status, name).to.match(/^[1-5]\d\d$/);
        const response = operation.responses[status]!;
        const resolved = ('$ref' in response ? resolvePointer(served, response.$ref) : response) as { description?: string };
        expect(resolved.description, `${name} ${status}`).to.be.a('string').and.not.equal('');
      }
    }
  });

  it('documents every error response as application/problem+json, except the readiness probe', () => {
    for (const { name, operation } of operationsOf(served)) {
      if (name === 'GET /readyz') continue;
      if (!PUBLIC_OPERATIONS.includes(name)) expect(operation.responses, `${name} has no 401`).to.have.property('401');
      for (const [status, response] of Object.entries(operation.responses)) {
        if (Number(status) < 400) continue;
        const resolved = ('$ref' in response ? resolvePointer(served, response.$ref) : response) as { content?: Record<string, unknown> };
        expect(Object.keys(resolved.content ?? {}), `${name} ${status}`).to.deep.equal(['application/problem+json']);
      }
    }
  });

  it('declares every path parameter of a template, and requires bearer auth everywhere but the probes, itself and the public signing keys', () => {
    const publicOperations = PUBLIC_OPERATIONS;
    expect(served.components.securitySchemes.bearerAuth).to.include({ type: 'http', scheme: 'bearer' });
    expect(served.security).to.deep.equal([{ bearerAuth: [] }]);
    for (const { name, path, operation } of operationsOf(served)) {
      const declared = (operation.parameters ?? [])
        .map((p) => ('$ref' in p ? (resolvePointer(served, p.$ref) as { name: string; in: string; required?: boolean }) : p))
        .filter((p) => p.in === 'path');
      const templated = [...path.matchAll(/\{([^}]+)\}/g)].map((m) => m[1]);
      expect(declared.map((p) => p.name), name).to.have.members(templated);
      for (const p of declared) expect(p.required, `${name} ${p.name}`).to.equal(true);
      if (publicOperations.includes(name)) expect(operation.security, name).to.deep.equal([]);
      else expect(operation.security, name).to.equal(undefined);
    }
  });

  it('names the scope of every operation that needs more than read, and documents its 403', () => {
    for (const { name, operation } of operationsOf(served)) {
      expect(operation['x-required-scope'], name).to.equal(SCOPED_OPERATIONS[name]);
      if (SCOPED_OPERATIONS[name]) {
        // Approve has a second 403 (distinct-approver-required) besides the scope check.
        const forbidden = operation.operationId === 'approveAction' ? 'ApproveForbidden' : 'Forbidden';
        expect(operation.responses['403'], name).to.deep.equal({ $ref: `#/components/responses/${forbidden}` });
      } else {
        expect(operation.responses, name).to.not.have.property('403');
      }
    }
  });

  it('declares 503 and 429 wherever they can happen: 429 on every operation, 503 on every one that needs a key or reads a backing service (issue #15)', () => {
    for (const route of DOCUMENTED_ROUTES) {
      const operation = served.paths[route.path]![route.method]!;
      const name = routeName(route);
      expect(operation.responses, name).to.have.property('429');
      if (route.access !== 'public' || (route.backedBy ?? []).length > 0) expect(operation.responses, name).to.have.property('503');
    }
    for (const name of ['GET /api/v1/runs/{runId}', 'GET /api/v1/workspace/kill-switch', 'GET /api/v1/accounts/{projectId}/history', 'GET /api/v1/runs/{runId}/events']) {
      const [method, path] = name.split(' ') as [string, string];
      expect((served.paths[path] as Record<string, OpenApiOperation>)[method.toLowerCase()]!.responses['503'], name).to.deep.equal({ $ref: '#/components/responses/ServiceUnavailable' });
    }
    const unavailable = resolvePointer(served, '#/components/responses/ServiceUnavailable') as { headers: Record<string, unknown> };
    expect(unavailable.headers).to.have.property('Retry-After');
  });

  it('describes the run event stream: text/event-stream, 204 after the end, Last-Event-ID, each event name', () => {
    const stream = served.paths['/api/v1/runs/{runId}/events']!.get!;
    // 503: the stream reads the run from Postgres and follows the event log, and either can be down (issue #15).
    expect(Object.keys(stream.responses)).to.have.members(['200', '204', '401', '404', '422', '429', '500', '503']);
    const ok = stream.responses['200'] as { content: Record<string, { 'x-itemSchema'?: unknown }> };
    expect(Object.keys(ok.content)).to.deep.equal(['text/event-stream']);
    expect(ok.content['text/event-stream']!['x-itemSchema']).to.deep.equal({ $ref: '#/components/schemas/RunStreamMessage' });
    expect((stream.responses['204'] as { content?: unknown }).content).to.equal(undefined);
    const parameters = (stream.parameters ?? []).map((p) => ('$ref' in p ? (resolvePointer(served, p.$ref) as { name: string; in: string }) : p));
    expect(parameters.map((p) => `${p.in} ${p.name}`)).to.include.members(['header Last-Event-ID', 'query last_event_id', 'path runId']);
    for (const event of RUN_STREAM_EVENTS) expect(stream.description, event).to.include(`\`${event}\``);
    const validator = new OpenApiResponseValidator(served);
    const message = { id: '12', event: 'queued', data: { seq: 12, run_id: '0190b2a0-0000-7000-8000-000000000001', time: '2025-01-01T00:00:00.000Z', status: 'queued' } };
    expect(() => validator.assertComponent('RunStreamMessage', message)).to.not.throw();
    expect(() => validator.assertComponent('RunStreamMessage', { ...message, event: 'started' })).to.throw(/RunStreamMessage/);
    expect(() => validator.assertComponent('RunStreamMessage', { ...message, event: 'finished' })).to.throw(/RunStreamMessage/);
  });

  it('takes exactly one of target_cpa and target_roas_pct in the campaign target body', () => {
    const target = served.paths['/api/v1/accounts/{projectId}/campaigns/{campaignId}/target']!.post!;
    const validate = new OpenApiResponseValidator(served).compileSchema(target.requestBody!.content['application/json']!.schema);
    expect(validate({ target_cpa: 12.5, reason: 'r' })).to.equal(true);
    expect(validate({ target_roas_pct: 300, reason: 'r', auto_apply: true })).to.equal(true);
    expect(validate({ target_cpa: 12.5, target_roas_pct: 300, reason: 'r' })).to.equal(false);
    expect(validate({ reason: 'r' })).to.equal(false);
    expect(validate({ target_cpa: 12.5 })).to.equal(false);
    expect(validate({ target_cpa: 0, reason: 'r' })).to.equal(false);
    expect(validate({ target_cpa: 12.5, reason: 'r', extra: 1 })).to.equal(false);
  });

  it('refuses unknown members in the create-run body', () => {
    const createRun = served.paths['/api/v1/runs']!.post!;
    const schema = createRun.requestBody!.content['application/json']!.schema;
    expect(schema).to.deep.equal({ $ref: '#/components/schemas/CreateRunRequest' });
    expect(served.components.schemas.CreateRunRequest).to.include({ additionalProperties: false });
    const validator = new OpenApiResponseValidator(served);
    const validate = validator.compileSchema(schema);
    expect(validate({ brief: 'Hello.', project_id: 'p1', auto_apply: true })).to.equal(true);
    expect(validate({ brief: 'Hello.', project_id: 'p1', extra: 1 })).to.equal(false);
    expect(validate({ brief: '   ', project_id: 'p1' })).to.equal(false);
    expect(validate({ brief: 'b'.repeat(322), project_id: 'p1' })).to.equal(false);
  });

  it('compiles every component schema with ajv (JSON Schema 2020-12)', () => {
    const validator = new OpenApiResponseValidator(served);
    expect(validator.compileAllComponents()).to.include.members([
      'Run',
      'RunCreated',
      'RunResult',
      'Action',
      'ToolCall',
      'RunError',
      'Account',
      'AccountList',
      'Problem',
      'CreateRunRequest',
      'Campaign',
      'CampaignList',
      'BiddingStrategy',
      'SetTargetRequest',
      'TargetAction',
      'TargetConflictProblem',
      'Approval',
      'ApprovalList',
      'ApproveRequest',
      'RejectRequest',
      'ActionNotInQueueProblem',
      'InsufficientScopeProblem',
      'HistoryEntry',
      'HistoryList',
      'KillSwitch',
      'KillSwitchRequest',
      'RunStreamMessage',
    ]);
  });

  describe('as a response validator', () => {
    const validator = new OpenApiResponseValidator();
    const run = {
      id: '0190b2a0-0000-7000-8000-000000000001',
      object: 'run',
      status: 'succeeded',
      project_id: '0190b2a0-0000-7000-8000-000000000002',
      auto_apply: false,
      scope: 'write',
      created_at: '2025-01-01T00:00:00.000Z',
      started_at: '2025-01-01T00:00:01.000Z',
      finished_at: '2025-01-01T00:01:00.000Z',
      poll_url: 'http://api.test/api/v1/runs/0190b2a0-0000-7000-8000-000000000001',
      duration_ms: 59000,
      agent: { kind: 'rules', model: 'rules-v1' },
      result: {
        text: 'Done.',
        truncated: false,
        actions: [
          {
            id: 'a1',
            kind: 'add_negative_keywords',
            summary: 'Add 3 negative keywords',
            risk_tier: 'review',
            disposition: 'queued',
            policy_reasons: ['needs review'],
            approvals_url: 'http://api.test/console/accounts/p/approvals',
          },
        ],
        tool_calls: [{ name: 'get_campaigns', input: {}, ok: true }],
        usage: { input_tokens: 1, output_tokens: 2, steps: 3 },
      },
      error: null,
    };
    const headers = (extra: Record<string, string> = {}) =>
      new Headers({ 'content-type': 'application/json; charset=utf-8', 'x-request-id': 'req-1', 'cache-control': 'no-store', ...extra });
    const check = (body: unknown, status = 200, extra: Record<string, string> = {}) => () =>
      validator.assertMatches('GET', '/api/v1/runs/{runId}', { status, headers: headers(extra) }, body);

    it('accepts a well-formed run', () => {
      expect(check(run)).to.not.throw();
    });

    it('rejects an unknown status, an extra member, a missing member, a bad action and an error on a succeeded run', () => {
      expect(check({ ...run, status: 'done' })).to.throw(/schema/);
      expect(check({ ...run, extra: true })).to.throw(/schema/);
      const { duration_ms: _omitted, ...withoutDuration } = run;
      expect(check(withoutDuration)).to.throw(/schema/);
      expect(check({ ...run, result: { ...run.result, secret: 'x' } })).to.throw(/schema/);
      expect(check({ ...run, result: { ...run.result, actions: [{ ...run.result.actions[0], risk_tier: 'yolo' }] } })).to.throw(/schema/);
      expect(check({ ...run, error: { code: 'internal', message: 'x' } })).to.throw(/schema/);
    });

    it('holds the new resources to their shapes: params by kind, event data by type, strategy targets, problem members', () => {
      const valid = (name: string, value: unknown) => validator.componentValidator(name)(value);
      const approval = {
        id: '0190b2a0-0000-7000-8000-000000000003',
        object: 'action',
        kind: 'set_target_cpa',
        summary: 'Change the target CPA',
        reason: 'r',
        params: { campaign_id: '123', target_cpa: 12.5 },
        risk_tier: 'safe',
        disposition: 'queued',
        policy_reasons: [],
        approvals_url: 'http://api.test/console/accounts/p/approvals',
        status: 'approved',
        status_reason: null,
        run_id: null,
        project_id: 'p',
        created_at: '2025-01-01T00:00:00.000Z',
        updated_at: '2025-01-01T00:00:01.000Z',
        version: 'v1-q5C0Ej3Yc0Hy2ZqkQ9m1Vg',
      };
      expect(valid('Approval', approval)).to.equal(true);
      const { version: _version, ...withoutVersion } = approval;
      expect(valid('Approval', withoutVersion), 'every action carries its version').to.equal(false);
      expect(valid('Approval', { ...approval, params: { campaign_id: '123', target_roas_pct: 300 } })).to.equal(false);
      expect(valid('Approval', { ...approval, status: 'blocked' })).to.equal(false);
      expect(valid('Approval', { ...approval, status: 'done' })).to.equal(false);
      const entry = {
        seq: 7,
        id: '0190b2a0-0000-7000-8000-000000000004',
        type: 'ActionApproved',
        version: 1,
        time: '2025-01-01T00:00:00.000Z',
        workspace_id: 'w',
        account_id: 'p',
        aggregate: { type: 'action', id: 'a' },
        actor: { kind: 'api_key', id: 'k' },
        correlation_id: 'c',
        data: { note: '' },
        prev_hash: '0'.repeat(64),
        hash: 'f'.repeat(64),
      };
      expect(valid('HistoryEntry', entry)).to.equal(true);
      expect(valid('HistoryEntry', { ...entry, data: { reason: 'x' } })).to.equal(false);
      expect(valid('HistoryEntry', { ...entry, aggregate: { type: 'run', id: 'a' } })).to.equal(false);
      expect(valid('HistoryEntry', { ...entry, type: 'SomethingHappened' })).to.equal(false);
      expect(valid('HistoryEntry', { ...entry, version: 9 })).to.equal(false);
      const { seq: _seq, ...withoutSeq } = entry;
      expect(valid('HistoryEntry', withoutSeq)).to.equal(false);
      const strategy = { type: 'maximize_conversions', target_cpa: 20, target_roas_pct: null, portfolio: null };
      expect(valid('BiddingStrategy', strategy)).to.equal(true);
      expect(valid('BiddingStrategy', { ...strategy, target_roas_pct: 300 })).to.equal(false);
      expect(valid('BiddingStrategy', { ...strategy, type: 'manual_cpc' })).to.equal(false);
      const mismatch = {
        type: 'http://api.test/problems/strategy-mismatch',
        title: 't',
        status: 409,
        instance: '/x',
        request_id: 'r',
        campaign_id: '1',
        bidding_strategy: 'manual_cpc',
        target_cpa: null,
        target_roas_pct: null,
        expected_field: null,
      };
      expect(valid('TargetConflictProblem', mismatch)).to.equal(true);
      const { expected_field: _expected, ...withoutExpected } = mismatch;
      expect(valid('TargetConflictProblem', withoutExpected)).to.equal(false);
      expect(valid('TargetConflictProblem', { ...withoutExpected, type: 'http://api.test/problems/account-not-connected' })).to.equal(true);
      const killSwitch = { object: 'kill_switch', workspace_id: 'w', engaged: true, reason: '', since: null };
      expect(valid('KillSwitch', killSwitch)).to.equal(false);
      expect(valid('KillSwitch', { ...killSwitch, since: '2025-01-01T00:00:00.000Z' })).to.equal(true);
    });

    it('rejects an undocumented status, a missing required header and an undocumented media type', () => {
      expect(check(run, 201)).to.throw(/not documented/);
      expect(() =>
        validator.assertMatches('GET', '/api/v1/runs/{runId}', { status: 200, headers: new Headers({ 'content-type': 'application/json' }) }, run),
      ).to.throw(/X-Request-Id/);
      expect(check(run, 200, { 'content-type': 'text/html' })).to.throw(/media type/);
      expect(check(run, 304)).to.throw(/without a body|ETag/);
    });
  });
});
