import type { Router } from '@koa/router';
import { expect } from 'chai';
import { readdirSync, readFileSync } from 'node:fs';
import { fileURLToPath, pathToFileURL } from 'node:url';
import { createLogger } from '../../src/log/logger.ts';
import { createHealthRouter } from '../../src/http/health-routes.ts';
import { openApiDocument, type OpenApiOperation } from '../../src/http/openapi/openapi-document.ts';
import { RUN_STREAM_EVENTS } from '../../src/http/routes/run-event-stream.ts';
import { eventually } from '../support/eventually.ts';
import { isolatedConfig } from '../support/isolation.ts';
import { startTestService, type TestService, type TestTenant } from '../support/test-service.ts';
import { call as validatedCall, expectProblem, templateOf, type ApiResult, type CallOptions } from './support/api-call.ts';
import { openApiValidator } from './support/openapi-response-validator.ts';

/**
 * Every operation of the OpenAPI document, called against a service running every role
 * (so the rules agent and the apply worker run), in success and in its main error cases.
 * Each response goes through the document's validator (`call`), so a shape, status or
 * header the document does not describe fails here. Also checks that the document has
 * exactly the routes the app registers.
 */

const ROOT = fileURLToPath(new URL('../../', import.meta.url));
const METHODS = ['get', 'put', 'post', 'delete', 'options', 'head', 'patch', 'trace'];
const WASTE_BRIEF = 'Find wasted spend on search terms without conversions and add negative keywords.';
const MISSING_ID = '00000000-0000-4000-8000-000000000000';

function documentedOperations(): string[] {
  return Object.entries(openApiDocument.paths).flatMap(([path, item]) =>
    Object.keys(item)
      .filter((method) => METHODS.includes(method))
      .map((method) => `${method.toUpperCase()} ${path}`),
  );
}

function operationOf(name: string): OpenApiOperation {
  const [method, path] = name.split(' ') as [string, string];
  return (openApiDocument.paths as Record<string, Record<string, OpenApiOperation>>)[path]![method.toLowerCase()]!;
}

/** `METHOD /path/{param}` of every route of a router (HEAD, which koa adds to every GET, left out). */
function routesOf(router: Router): string[] {
  return router.stack.flatMap((layer) =>
    layer.methods.filter((method) => method !== 'HEAD').map((method) => `${method} ${String(layer.path).replace(/:(\w+)/g, '{$1}')}`),
  );
}

/** Names of the router factories service.ts gives createHttpApp. */
function serviceRouterFactories(): string[] {
  const source = readFileSync(`${ROOT}src/runtime/service.ts`, 'utf8');
  // The API app's list: the longest (a process without the http role mounts only the metrics router).
  const lists = [...source.matchAll(/routers:\s*\[([\s\S]*?)\]/g)].map((list) => [...list[1]!.matchAll(/(\w+)\(/g)].map((m) => m[1]!));
  expect(lists, 'service.ts has no `routers: [...]`').to.not.be.empty;
  return lists.reduce((longest, list) => (list.length > longest.length ? list : longest));
}

/** Every exported `…Router` factory of the route modules, by name. */
async function routerFactories(): Promise<Map<string, (...args: unknown[]) => Router>> {
  const files = [
    ...readdirSync(`${ROOT}src/http/routes`).map((file) => `src/http/routes/${file}`),
    ...readdirSync(`${ROOT}src/http/openapi`).map((file) => `src/http/openapi/${file}`),
  ].filter((file) => file.endsWith('.ts'));
  const factories = new Map<string, (...args: unknown[]) => Router>();
  for (const file of files) {
    const module = (await import(pathToFileURL(`${ROOT}${file}`).href)) as Record<string, unknown>;
    for (const [name, value] of Object.entries(module)) {
      if (typeof value === 'function' && /Router$/.test(name)) factories.set(name, value as (...args: unknown[]) => Router);
    }
  }
  return factories;
}

interface SseMessage {
  id: string;
  event: string;
  data: any;
}

/** Parses an SSE body into its events (comments and the `retry:` preamble left out). */
function parseSse(text: string): SseMessage[] {
  return text
    .split('\n\n')
    .map((block) => block.split('\n').filter((line) => line !== '' && !line.startsWith(':')))
    .filter((lines) => lines.some((line) => line.startsWith('event:')))
    .map((lines) => {
      const field = (name: string) => lines.find((line) => line.startsWith(`${name}: `))?.slice(name.length + 2) ?? '';
      return { id: field('id'), event: field('event'), data: JSON.parse(field('data')) as unknown };
    });
}

describe('OpenAPI coverage: every route, called live and validated against the document', function () {
  this.timeout(60_000);
  let svc: TestService;
  let tenant: TestTenant;
  let other: TestTenant;
  let account: string;
  let runId: string;
  let run: any;
  /** `METHOD /template → status` of every validated response. */
  const seen = new Set<string>();

  const call = async (method: string, path: string, options: CallOptions = {}): Promise<ApiResult> => {
    const result = await validatedCall(svc, method, path, options);
    seen.add(`${method.toUpperCase()} ${templateOf(path)} → ${result.status}`);
    return result;
  };

  before(async () => {
    svc = await startTestService('api-openapi-coverage');
    [tenant, other] = await Promise.all([svc.tenant('coverage-a'), svc.tenant('coverage-b')]);
    account = tenant.accounts.sandbox;
    const created = await call('POST', '/api/v1/runs', {
      key: tenant.keys.write,
      body: { brief: WASTE_BRIEF, project_id: account, auto_apply: true },
    });
    expect(created.status, created.text).to.equal(202);
    runId = created.body.id;
    await eventually(
      async () => {
        const polled = await call('GET', `/api/v1/runs/${runId}`, { key: tenant.keys.read });
        expect(polled.status).to.equal(200);
        run = polled.body;
        expect(run.status).to.be.oneOf(['succeeded', 'failed', 'canceled']);
      },
      30_000,
      100,
    );
    expect(run.status, JSON.stringify(run.error)).to.equal('succeeded');
    expect(run.result.actions, 'the waste run proposed actions').to.not.be.empty;
  });

  after(async () => {
    await svc?.stop();
  });

  describe('the routes the app registers', () => {
    it('are exactly the operations of the document', async () => {
      const config = isolatedConfig('openapi-routes');
      // Factories only keep what they are given for later requests, so one stub serves as the
      // ApiContext of the feature routers, the Config of openApiRouter and the registry of metricsRouter.
      const stub = { ...config, config, logger: createLogger('silent'), keys: {}, contentType: 'text/plain', metrics: async () => '' };
      const factories = await routerFactories();
      const used = serviceRouterFactories();
      expect(used, 'routers of service.ts').to.include.members(['runsRouter', 'openApiRouter']);
      const routers = used.map((name) => {
        const factory = factories.get(name);
        expect(factory, `${name} (used by service.ts) is not exported by a module of src/http/routes or src/http/openapi`).to.be.a('function');
        return factory!(stub, new AbortController().signal);
      });
      // createHttpApp always adds the health router in front of the feature routers.
      routers.push(createHealthRouter([], createLogger('silent')));
      const registered = routers.flatMap(routesOf);
      expect(new Set(registered).size, 'a route is registered twice').to.equal(registered.length);
      expect(documentedOperations()).to.have.members(registered);
      // A router module that exists but is not wired into the service would be dead code.
      const unused = [...factories.keys()].filter((name) => !used.includes(name));
      expect(unused, 'router factories service.ts does not use').to.deep.equal([]);
    });
  });

  describe('probes and the document', () => {
    it('validates /healthz, /readyz, /metrics, /api/v1/openapi.json and /api/v1/event-signing-keys', async () => {
      expect((await call('GET', '/healthz')).status).to.equal(200);
      expect((await call('GET', '/readyz')).status).to.equal(200);
      expect((await call('GET', '/api/v1/openapi.json')).status).to.equal(200);
      const keys = await call('GET', '/api/v1/event-signing-keys');
      expect(keys.status).to.equal(200);
      expect(keys.body.data.map((k: { status: string }) => k.status)).to.deep.equal(['current']);
      const metrics = await call('GET', '/metrics');
      expect(metrics.status).to.equal(200);
      expect(metrics.text).to.match(/^# HELP /m);
    });
  });

  describe('runs', () => {
    it('validates list, cancel and create errors', async () => {
      expect((await call('GET', '/api/v1/accounts', { key: tenant.keys.read })).body.data).to.have.length(3);
      expectProblem(await call('GET', `/api/v1/runs/${MISSING_ID}`, { key: tenant.keys.read }), 404, 'run-not-found');
      expectProblem(await call('DELETE', `/api/v1/runs/${runId}`, { key: tenant.keys.write }), 409, 'run-already-finished');
      expectProblem(await call('POST', '/api/v1/runs', { key: tenant.keys.write, body: { brief: 'x', project_id: account, extra: 1 } }), 422, 'validation-error');
    });
  });

  describe('GET /api/v1/runs/{runId}/events', () => {
    let messages: SseMessage[] = [];

    it("streams the finished run's events, each matching RunStreamMessage, then closes", async () => {
      const result = await call('GET', `/api/v1/runs/${runId}/events`, { key: tenant.keys.read });
      expect(result.status).to.equal(200);
      expect(result.headers.get('content-type')).to.match(/^text\/event-stream/);
      messages = parseSse(result.text);
      for (const message of messages) openApiValidator().assertComponent('RunStreamMessage', message, `SSE ${message.event}`);
      const names = messages.map((m) => m.event);
      expect(names[0]).to.equal('queued');
      expect(names[1]).to.equal('started');
      expect(names[names.length - 1]).to.equal('succeeded');
      expect(names.filter((n) => n === 'tool_called')).to.have.length(run.result.tool_calls.length);
      expect(names.filter((n) => n === 'action_proposed')).to.have.length(run.result.actions.length);
      for (const name of names) expect(RUN_STREAM_EVENTS).to.include(name);
      for (const message of messages) expect(String(message.data.seq)).to.equal(message.id);
      const proposed = messages.filter((m) => m.event === 'action_proposed').map((m) => m.data.action);
      expect(proposed).to.deep.equal(run.result.actions);
    });

    it('resumes after Last-Event-ID or ?last_event_id=, and answers 204 after the end', async () => {
      expect(messages.length).to.be.greaterThan(3);
      const byHeader = await call('GET', `/api/v1/runs/${runId}/events`, { key: tenant.keys.read, headers: { 'Last-Event-ID': messages[2]!.id } });
      expect(byHeader.status).to.equal(200);
      expect(parseSse(byHeader.text).map((m) => m.id)).to.deep.equal(messages.slice(3).map((m) => m.id));
      const byQuery = await call('GET', `/api/v1/runs/${runId}/events?last_event_id=${messages[1]!.id}`, { key: tenant.keys.read });
      expect(parseSse(byQuery.text).map((m) => m.id)).to.deep.equal(messages.slice(2).map((m) => m.id));
      const last = messages[messages.length - 1]!.id;
      const ended = await call('GET', `/api/v1/runs/${runId}/events`, { key: tenant.keys.read, headers: { 'Last-Event-ID': last } });
      expect(ended.status).to.equal(204);
      expect(ended.text).to.equal('');
      expect((await call('GET', `/api/v1/runs/${runId}/events?last_event_id=${last}`, { key: tenant.keys.read })).status).to.equal(204);
    });

    it('answers 404 for an unknown, a non-UUID or a foreign run, and 401 without a key', async () => {
      expectProblem(await call('GET', `/api/v1/runs/${MISSING_ID}/events`, { key: tenant.keys.read }), 404, 'run-not-found');
      expectProblem(await call('GET', '/api/v1/runs/nope/events', { key: tenant.keys.read }), 404, 'run-not-found');
      expectProblem(await call('GET', `/api/v1/runs/${runId}/events`, { key: other.keys.read }), 404, 'run-not-found');
      expectProblem(await call('GET', `/api/v1/runs/${runId}/events`), 401, 'unauthorized');
    });
  });

  describe('campaigns', () => {
    let campaigns: any[] = [];
    const find = (predicate: (strategy: any, campaign: any) => boolean) => {
      const found = campaigns.find((c) => predicate(c.bidding_strategy, c));
      expect(found, JSON.stringify(campaigns)).to.not.equal(undefined);
      return found;
    };
    const cpaCampaign = () => find((s, c) => c.status === 'enabled' && s.type === 'maximize_conversions' && s.target_cpa !== null && s.portfolio === null);
    const roasCampaign = () => find((s) => s.type === 'maximize_conversion_value' && s.target_roas_pct !== null && s.portfolio === null);
    const manualCampaign = () => find((s) => s.type === 'manual_cpc');
    const targetPath = (campaignId: string, projectId = account) => `/api/v1/accounts/${projectId}/campaigns/${campaignId}/target`;

    it('lists the campaigns of the account, for a read key', async () => {
      const listed = await call('GET', `/api/v1/accounts/${account}/campaigns`, { key: tenant.keys.read });
      expect(listed.status).to.equal(200);
      campaigns = listed.body.data;
      expect(campaigns).to.not.be.empty;
      expect(campaigns.some((c) => c.bidding_strategy.portfolio !== null)).to.equal(true);
    });

    it('answers 409 account-not-connected, 404 for unknown and foreign accounts, 401 without a key', async () => {
      expectProblem(await call('GET', `/api/v1/accounts/${tenant.accounts.disconnected}/campaigns`, { key: tenant.keys.read }), 409, 'account-not-connected');
      expectProblem(await call('GET', `/api/v1/accounts/${MISSING_ID}/campaigns`, { key: tenant.keys.read }), 404, 'account-not-found');
      expectProblem(await call('GET', `/api/v1/accounts/${other.accounts.sandbox}/campaigns`, { key: tenant.keys.read }), 404, 'account-not-found');
      expectProblem(await call('GET', `/api/v1/accounts/${account}/campaigns`), 401, 'unauthorized');
    });

    it('proposes a target CPA and a target ROAS (200 action)', async () => {
      const cpa = cpaCampaign();
      const proposed = await call('POST', targetPath(cpa.id), {
        key: tenant.keys.write,
        body: { target_cpa: Math.round(cpa.bidding_strategy.target_cpa * 98) / 100, reason: 'coverage' },
      });
      expect(proposed.status, proposed.text).to.equal(200);
      expect(proposed.body).to.include({ object: 'action', kind: 'set_target_cpa', status: 'queued', project_id: account, campaign_id: cpa.id });
      const roas = roasCampaign();
      const roasProposed = await call('POST', targetPath(roas.id), {
        key: tenant.keys.write,
        body: { target_roas_pct: roas.bidding_strategy.target_roas_pct, reason: 'coverage', auto_apply: false },
      });
      expect(roasProposed.body).to.include({ kind: 'set_target_roas', status: roasProposed.body.disposition });
    });

    it('refuses a target that does not fit the strategy (409 strategy-mismatch with its members)', async () => {
      const cpa = cpaCampaign();
      const wrongField = await call('POST', targetPath(cpa.id), { key: tenant.keys.write, body: { target_roas_pct: 300, reason: 'mismatch' } });
      expectProblem(wrongField, 409, 'strategy-mismatch');
      expect(wrongField.body).to.include({
        campaign_id: cpa.id,
        bidding_strategy: 'maximize_conversions',
        target_cpa: cpa.bidding_strategy.target_cpa,
        target_roas_pct: null,
        expected_field: 'target_cpa',
      });
      const manual = await call('POST', targetPath(manualCampaign().id), { key: tenant.keys.write, body: { target_cpa: 10, reason: 'mismatch' } });
      expectProblem(manual, 409, 'strategy-mismatch');
      expect(manual.body).to.include({ bidding_strategy: 'manual_cpc', expected_field: null });
    });

    it('answers 409 account-not-connected, 403 to a read key, 404 for unknown campaigns and accounts', async () => {
      const body = { target_cpa: 10, reason: 'coverage' };
      const campaignId = cpaCampaign().id;
      expectProblem(await call('POST', targetPath(campaignId, tenant.accounts.disconnected), { key: tenant.keys.write, body }), 409, 'account-not-connected');
      const forbidden = await call('POST', targetPath(campaignId), { key: tenant.keys.read, body });
      expectProblem(forbidden, 403, 'insufficient-scope');
      expect(forbidden.body).to.include({ required_scope: 'write', key_scope: 'read' });
      expectProblem(await call('POST', targetPath('999999'), { key: tenant.keys.write, body }), 404, 'campaign-not-found');
      expectProblem(await call('POST', targetPath('not a campaign!'), { key: tenant.keys.write, body }), 404, 'campaign-not-found');
      expectProblem(await call('POST', targetPath(campaignId, MISSING_ID), { key: tenant.keys.write, body }), 404, 'account-not-found');
      expectProblem(await call('POST', targetPath(campaignId), { body }), 401, 'unauthorized');
    });

    it('refuses both targets, neither, unknown members and non-JSON bodies (422, 400, 415)', async () => {
      const path = targetPath(cpaCampaign().id);
      const key = tenant.keys.write;
      for (const body of [{ target_cpa: 10, target_roas_pct: 300, reason: 'both' }, { reason: 'neither' }, { target_cpa: 10 }, { target_cpa: 10, reason: 'x', extra: 1 }]) {
        const refused = await call('POST', path, { key, body });
        expectProblem(refused, 422, 'validation-error');
      }
      expectProblem(await call('POST', path, { key, body: '{"target_cpa":' }), 400, 'malformed-json');
      expectProblem(await call('POST', path, { key, body: 'target_cpa=10', headers: { 'content-type': 'text/plain' } }), 415, 'unsupported-media-type');
    });
  });

  describe('approvals', () => {
    const approvals = (projectId = account) => `/api/v1/accounts/${projectId}/approvals`;
    /**
     * Queued actions proposed through the target endpoint: the first on the enabled target-CPA
     * campaign (so, once approved, the apply worker applies it and it never comes back to the
     * queue), the others on the target-ROAS campaign (which may be paused: an approved change
     * of a paused campaign is returned to the queue, where it may be approved again).
     */
    const queued: any[] = [];
    let blocked: any;

    before(async () => {
      const listed = await call('GET', `/api/v1/accounts/${account}/campaigns`, { key: tenant.keys.read });
      const roas = listed.body.data.find((c: any) => c.bidding_strategy.type === 'maximize_conversion_value' && c.bidding_strategy.target_roas_pct !== null);
      const cpa = listed.body.data.find(
        (c: any) => c.status === 'enabled' && c.bidding_strategy.type === 'maximize_conversions' && c.bidding_strategy.target_cpa !== null && c.bidding_strategy.portfolio === null,
      );
      const cpaProposed = await call('POST', `/api/v1/accounts/${account}/campaigns/${cpa.id}/target`, {
        key: tenant.keys.write,
        body: { target_cpa: Math.round(cpa.bidding_strategy.target_cpa * 97) / 100, reason: 'cpa 0.97' },
      });
      expect(cpaProposed.body.status, cpaProposed.text).to.equal('queued');
      queued.push(cpaProposed.body);
      for (const factor of [0.98, 1.02]) {
        const proposed = await call('POST', `/api/v1/accounts/${account}/campaigns/${roas.id}/target`, {
          key: tenant.keys.write,
          body: { target_roas_pct: Math.round(roas.bidding_strategy.target_roas_pct * factor * 10) / 10, reason: `roas ${factor}` },
        });
        expect(proposed.body.status, proposed.text).to.equal('queued');
        queued.push(proposed.body);
      }
      const far = await call('POST', `/api/v1/accounts/${account}/campaigns/${cpa.id}/target`, {
        key: tenant.keys.write,
        body: { target_cpa: Math.round(cpa.bidding_strategy.target_cpa * 300) / 100, reason: 'far too much' },
      });
      blocked = far.body;
      expect(blocked.status, far.text).to.equal('blocked');
    });

    it('lists every action, filtered by run_id and status, and pages with next_cursor', async () => {
      const all = await call('GET', `${approvals()}?limit=200`, { key: tenant.keys.read });
      expect(all.status).to.equal(200);
      const ids = all.body.data.map((a: any) => a.id);
      expect(ids).to.include.members([...run.result.actions.map((a: any) => a.id), ...queued.map((a) => a.id), blocked.id]);
      const byRun = await call('GET', `${approvals()}?run_id=${runId}`, { key: tenant.keys.read });
      expect(byRun.body.data.map((a: any) => a.id)).to.have.members(run.result.actions.map((a: any) => a.id));
      const onlyQueued = await call('GET', `${approvals()}?status=queued`, { key: tenant.keys.read });
      expect(onlyQueued.body.data.every((a: any) => a.status === 'queued')).to.equal(true);
      const first = await call('GET', `${approvals()}?limit=1`, { key: tenant.keys.read });
      expect(first.body.data).to.have.length(1);
      expect(first.body.next_cursor).to.be.a('string');
      const second = await call('GET', `${approvals()}?limit=1&cursor=${first.body.next_cursor}`, { key: tenant.keys.read });
      expect(second.body.data[0].id).to.equal(ids[1]);
    });

    for (const query of ['status=bogus', 'limit=0', 'limit=201', 'cursor=-1', 'run_id=not-a-run']) {
      it(`refuses ?${query} (422 validation-error)`, async () => {
        expectProblem(await call('GET', `${approvals()}?${query}`, { key: tenant.keys.read }), 422, 'validation-error');
      });
    }

    it('answers 404 for unknown and foreign accounts and 401 without a key', async () => {
      expectProblem(await call('GET', approvals(MISSING_ID), { key: tenant.keys.read }), 404, 'account-not-found');
      expectProblem(await call('GET', approvals(other.accounts.sandbox), { key: tenant.keys.read }), 404, 'account-not-found');
      expectProblem(await call('GET', approvals()), 401, 'unauthorized');
    });

    it('approves with a note (200), and a second approve answers 409 action-not-in-queue', async () => {
      const approved = await call('POST', `${approvals()}/${queued[0].id}/approve`, { key: tenant.keys.write, body: { note: 'looks right' } });
      expect(approved.status, approved.text).to.equal(200);
      expect(approved.body).to.include({ object: 'action', id: queued[0].id, project_id: account, run_id: null });
      expect(approved.body.status).to.be.oneOf(['approved', 'applying', 'applied']);
      const again = await call('POST', `${approvals()}/${queued[0].id}/approve`, { key: tenant.keys.write });
      expectProblem(again, 409, 'action-not-in-queue');
      expect(again.body.action_status).to.be.oneOf(['approved', 'applying', 'applied']);
      const onBlocked = await call('POST', `${approvals()}/${blocked.id}/approve`, { key: tenant.keys.write });
      expectProblem(onBlocked, 409, 'action-not-in-queue');
      expect(onBlocked.body.action_status).to.equal('blocked');
    });

    it('approves without a body (200)', async () => {
      const approved = await call('POST', `${approvals()}/${queued[1].id}/approve`, { key: tenant.keys.write });
      expect(approved.status, approved.text).to.equal(200);
      expect(approved.body.id).to.equal(queued[1].id);
    });

    it('answers 403 to a read key, 404 for unknown actions and accounts, 422/400 for bad bodies', async () => {
      const path = `${approvals()}/${queued[2].id}/approve`;
      const forbidden = await call('POST', path, { key: tenant.keys.read });
      expectProblem(forbidden, 403, 'insufficient-scope');
      expectProblem(await call('POST', `${approvals()}/${MISSING_ID}/approve`, { key: tenant.keys.write }), 404, 'action-not-found');
      expectProblem(await call('POST', `${approvals()}/not-an-action/approve`, { key: tenant.keys.write }), 404, 'action-not-found');
      expectProblem(await call('POST', `${approvals(MISSING_ID)}/${queued[2].id}/approve`, { key: tenant.keys.write }), 404, 'account-not-found');
      expectProblem(await call('POST', `${approvals(other.accounts.sandbox)}/${queued[2].id}/approve`, { key: other.keys.write }), 404, 'action-not-found');
      expectProblem(await call('POST', path, { key: tenant.keys.write, body: { note: 5 } }), 422, 'validation-error');
      expectProblem(await call('POST', path, { key: tenant.keys.write, body: { extra: true } }), 422, 'validation-error');
      expectProblem(await call('POST', path, { key: tenant.keys.write, body: '{' }), 400, 'malformed-json');
      expectProblem(await call('POST', path), 401, 'unauthorized');
    });

    it('rejects with a reason (200), and a second reject answers 409', async () => {
      const path = `${approvals()}/${queued[2].id}/reject`;
      expectProblem(await call('POST', path, { key: tenant.keys.write }), 422, 'validation-error');
      expectProblem(await call('POST', path, { key: tenant.keys.write, body: { reason: '   ' } }), 422, 'validation-error');
      expectProblem(await call('POST', path, { key: tenant.keys.read, body: { reason: 'no' } }), 403, 'insufficient-scope');
      const rejected = await call('POST', path, { key: tenant.keys.write, body: { reason: 'not now' } });
      expect(rejected.status, rejected.text).to.equal(200);
      expect(rejected.body).to.include({ id: queued[2].id, status: 'rejected', status_reason: 'not now' });
      const again = await call('POST', path, { key: tenant.keys.write, body: { reason: 'again' } });
      expectProblem(again, 409, 'action-not-in-queue');
      expect(again.body.action_status).to.equal('rejected');
      const approveRejected = await call('POST', `${approvals()}/${queued[2].id}/approve`, { key: tenant.keys.write });
      expectProblem(approveRejected, 409, 'action-not-in-queue');
      expect(approveRejected.body.action_status).to.equal('rejected');
      expectProblem(await call('POST', `${approvals()}/${MISSING_ID}/reject`, { key: tenant.keys.write, body: { reason: 'x' } }), 404, 'action-not-found');
    });
  });

  describe('history', () => {
    const history = (projectId = account) => `/api/v1/accounts/${projectId}/history`;

    it("lists the account's events with seq, filtered by run_id and paged by cursor", async () => {
      const all = await call('GET', `${history()}?limit=500`, { key: tenant.keys.read });
      expect(all.status).to.equal(200);
      const seqs = all.body.data.map((e: any) => e.seq);
      expect(seqs).to.deep.equal([...seqs].sort((a: number, b: number) => a - b));
      const types = new Set(all.body.data.map((e: any) => e.type));
      for (const type of ['AccountCreated', 'RunQueued', 'RunStarted', 'ToolCalled', 'ActionProposed', 'RunSucceeded', 'ActionApproved', 'ActionRejected']) {
        expect(types, type).to.include(type);
      }
      const byRun = await call('GET', `${history()}?run_id=${runId}`, { key: tenant.keys.read });
      expect(byRun.body.data).to.not.be.empty;
      expect(byRun.body.data.every((e: any) => e.correlation_id === runId)).to.equal(true);
      const toolCall = byRun.body.data.find((e: any) => e.type === 'ToolCalled');
      expect(toolCall.data).to.have.property('output');
      const first = await call('GET', `${history()}?limit=2`, { key: tenant.keys.read });
      expect(first.body.data).to.have.length(2);
      expect(first.body.next_cursor).to.equal(String(first.body.data[1].seq));
      const second = await call('GET', `${history()}?limit=2&cursor=${first.body.next_cursor}`, { key: tenant.keys.read });
      expect(second.body.data.map((e: any) => e.seq)).to.deep.equal(seqs.slice(2, 4));
    });

    for (const query of ['limit=0', 'limit=501', 'cursor=abc', 'cursor=-1', 'run_id=not-a-run']) {
      it(`refuses ?${query} (422 validation-error)`, async () => {
        expectProblem(await call('GET', `${history()}?${query}`, { key: tenant.keys.read }), 422, 'validation-error');
      });
    }

    it('answers 404 for unknown and foreign accounts and 401 without a key', async () => {
      expectProblem(await call('GET', history(MISSING_ID), { key: tenant.keys.read }), 404, 'account-not-found');
      expectProblem(await call('GET', history(other.accounts.sandbox), { key: tenant.keys.read }), 404, 'account-not-found');
      expectProblem(await call('GET', history()), 401, 'unauthorized');
    });
  });

  describe('kill switch', () => {
    const path = '/api/v1/workspace/kill-switch';

    it('is readable with any scope, released at first', async () => {
      for (const key of [tenant.keys.read, tenant.keys.write, tenant.keys.admin]) {
        const read = await call('GET', path, { key });
        expect(read.status).to.equal(200);
        expect(read.body).to.deep.equal({ object: 'kill_switch', workspace_id: tenant.workspaceId, engaged: false, reason: '', since: null });
      }
      expectProblem(await call('GET', path), 401, 'unauthorized');
    });

    it('is engaged and released by an admin key (200), with and without a body', async () => {
      const engaged = await call('POST', `${path}/engage`, { key: tenant.keys.admin, body: { reason: 'incident' } });
      expect(engaged.status, engaged.text).to.equal(200);
      expect(engaged.body).to.include({ engaged: true, reason: 'incident' });
      expect((await call('GET', path, { key: tenant.keys.read })).body.engaged).to.equal(true);
      const again = await call('POST', `${path}/engage`, { key: tenant.keys.admin });
      expect(again.body).to.include({ engaged: true, reason: 'incident' });
      const released = await call('POST', `${path}/release`, { key: tenant.keys.admin });
      expect(released.status, released.text).to.equal(200);
      expect(released.body.engaged).to.equal(false);
      expect(released.body.since).to.be.a('string');
      expect((await call('POST', `${path}/release`, { key: tenant.keys.admin, body: { reason: 'all clear' } })).body.engaged).to.equal(false);
    });

    for (const verb of ['engage', 'release']) {
      it(`answers 403 to read and write keys, 422/400/415 to bad bodies, 401 without a key (${verb})`, async () => {
        for (const key of [tenant.keys.read, tenant.keys.write]) {
          const forbidden = await call('POST', `${path}/${verb}`, { key, body: { reason: 'no' } });
          expectProblem(forbidden, 403, 'insufficient-scope');
          expect(forbidden.body.required_scope).to.equal('admin');
        }
        expectProblem(await call('POST', `${path}/${verb}`, { key: tenant.keys.admin, body: { reason: 5 } }), 422, 'validation-error');
        expectProblem(await call('POST', `${path}/${verb}`, { key: tenant.keys.admin, body: { why: 'x' } }), 422, 'validation-error');
        expectProblem(await call('POST', `${path}/${verb}`, { key: tenant.keys.admin, body: 'nope' }), 400, 'malformed-json');
        expectProblem(
          await call('POST', `${path}/${verb}`, { key: tenant.keys.admin, body: 'reason=x', headers: { 'content-type': 'text/plain' } }),
          415,
          'unsupported-media-type',
        );
        expectProblem(await call('POST', `${path}/${verb}`), 401, 'unauthorized');
      });
    }
  });

  describe('cancel (last: it stops the agent worker so a run stays queued)', () => {
    it('cancels a queued run (200, twice), and streams its queued and canceled events', async () => {
      await svc.service.agentWorker?.stop();
      const created = await call('POST', '/api/v1/runs', { key: tenant.keys.read, body: { brief: WASTE_BRIEF, project_id: tenant.accounts.sandbox2 } });
      expect(created.status, created.text).to.equal(202);
      const id = created.body.id;
      expectProblem(await call('DELETE', `/api/v1/runs/${id}`, { key: other.keys.write }), 404, 'run-not-found');
      for (let attempt = 0; attempt < 2; attempt++) {
        const canceled = await call('DELETE', `/api/v1/runs/${id}`, { key: tenant.keys.read });
        expect(canceled.status, canceled.text).to.equal(200);
        expect(canceled.body.status).to.equal('canceled');
      }
      const stream = await call('GET', `/api/v1/runs/${id}/events`, { key: tenant.keys.read });
      const messages = parseSse(stream.text);
      for (const message of messages) openApiValidator().assertComponent('RunStreamMessage', message, `SSE ${message.event}`);
      expect(messages.map((m) => m.event)).to.deep.equal(['queued', 'canceled']);
    });
  });

  describe('coverage', () => {
    it('called every documented operation with a success, and every write operation with 403', () => {
      for (const name of documentedOperations()) {
        const statuses = [...seen].filter((entry) => entry.startsWith(`${name} → `)).map((entry) => entry.split(' → ')[1]!);
        expect(statuses.some((s) => /^2\d\d$/.test(s)), `${name} was not called with a success (${statuses.join(', ')})`).to.equal(true);
        const scope = operationOf(name)['x-required-scope'];
        if (scope && scope !== 'read') expect(statuses, `${name} needs ${scope}`).to.include('403');
      }
    });

    it('saw each documented status of the new endpoints that a client can provoke', () => {
      const expected = [
        'GET /api/v1/runs/{runId}/events → 200',
        'GET /api/v1/runs/{runId}/events → 204',
        'GET /api/v1/runs/{runId}/events → 401',
        'GET /api/v1/runs/{runId}/events → 404',
        'GET /api/v1/accounts/{projectId}/campaigns → 409',
        'POST /api/v1/accounts/{projectId}/campaigns/{campaignId}/target → 409',
        'POST /api/v1/accounts/{projectId}/campaigns/{campaignId}/target → 415',
        'POST /api/v1/accounts/{projectId}/approvals/{actionId}/approve → 409',
        'POST /api/v1/accounts/{projectId}/approvals/{actionId}/reject → 409',
        'GET /api/v1/accounts/{projectId}/approvals → 422',
        'GET /api/v1/accounts/{projectId}/history → 422',
        'POST /api/v1/workspace/kill-switch/engage → 422',
      ];
      expect([...seen]).to.include.members(expected);
    });
  });
});
