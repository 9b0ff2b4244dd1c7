import { expect } from 'chai';
import { startTestService, type TestService, type TestTenant } from '../support/test-service.ts';
import { API_TEST_ROLES, call, expectProblem } from './support/api-call.ts';

describe('GET /api/v1/accounts', function () {
  this.timeout(30_000);
  let svc: TestService;
  let tenant: TestTenant;
  let other: TestTenant;

  before(async () => {
    svc = await startTestService('api-accounts', { ROLES: API_TEST_ROLES });
    [tenant, other] = await Promise.all([svc.tenant('accounts-a'), svc.tenant('accounts-b')]);
  });

  after(async () => {
    await svc?.stop();
  });

  const connectedById = (t: TestTenant): Record<string, boolean> => ({
    [t.accounts.sandbox]: true,
    [t.accounts.sandbox2]: true,
    [t.accounts.disconnected]: false,
  });

  it("lists exactly the workspace's three accounts with their connected flags, for every scope", async () => {
    for (const key of [tenant.keys.read, tenant.keys.write, tenant.keys.admin]) {
      const listed = await call(svc, 'GET', '/api/v1/accounts', { key });
      expect(listed.status).to.equal(200);
      expect(listed.body.object).to.equal('list');
      const byId = Object.fromEntries((listed.body.data as { id: string; connected: boolean }[]).map((a) => [a.id, a.connected]));
      expect(byId).to.deep.equal(connectedById(tenant));
      expect(listed.body.data).to.have.length(3);
    }
  });

  it("never shows another workspace's accounts", async () => {
    const mine = await call(svc, 'GET', '/api/v1/accounts', { key: tenant.keys.read });
    const theirs = await call(svc, 'GET', '/api/v1/accounts', { key: other.keys.read });
    const mineIds = (mine.body.data as { id: string }[]).map((a) => a.id);
    const theirIds = (theirs.body.data as { id: string }[]).map((a) => a.id);
    expect(mineIds).to.not.include.any.members(Object.values(other.accounts));
    expect(theirIds).to.have.members(Object.values(other.accounts));
    expect(theirIds).to.not.include.any.members(mineIds);
  });

  it('answers 401 without a key', async () => {
    const result = await call(svc, 'GET', '/api/v1/accounts');
    expectProblem(result, 401, 'unauthorized');
  });
});
