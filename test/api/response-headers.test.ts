import { expect } from 'chai';
import { startRun, waitForTerminalRun } from '../support/runs.ts';
import { startTestService, type TestService, type TestTenant } from '../support/test-service.ts';

/**
 * Every /api/ answer carries `X-Content-Type-Options: nosniff`, and `Cache-Control: no-store`
 * unless its route documents a caching of its own (a terminal run, the public documents):
 * answers are per API key, and no cache on the way may keep one.
 */
describe('API response headers: no-store and nosniff on every /api/ answer', function () {
  this.timeout(60_000);
  let svc: TestService;
  let tenant: TestTenant;

  before(async () => {
    svc = await startTestService('apiheaders', { ROLES: 'http,projectors' });
    tenant = await svc.tenant();
  });
  after(async () => svc?.stop());

  const headersOf = async (method: string, path: string, key?: string, body?: unknown) => {
    const response = await svc.request(method, path, { ...(key ? { key } : {}), ...(body ? { body } : {}) });
    await response.arrayBuffer();
    return { status: response.status, cacheControl: response.headers.get('cache-control'), nosniff: response.headers.get('x-content-type-options') };
  };

  it('given answers of every kind (a list, a problem, no key, a queued run from the fast lane), then each is no-store and nosniff', async () => {
    const runId = await startRun(svc, tenant.keys.write, tenant.accounts.sandbox, 'Stays queued: this service runs no worker');
    const answers = {
      list: await headersOf('GET', '/api/v1/accounts', tenant.keys.read),
      notFound: await headersOf('GET', '/api/v1/runs/00000000-0000-4000-8000-000000000000', tenant.keys.read),
      noKey: await headersOf('GET', '/api/v1/accounts'),
      badBody: await headersOf('POST', '/api/v1/runs', tenant.keys.write, { brief: '' }),
      queuedRun: await headersOf('GET', `/api/v1/runs/${runId}`, tenant.keys.read),
    };
    for (const [what, answer] of Object.entries(answers)) {
      expect(answer.nosniff, what).to.equal('nosniff');
      expect(answer.cacheControl, what).to.equal('no-store');
    }
    expect([answers.list.status, answers.notFound.status, answers.noKey.status, answers.badBody.status, answers.queuedRun.status]).to.deep.equal([200, 404, 401, 422, 200]);
  });

  it('given a terminal run, then it keeps its own caching and is nosniff', async () => {
    const runId = await startRun(svc, tenant.keys.write, tenant.accounts.sandbox2, 'To be canceled');
    const canceled = await svc.request('DELETE', `/api/v1/runs/${runId}`, { key: tenant.keys.write });
    expect(canceled.status).to.equal(200);
    await waitForTerminalRun(svc, tenant.keys.read, runId);
    // Twice: the first read may come from Postgres through koa, the next from the fast lane's cache.
    for (const read of [1, 2]) {
      const answer = await headersOf('GET', `/api/v1/runs/${runId}`, tenant.keys.read);
      expect(answer.nosniff, `read ${read}`).to.equal('nosniff');
      expect(answer.cacheControl, `read ${read}`).to.match(/^private, max-age=\d+, immutable$/);
    }
  });
});
