import { expect } from 'chai';
import { actionDecider } from '../../commands/action/action-decider.ts';
import { DistinctApproverRequiredError, type ApproveAction } from '../../commands/action/action-lifecycle.ts';
import { WorkspaceNotFoundError } from '../../commands/errors.ts';
import { workspaceDecider } from '../../commands/workspace/workspace-decider.ts';
import { assertMatchesOpenApi } from '../api/support/openapi-response-validator.ts';
import { runCli } from '../support/cli.ts';
import { deciderSpec, recorded } from '../support/decider-spec.ts';
import { startRun, waitForTerminalRun } from '../support/runs.ts';
import { startTestService, type TestService, type TestTenant } from '../support/test-service.ts';
import { api, approvalsPath, campaignsByStrategy, cents, expectProblem, proposeTarget } from './helpers.ts';

/** docs/api.md, "Approvals": a workspace can require that another key approves what a key proposed. */
describe('distinct approver (decider specs)', () => {
  const proposedBy = (keyId: string | null, actor = { kind: 'api_key', id: 'k1' }) =>
    recorded(
      'ActionProposed',
      {
        action_id: 'a1',
        run_id: keyId === null ? null : 'r1',
        kind: 'set_target_cpa',
        summary: 's',
        reason: 'r',
        params: {},
        based_on: {},
        risk_tier: 'review',
        disposition: 'queued',
        policy_reasons: [],
        auto_apply_requested: false,
        ...(keyId === null ? {} : { proposer_key_id: keyId }),
      },
      { actor } as never,
    );
  const approve = (keyId: string, required: boolean): ApproveAction => ({ type: 'ApproveAction',
    workspaceId: 'ws',
    accountId: 'acc',
    actionId: 'a1',
    note: '',
    requireDistinctApprover: required,
    meta: { actor: { kind: 'api_key', id: keyId }, correlationId: 'c' },
  });
  const spec = deciderSpec(actionDecider);

  it('given the rule on and an action proposed by k1, when k1 approves, then refused with 403', () => {
    spec.given([proposedBy('k1')]).when(approve('k1', true)).thenThrows(DistinctApproverRequiredError, 403);
  });
  it('given the rule on, when another key approves, then approved', () => {
    spec.given([proposedBy('k1')]).when(approve('k2', true)).then([{ type: 'ActionApproved' }]);
  });
  it('given the rule off, when the proposing key approves, then approved', () => {
    spec.given([proposedBy('k1')]).when(approve('k1', false)).then([{ type: 'ActionApproved' }]);
  });
  it('given a v1 proposal by the target endpoint (no proposer_key_id), the event actor is the proposer', () => {
    spec.given([proposedBy(null, { kind: 'api_key', id: 'k1' })]).when(approve('k1', true)).thenThrows(DistinctApproverRequiredError);
  });
  it('workspace setting: on appends once, again appends nothing; unknown workspace refused', () => {
    const ws = deciderSpec(workspaceDecider);
    const created = recorded('WorkspaceCreated', { name: 'w' });
    const meta = { actor: { kind: 'operator' as const, id: 'op' }, correlationId: 'c' };
    ws.given([created]).when({ type: 'SetDistinctApprover', workspaceId: 'ws', required: true, meta }).then([{ type: 'DistinctApproverRequirementSet', data: { required: true } }]);
    ws.given([created, recorded('DistinctApproverRequirementSet', { required: true })]).when({ type: 'SetDistinctApprover', workspaceId: 'ws', required: true, meta }).thenNothing();
    ws.given([]).when({ type: 'SetDistinctApprover', workspaceId: 'ws', required: true, meta }).thenThrows(WorkspaceNotFoundError);
  });
});

describe('distinct approver (HTTP + CLI, real NATS and Postgres)', function () {
  this.timeout(90_000);
  let svc: TestService;

  before(async () => {
    svc = await startTestService('sa-distinct');
  });
  after(async () => svc?.stop());

  const setRule = async (tenant: TestTenant, value: 'on' | 'off') => {
    const result = await runCli(svc.config, ['workspace', 'set', tenant.workspaceId, '--require-distinct-approver', value, '--json']);
    expect(result.code, result.stderr).to.equal(0);
    expect(JSON.parse(result.stdout)).to.deep.equal({ workspace_id: tenant.workspaceId, require_distinct_approver: value === 'on' });
  };
  const approve = (tenant: TestTenant, actionId: string, key: string) =>
    api(svc, 'POST', `${approvalsPath(tenant.accounts.sandbox)}/${actionId}/approve`, { key, body: {} });
  const queuedTarget = async (tenant: TestTenant, key: string, factor: number) => {
    const { roas } = await campaignsByStrategy(svc, tenant.keys.read, tenant.accounts.sandbox);
    const action = await proposeTarget(svc, key, tenant.accounts.sandbox, roas.id, { target_roas_pct: Math.round(roas.bidding_strategy.target_roas_pct! * factor * 10) / 10 });
    expect(action.status).to.equal('queued');
    return action;
  };

  it('on: the proposing key gets 403 distinct-approver-required, another key 200; off: the same key 200', async () => {
    const tenant = await svc.tenant('distinct-http');
    await setRule(tenant, 'on');
    const first = await queuedTarget(tenant, tenant.keys.write, 1.02);
    const refused = await approve(tenant, first.id, tenant.keys.write);
    expectProblem(refused, 403, 'distinct-approver-required');
    expect(refused.body.proposer_key_id).to.equal(tenant.keyIds.write);
    assertMatchesOpenApi('POST', '/api/v1/accounts/{projectId}/approvals/{actionId}/approve', refused, refused.body);
    // Nothing was recorded: the action still waits.
    const still = await api(svc, 'GET', `${approvalsPath(tenant.accounts.sandbox)}?status=queued`, { key: tenant.keys.read });
    expect(still.body.data.map((a: { id: string }) => a.id)).to.include(first.id);
    const byAdmin = await approve(tenant, first.id, tenant.keys.admin);
    expect(byAdmin.status, byAdmin.text).to.equal(200);
    // The service's apply worker may already have taken it further.
    expect(byAdmin.body.status).to.be.oneOf(['approved', 'applying', 'applied', 'returned']);

    await setRule(tenant, 'off');
    const second = await queuedTarget(tenant, tenant.keys.write, 1.03);
    const sameKey = await approve(tenant, second.id, tenant.keys.write);
    expect(sameKey.status, sameKey.text).to.equal(200);
  });

  it('on: the key that started the run cannot approve what the run proposed; another key can', async () => {
    const tenant = await svc.tenant('distinct-run');
    await setRule(tenant, 'on');
    const runId = await startRun(svc, tenant.keys.write, tenant.accounts.sandbox, 'Find wasted spend on search terms without conversions and add negative keywords.');
    const run = await waitForTerminalRun(svc, tenant.keys.read, runId, 30_000);
    expect(run.status, JSON.stringify(run.error)).to.equal('succeeded');
    const listed = await api(svc, 'GET', `${approvalsPath(tenant.accounts.sandbox)}?status=queued&run_id=${runId}`, { key: tenant.keys.read });
    const proposed = listed.body.data as { id: string }[];
    expect(proposed.length, 'the run proposed something to approve').to.be.greaterThan(0);
    expectProblem(await approve(tenant, proposed[0]!.id, tenant.keys.write), 403, 'distinct-approver-required');
    const byAdmin = await approve(tenant, proposed[0]!.id, tenant.keys.admin);
    expect(byAdmin.status, byAdmin.text).to.equal(200);
  });

  it('the CLI refuses a value other than on|off and an unknown workspace', async () => {
    const bad = await runCli(svc.config, ['workspace', 'set', 'nope', '--require-distinct-approver', 'maybe']);
    expect(bad.code).to.not.equal(0);
    expect(bad.stderr).to.include('--require-distinct-approver must be one of on, off');
    const unknown = await runCli(svc.config, ['workspace', 'set', 'no-such-workspace', '--require-distinct-approver', 'on']);
    expect(unknown.code).to.not.equal(0);
    expect(unknown.stderr).to.match(/workspace/i);
  });
});
