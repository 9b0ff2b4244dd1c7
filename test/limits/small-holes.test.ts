import { expect } from 'chai';
import { connect } from 'node:net';
import * as osModule from 'node:os';
import type { ModelClient } from '../../src/agent/model/model-port.ts';
import { startAgentWorker } from '../support/agent-worker.ts';
import { startRun, waitForTerminalRun } from '../support/runs.ts';
import { startTestService, type TestService, type TestTenant } from '../support/test-service.ts';
import { API_TEST_ROLES, call, countBy, expectProblem, freshAccount } from '../api/support/api-call.ts';
import { approvalsPath, campaignsByStrategy, cents, targetPath, type CampaignsByStrategy } from '../safe-apply/helpers.ts';
import type { AgentWorker } from '../../src/workers/agent-worker.ts';

/** Issue #10 item 8: the smaller holes, one test each. */
describe('smaller holes (issue #10 item 8)', function () {
  this.timeout(60_000);
  let svc: TestService;
  let tenant: TestTenant;
  let campaigns: CampaignsByStrategy;

  before(async () => {
    svc = await startTestService('small-holes', { ROLES: API_TEST_ROLES, HOST: '0.0.0.0' });
    tenant = await svc.tenant('holes');
    campaigns = await campaignsByStrategy(svc, tenant.keys.read, tenant.accounts.sandbox);
  });

  after(async () => {
    await svc?.stop();
  });

  describe('numeric query parameters', () => {
    const bad = ['1e21', '1e3', '0x10', 'Infinity', '9007199254740993', '99999999999999999999', ' 7', '7 ', '+7', '-1', '1.5', ''];
    const lists = { approvals: (account: string) => approvalsPath(account), history: (account: string) => `/api/v1/accounts/${account}/history` };
    for (const [list, pathOf] of Object.entries(lists)) {
      for (const cursor of bad) {
        it(`GET ${list}?cursor=${JSON.stringify(cursor)} → 422 naming /cursor`, async () => {
          const result = await call(svc, 'GET', `${pathOf(tenant.accounts.sandbox)}?cursor=${encodeURIComponent(cursor)}`, { key: tenant.keys.read });
          expectProblem(result, 422, 'validation-error');
          expect(result.body.errors.map((e: { pointer: string }) => e.pointer)).to.deep.equal(['/cursor']);
        });
      }
      for (const limit of ['1e2', '0x10', '2e0', '50&limit=60']) {
        it(`GET ${list}?limit=${limit} → 422 naming /limit`, async () => {
          const result = await call(svc, 'GET', `${pathOf(tenant.accounts.sandbox)}?limit=${limit}`, { key: tenant.keys.read });
          expectProblem(result, 422, 'validation-error');
          expect(result.body.errors.map((e: { pointer: string }) => e.pointer)).to.deep.equal(['/limit']);
        });
      }
    }
    it('still pages with plain digits, including the largest safe cursor', async () => {
      expect((await call(svc, 'GET', `${approvalsPath(tenant.accounts.sandbox)}?limit=5&cursor=0`, { key: tenant.keys.read })).status).to.equal(200);
      const largest = await call(svc, 'GET', `${approvalsPath(tenant.accounts.sandbox)}?cursor=${Number.MAX_SAFE_INTEGER}`, { key: tenant.keys.read });
      expect(largest.status).to.equal(200);
      expect(largest.body.data).to.deep.equal([]);
    });
  });

  describe('requests node’s HTTP parser refuses', () => {
    it('answers oversized headers with a 431 problem, not a bare status line', async () => {
      const response = await fetch(`${svc.baseUrl}/api/v1/accounts`, { headers: { 'x-padding': 'a'.repeat(20_000) } });
      expect(response.status).to.equal(431);
      expect(response.headers.get('content-type')).to.equal('application/problem+json');
      const body = (await response.json()) as Record<string, unknown>;
      expect(body).to.include({ type: 'http://api.test/problems/headers-too-large', status: 431 });
      expect(body.detail).to.match(/send fewer or shorter headers/);
      expect(body.request_id).to.equal(response.headers.get('x-request-id'));
    });

    it('answers a URI over 8 KiB with a 414 problem saying to send a shorter one, not with 431', async () => {
      const response = await fetch(`${svc.baseUrl}/api/v1/accounts?${'a'.repeat(20_000)}`, { headers: { authorization: `Bearer ${tenant.keys.read}` } });
      expect(response.status).to.equal(414);
      const body = (await response.json()) as Record<string, unknown>;
      expect(body).to.include({ type: 'http://api.test/problems/uri-too-long', status: 414 });
      expect(body.detail).to.match(/send a shorter URI/);
    });

    it('answers a request line just over 8 KiB with 414 on any route, and one just under with the answer of its route', async () => {
      const headers = { authorization: `Bearer ${tenant.keys.read}` };
      // 'GET ' + path + '?' + query + ' HTTP/1.1' is the request line.
      const path = '/api/v1/accounts';
      const query = (lineBytes: number) => 'a'.repeat(lineBytes - 'GET '.length - path.length - 1 - ' HTTP/1.1'.length);
      const over = await fetch(`${svc.baseUrl}${path}?${query(8 * 1024 + 1)}`, { headers });
      expect(over.status).to.equal(414);
      expect(((await over.json()) as Record<string, unknown>).type).to.equal('http://api.test/problems/uri-too-long');
      const runOver = await fetch(`${svc.baseUrl}/api/v1/runs/${'0'.repeat(8 * 1024)}`, { headers });
      expect(runOver.status).to.equal(414);
      const under = await fetch(`${svc.baseUrl}${path}?${query(8 * 1024)}`, { headers });
      expect(under.status).to.equal(422);
    });

    it('answers a request that is not HTTP with a 400 problem', async () => {
      const raw = await new Promise<string>((resolve, reject) => {
        const socket = connect(svc.service.http!.port, '127.0.0.1', () => socket.write('GET / HTTP/1.1\r\nHost: x\r\nContent-Length: nope\r\n\r\n'));
        let text = '';
        socket.on('data', (chunk) => (text += chunk.toString()));
        socket.on('end', () => resolve(text));
        socket.on('error', reject);
      });
      expect(raw).to.match(/^HTTP\/1\.1 400 /);
      expect(raw).to.include('Content-Type: application/problem+json');
      expect(raw).to.include('"type":"http://api.test/problems/malformed-request"');
    });
  });

  describe('optional bodies', () => {
    /** Sends the request as written, chunked, and returns the status line's code. */
    const rawStatus = (path: string, headers: string, chunks: string) =>
      new Promise<number>((resolve, reject) => {
        const socket = connect(svc.service.http!.port, '127.0.0.1', () =>
          socket.write(`POST ${path} HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer ${tenant.keys.admin}\r\n${headers}Transfer-Encoding: chunked\r\nConnection: close\r\n\r\n${chunks}0\r\n\r\n`),
        );
        let text = '';
        socket.on('data', (chunk) => (text += chunk.toString()));
        socket.on('end', () => resolve(Number(/^HTTP\/1\.1 (\d{3})/.exec(text)?.[1])));
        socket.on('error', reject);
      });

    it('reads an empty chunked body as no body (200), with or without a JSON Content-Type, and judges the type of one with bytes', async () => {
      const release = '/api/v1/workspace/kill-switch/release';
      expect(await rawStatus(release, 'Content-Type: application/json\r\n', '')).to.equal(200);
      expect(await rawStatus(release, 'Content-Type: application/json\r\n', '3\r\n \n \r\n')).to.equal(200);
      expect(await rawStatus(release, '', '')).to.equal(200);
      expect(await rawStatus(release, 'Content-Type: text/plain\r\n', '2\r\n{}\r\n')).to.equal(415);
      expect(await rawStatus(release, 'Content-Type: application/json\r\n', '1\r\n{\r\n')).to.equal(400);
    });
  });

  describe('paths are case-sensitive', () => {
    it('answers /API/V1/accounts with 404, not the accounts without the /api/ answer headers', async () => {
      const headers = { authorization: `Bearer ${tenant.keys.read}` };
      for (const path of ['/API/V1/accounts', '/Api/v1/accounts', '/api/V1/accounts', '/CONSOLE/', '/Problems/not-found']) {
        const response = await fetch(`${svc.baseUrl}${path}`, { headers });
        expect(response.status, path).to.equal(404);
        expect(((await response.json()) as Record<string, unknown>).type, path).to.equal('http://api.test/problems/not-found');
      }
      expect((await fetch(`${svc.baseUrl}/api/v1/accounts`, { headers })).status).to.equal(200);
    });
  });

  describe('X-Request-Id is never an event’s correlation id', () => {
    it('keeps a target proposal and a kill-switch change out of the run whose id the client sent as X-Request-Id', async () => {
      const runId = await startRun(svc, tenant.keys.write, await freshAccount(svc, tenant.workspaceId), 'Someone else’s run.');
      const headers = { 'X-Request-Id': runId };
      const target = cents(campaigns.cpa.bidding_strategy.target_cpa! * 1.02);
      const proposed = await call(svc, 'POST', targetPath(tenant.accounts.sandbox, campaigns.cpa.id), {
        key: tenant.keys.write,
        body: { target_cpa: target, reason: 'nudge' },
        headers,
      });
      expect(proposed.status).to.equal(200);
      expect(proposed.headers.get('x-request-id'), 'still echoed').to.equal(runId);
      const engaged = await call(svc, 'POST', '/api/v1/workspace/kill-switch/engage', { key: tenant.keys.admin, body: { reason: 'test' }, headers });
      expect(engaged.status).to.equal(200);
      await call(svc, 'POST', '/api/v1/workspace/kill-switch/release', { key: tenant.keys.admin, headers });

      const { store, subjects } = svc.service.infrastructure;
      const correlated: string[] = [];
      for await (const { event } of store.readFiltered(subjects.all, 1)) {
        if (event.correlation_id === runId) correlated.push(event.type);
      }
      expect(correlated, 'only the run’s own events carry its id').to.deep.equal(['RunQueued']);
    });
  });

  describe('GET /readyz', () => {
    const remoteAddress = (): string | undefined => {
      // Any non-loopback address of this machine reaches the server (bound to 0.0.0.0) as a remote client.
      return Object.values(osModule.networkInterfaces())
        .flat()
        .find((nic) => nic && nic.family === 'IPv4' && !nic.internal)?.address;
    };

    it('shows the per-check details from loopback', async () => {
      const result = await call(svc, 'GET', '/readyz');
      expect(result.status).to.equal(200);
      expect(Object.keys(result.body.checks)).to.include.members(['nats', 'postgres']);
    });

    it('shows only the status to a remote caller without an admin key, and the details to an admin key', async function () {
      const address = remoteAddress();
      if (!address) this.skip();
      const url = `http://${address}:${svc.service.http!.port}/readyz`;
      const anonymous = await fetch(url);
      expect(anonymous.status).to.equal(200);
      expect(await anonymous.json()).to.deep.equal({ status: 'ready' });
      const writer = await fetch(url, { headers: { authorization: `Bearer ${tenant.keys.write}` } });
      expect(await writer.json()).to.deep.equal({ status: 'ready' });
      const admin = await fetch(url, { headers: { authorization: `Bearer ${tenant.keys.admin}` } });
      const body = (await admin.json()) as { checks: Record<string, unknown> };
      expect(Object.keys(body.checks)).to.include.members(['nats', 'postgres']);
    });
  });

  describe('Idempotency-Key on the campaign target endpoint', () => {
    it('replays the first answer for the same key and body, never proposing twice; 422 for another body; scoped per API key', async () => {
      const account = tenant.accounts.sandbox2;
      const c = (await campaignsByStrategy(svc, tenant.keys.read, account)).cpa;
      const body = { target_cpa: cents(c.bidding_strategy.target_cpa! * 1.03), reason: 'idempotent nudge' };
      const send = (b: unknown, key = tenant.keys.write) =>
        call(svc, 'POST', targetPath(account, c.id), { key, body: b, headers: { 'Idempotency-Key': 'target-once' } });

      const results = await Promise.all(Array.from({ length: 8 }, () => send(body)));
      const statuses = countBy(results, (r) => r.status);
      expect(statuses[200]! + (statuses[409] ?? 0)).to.equal(8);
      const answered = results.filter((r) => r.status === 200);
      const ids = new Set(answered.map((r) => r.body.id));
      expect(ids.size, 'one action for every 200').to.equal(1);
      for (const conflict of results.filter((r) => r.status === 409)) expectProblem(conflict, 409, 'idempotent-request-in-progress');

      const replay = await send(body);
      expect(replay.status).to.equal(200);
      expect(replay.headers.get('idempotent-replayed')).to.equal('true');
      expect(replay.body).to.deep.equal(answered[0]!.body);

      expectProblem(await send({ ...body, reason: 'another reason' }), 422, 'idempotency-key-reused');
      expectProblem(await call(svc, 'POST', targetPath(account, c.id), { key: tenant.keys.write, body, headers: { 'Idempotency-Key': 'bad key' } }), 400, 'invalid-idempotency-key');

      const listed = await call(svc, 'GET', `${approvalsPath(account)}?limit=200`, { key: tenant.keys.read });
      expect(listed.body.data.filter((a: { params: { campaign_id: string } }) => a.params.campaign_id === c.id)).to.have.length(1);

      const otherKey = await send(body, tenant.keys.admin);
      expect(otherKey.status).to.equal(200);
      expect(otherKey.body.id, 'another API key has its own Idempotency-Key space').to.not.equal(answered[0]!.body.id);
    });

    it('refuses a key first used on POST /runs with 422 rather than replaying a run', async () => {
      const account = await freshAccount(svc, tenant.workspaceId);
      const run = await call(svc, 'POST', '/api/v1/runs', { key: tenant.keys.write, body: { brief: 'x', project_id: account }, headers: { 'Idempotency-Key': 'shared-key' } });
      expect(run.status).to.equal(202);
      const target = cents(campaigns.cpa.bidding_strategy.target_cpa! * 1.01);
      const result = await call(svc, 'POST', targetPath(tenant.accounts.sandbox, campaigns.cpa.id), {
        key: tenant.keys.write,
        body: { target_cpa: target, reason: 'x' },
        headers: { 'Idempotency-Key': 'shared-key' },
      });
      expectProblem(result, 422, 'idempotency-key-reused');
    });
  });
});

describe('a run that fails on the service side (issue #10 item 8)', function () {
  this.timeout(60_000);
  let svc: TestService;
  let worker: AgentWorker | undefined;

  after(async () => {
    await worker?.stop();
    await svc?.stop();
  });

  it('tells the client what it can do, never the internal error text', async () => {
    svc = await startTestService('internal-message', { ROLES: API_TEST_ROLES });
    const tenant = await svc.tenant('internal');
    const secret = 'connect ECONNREFUSED 10.1.2.3:5432 user=adsagent password=hunter2 at /srv/app/src/db.ts:12';
    const broken: ModelClient = {
      identity: { kind: 'rules', model: 'broken' },
      generate: async () => {
        throw new TypeError(secret);
      },
    };
    worker = await startAgentWorker(svc, { model: broken });
    const runId = await startRun(svc, tenant.keys.write, tenant.accounts.sandbox, 'Anything.');
    const run = await waitForTerminalRun(svc, tenant.keys.write, runId);
    expect(run.status).to.equal('failed');
    expect(run.error.code).to.equal('internal');
    for (const leaked of ['ECONNREFUSED', '10.1.2.3', 'hunter2', '/srv/app', 'TypeError']) expect(run.error.message).to.not.include(leaked);
    expect(run.error.message).to.match(/start it again/);
  });
});


