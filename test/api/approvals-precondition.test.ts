import { expect } from 'chai';
import { actionDecider } from '../../commands/action/action-decider.ts';
import { api, approvalOf, approvalsPath, campaignsByStrategy, expectProblem, proposeTarget, waitForStatus } from '../safe-apply/helpers.ts';
import { startTestService, type TestService, type TestTenant } from '../support/test-service.ts';
import { assertMatchesOpenApi } from './support/openapi-response-validator.ts';

const APPROVE = '/api/v1/accounts/{projectId}/approvals/{actionId}/approve';
const REJECT = '/api/v1/accounts/{projectId}/approvals/{actionId}/reject';

/**
 * docs/api.md, "Approvals": approve and reject take the action's `version` as `expected_version`
 * and decide nothing when the action changed since that version (409 `action-changed`). Without
 * it they decide on what the action is now, as before. No apply worker runs here, so an approved
 * action stays approved until the test returns it to the queue, as the worker would.
 */
describe('approvals: the expected_version precondition (HTTP, real NATS and Postgres)', function () {
  this.timeout(90_000);
  let svc: TestService;
  let tenant: TestTenant;
  let account: string;
  let roasNow: number;
  let factor = 0.96;

  const propose = async () => {
    factor += 0.01;
    const campaigns = await campaignsByStrategy(svc, tenant.keys.read, account);
    return proposeTarget(svc, tenant.keys.write, account, campaigns.roas.id, { target_roas_pct: Math.round(roasNow * factor * 10) / 10 });
  };
  const path = (actionId: string, decision: 'approve' | 'reject') => `${approvalsPath(account)}/${actionId}/${decision}`;
  /** What the apply worker does when it gives an approved action back (re-check, kill switch). */
  const returnToQueue = async (actionId: string) => {
    await svc.service.infrastructure.commands.handle(actionDecider, {
      type: 'FinishApply',
      workspaceId: tenant.workspaceId,
      accountId: account,
      actionId,
      workerId: 'test-worker',
      claimId: null,
      result: { kind: 'returned', reason: 'returned by the test' },
      meta: { actor: { kind: 'worker', id: 'test-worker' }, correlationId: actionId },
    });
    return waitForStatus(svc, tenant.keys.read, account, actionId, 'returned');
  };

  before(async () => {
    svc = await startTestService('approvals-precondition', { ROLES: 'http,projectors' });
    tenant = await svc.tenant('precondition');
    account = tenant.accounts.sandbox;
    roasNow = (await campaignsByStrategy(svc, tenant.keys.read, account)).roas.bidding_strategy.target_roas_pct!;
  });
  after(async () => svc?.stop());

  it('every action in the list and every decision answer carries a version, which changes when the action does', async () => {
    const proposed = await propose();
    const listed = await approvalOf(svc, tenant.keys.read, account, proposed.id);
    expect(listed.version).to.be.a('string').and.not.equal('');
    expect((await approvalOf(svc, tenant.keys.read, account, proposed.id)).version, 'stable while nothing changes').to.equal(listed.version);
    const approved = await api(svc, 'POST', path(proposed.id, 'approve'), { key: tenant.keys.write, body: { expected_version: listed.version } });
    expect(approved.status, approved.text).to.equal(200);
    assertMatchesOpenApi('POST', APPROVE, approved, approved.body);
    expect(approved.body.status).to.equal('approved');
    expect(approved.body.version).to.not.equal(listed.version);
  });

  it('refuses to approve a version the client saw before the action was returned to the queue: 409 action-changed, nothing decided', async () => {
    const proposed = await propose();
    const seen = (await approvalOf(svc, tenant.keys.read, account, proposed.id)).version;
    expect((await api(svc, 'POST', path(proposed.id, 'approve'), { key: tenant.keys.admin, body: {} })).status).to.equal(200);
    const now = (await returnToQueue(proposed.id)).version;
    expect(now).to.not.equal(seen);

    const refused = await api(svc, 'POST', path(proposed.id, 'approve'), { key: tenant.keys.write, body: { expected_version: seen } });
    expectProblem(refused, 409, 'action-changed');
    assertMatchesOpenApi('POST', APPROVE, refused, refused.body);
    expect(refused.body).to.include({ expected_version: seen, action_version: now, action_status: 'returned' });
    expect(refused.body.detail).to.include('Read the action again');
    expect(refused.body.title).to.equal('The action changed since the version you decided on');

    // With an edit: the same answer, before the edit is checked.
    const edited = await api(svc, 'POST', path(proposed.id, 'approve'), {
      key: tenant.keys.write,
      body: { expected_version: seen, edit: { target_roas_pct: Math.round(roasNow * 10) / 10 } },
    });
    expectProblem(edited, 409, 'action-changed');

    const rejected = await api(svc, 'POST', path(proposed.id, 'reject'), { key: tenant.keys.write, body: { reason: 'no', expected_version: seen } });
    expectProblem(rejected, 409, 'action-changed');
    assertMatchesOpenApi('POST', REJECT, rejected, rejected.body);

    const after = await approvalOf(svc, tenant.keys.read, account, proposed.id);
    expect(after).to.include({ status: 'returned', version: now });

    // The version read again is accepted.
    const approved = await api(svc, 'POST', path(proposed.id, 'approve'), { key: tenant.keys.write, body: { expected_version: now } });
    expect(approved.status, approved.text).to.equal(200);
    expect(approved.body.status).to.equal('approved');
  });

  it('rejects with the version it saw; an action already decided still answers action-not-in-queue', async () => {
    const proposed = await propose();
    const seen = (await approvalOf(svc, tenant.keys.read, account, proposed.id)).version;
    const rejected = await api(svc, 'POST', path(proposed.id, 'reject'), { key: tenant.keys.write, body: { reason: 'not now', expected_version: seen } });
    expect(rejected.status, rejected.text).to.equal(200);
    expect(rejected.body.status).to.equal('rejected');
    const again = await api(svc, 'POST', path(proposed.id, 'approve'), { key: tenant.keys.write, body: { expected_version: seen } });
    expectProblem(again, 409, 'action-not-in-queue');
  });

  it('without a precondition, approves whatever the action is now, as before', async () => {
    const proposed = await propose();
    expect((await api(svc, 'POST', path(proposed.id, 'approve'), { key: tenant.keys.admin })).status).to.equal(200);
    await returnToQueue(proposed.id);
    const approved = await api(svc, 'POST', path(proposed.id, 'approve'), { key: tenant.keys.write });
    expect(approved.status, approved.text).to.equal(200);
    expect(approved.body.status).to.equal('approved');
  });

  it('refuses an expected_version that is not a string (422)', async () => {
    const proposed = await propose();
    const refused = await api(svc, 'POST', path(proposed.id, 'approve'), { key: tenant.keys.write, body: { expected_version: 7 } });
    expectProblem(refused, 422, 'validation-error');
    expect(refused.body.errors[0].pointer).to.equal('/expected_version');
  });
});
