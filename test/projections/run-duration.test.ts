import { expect } from 'chai';
import { eventually } from '../support/eventually.ts';
import { startTestService, type TestService, type TestTenant } from '../support/test-service.ts';
import { API_TEST_ROLES, call, freshAccount } from '../api/support/api-call.ts';

/** docs/api.md: every terminal run has `duration_ms` (issue #15), through the HTTP API on real NATS and Postgres. */
describe('run duration on every terminal run', function () {
  this.timeout(30_000);
  let svc: TestService;
  let tenant: TestTenant;

  before(async () => {
    // No agent worker: the run stays queued until it is canceled.
    svc = await startTestService('run-duration', { ROLES: API_TEST_ROLES });
    tenant = await svc.tenant('duration');
  });
  after(async () => svc?.stop());

  it('a canceled run has duration_ms', async () => {
    const accountId = await freshAccount(svc, tenant.workspaceId);
    const created = await call(svc, 'POST', '/api/v1/runs', { key: tenant.keys.write, body: { brief: 'Cancel me.', project_id: accountId } });
    expect(created.status).to.equal(202);
    const runId = created.body.id as string;
    const canceled = await call(svc, 'DELETE', `/api/v1/runs/${runId}`, { key: tenant.keys.write });
    expect(canceled.status).to.equal(200);
    await eventually(async () => {
      const polled = await call(svc, 'GET', `/api/v1/runs/${runId}`, { key: tenant.keys.write });
      expect(polled.body.status).to.equal('canceled');
      expect(polled.body.finished_at).to.be.a('string');
      expect(polled.body.duration_ms).to.be.a('number').and.to.be.at.least(0);
      const queuedFor = Date.parse(polled.body.finished_at as string) - Date.parse(polled.body.created_at as string);
      expect(polled.body.duration_ms).to.equal(queuedFor);
    }, 5000);
  });
});
