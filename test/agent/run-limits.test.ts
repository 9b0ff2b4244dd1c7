import { expect } from 'chai';
import { revokeKey } from '../../src/operator/operator-commands.ts';
import type { FakeGeminiServer } from '../support/fake-gemini/fake-gemini-server.ts';
import { startAgentWorker } from '../support/agent-worker.ts';
import { startRun, waitForTerminalRun } from '../support/runs.ts';
import { startTestService, type TestService, type TestTenant } from '../support/test-service.ts';
import { geminiServiceForDescribe } from '../support/gemini-service.ts';

const toolNames = (request: Record<string, unknown>) =>
  ((request.tools as { functionDeclarations: { name: string }[] }[] | undefined) ?? []).flatMap((t) => t.functionDeclarations.map((d) => d.name));

describe('agent runs within every limit (Gemini through the real SDK, scripted)', function () {
  this.timeout(60_000);
  const setup = geminiServiceForDescribe('runlimits', { GEMINI_MODEL: 'gemini-test', RUN_TIMEOUT_MS: '4000' });
  let svc: TestService;
  let tenant: TestTenant;
  let gemini: FakeGeminiServer;
  beforeEach(() => ({ svc, tenant, gemini } = setup.service));

  it('answers with Gemini: text, usage summed over steps, agent identity, tool calls recorded', async () => {
    gemini.script([
      { functionCalls: [{ name: 'get_account_summary', args: {} }], usage: { input: 100, output: 10 } },
      { text: 'All good: 5 campaigns.', usage: { input: 200, output: 20 } },
    ]);
    const run = await waitForTerminalRun(svc, tenant.keys.write, await startRun(svc, tenant.keys.write, tenant.accounts.sandbox, 'How is my account?'));
    expect(run.status).to.equal('succeeded');
    expect(run.result.text).to.equal('All good: 5 campaigns.');
    expect(run.result.usage).to.deep.equal({ input_tokens: 300, output_tokens: 30, steps: 2 });
    expect(run.result.tool_calls).to.deep.equal([{ name: 'get_account_summary', input: {}, ok: true }]);
    expect(run.agent).to.deep.equal({ kind: 'gemini', model: 'gemini-test' });
    expect(run.duration_ms).to.be.a('number');
    // The second request carries our functionResponse with the tool's real output.
    expect(JSON.stringify(gemini.requests[1]!.contents)).to.include('functionResponse').and.include('last_30_days');
  });

  it('switches tool calling off after 10 tool calls and makes the model answer', async () => {
    const call = { functionCalls: [{ name: 'list_campaigns', args: {} }, { name: 'get_account_summary', args: {} }, { name: 'list_campaigns', args: {} }] };
    gemini.script([call, call, call, call, { text: 'Done after the limit.' }]);
    const run = await waitForTerminalRun(svc, tenant.keys.write, await startRun(svc, tenant.keys.write, tenant.accounts.sandbox, 'Look around a lot'));
    expect(run.status).to.equal('succeeded');
    expect(run.result.tool_calls).to.have.length(10);
    expect(run.result.text).to.equal('Done after the limit.');
    const offered = gemini.requests.map(toolNames);
    expect(offered[0]).to.include('list_campaigns');
    expect(gemini.requests[0]).to.not.have.property('toolConfig');
    // The last request still declares the tools its conversation called, with calling off.
    const last = gemini.requests[gemini.requests.length - 1]!;
    expect(toolNames(last)).to.deep.equal(offered[0]);
    expect(last.toolConfig, 'no tool calls once 10 are used').to.deep.equal({ functionCallingConfig: { mode: 'NONE' } });
  });

  it('cuts the answer at 32,000 characters and sets truncated', async () => {
    gemini.script([{ text: 'x'.repeat(40_000) }]);
    const run = await waitForTerminalRun(svc, tenant.keys.write, await startRun(svc, tenant.keys.write, tenant.accounts.sandbox, 'Write a lot'));
    expect(run.result.text).to.have.length(32_000);
    expect(run.result.truncated).to.equal(true);
  });

  it('cuts before an emoji the 32,000-character limit falls inside of, and the run still succeeds', async () => {
    gemini.script([{ text: `${'a'.repeat(31_999)}😀b` }]);
    const run = await waitForTerminalRun(svc, tenant.keys.write, await startRun(svc, tenant.keys.write, tenant.accounts.sandbox, 'Write a lot, ending in an emoji'));
    expect(run.status, JSON.stringify(run.error)).to.equal('succeeded');
    expect(run.result.text).to.equal('a'.repeat(31_999));
    expect(run.result.truncated).to.equal(true);
  });

  it('fails with agent_error carrying the detail when the model fails, keeping what was proposed', async () => {
    const campaigns = (await (await svc.request('GET', `/api/v1/accounts/${tenant.accounts.sandbox}/campaigns`, { key: tenant.keys.read })).json()) as { data: { id: string; daily_budget: number }[] };
    const campaign = campaigns.data[0]!;
    gemini.script([
      { functionCalls: [{ name: 'set_campaign_budget', args: { campaign_id: campaign.id, daily_budget: Math.round(campaign.daily_budget * 1.05) } }] },
      { status: 400, message: 'Request contains an invalid argument.' },
    ]);
    const run = await waitForTerminalRun(svc, tenant.keys.write, await startRun(svc, tenant.keys.write, tenant.accounts.sandbox, 'Raise a budget'));
    expect(run.status).to.equal('failed');
    expect(run.error.code).to.equal('agent_error');
    expect(run.error.message).to.include('invalid argument');
    expect(run.result.actions).to.have.length(1);
    expect(run.result.actions[0].disposition).to.equal('queued');
    const approvals = (await (await svc.request('GET', `/api/v1/accounts/${tenant.accounts.sandbox}/approvals?run_id=${run.id}`, { key: tenant.keys.read })).json()) as { data: { status: string }[] };
    expect(approvals.data.map((a) => a.status)).to.deep.equal(['queued']);
  });

  it('fails with timed_out when the wall clock runs out', async () => {
    gemini.script([{ delayMs: 10_000, then: { text: 'too late' } }]);
    const run = await waitForTerminalRun(svc, tenant.keys.write, await startRun(svc, tenant.keys.write, tenant.accounts.sandbox, 'Slow model'));
    expect(run.status).to.equal('failed');
    expect(run.error.code).to.equal('timed_out');
    expect(run.error.message).to.include('wall clock');
  });

  it('fails with account_not_connected before any model call', async () => {
    gemini.script([{ text: 'should never be asked' }]);
    const run = await waitForTerminalRun(svc, tenant.keys.write, await startRun(svc, tenant.keys.write, tenant.accounts.disconnected, 'Anything'));
    expect(run.status).to.equal('failed');
    expect(run.error.code).to.equal('account_not_connected');
    expect(gemini.requests).to.have.length(0);
  });

  it('gives a read-scoped run no propose tool, and no action even when the model calls one', async () => {
    const campaigns = (await (await svc.request('GET', `/api/v1/accounts/${tenant.accounts.sandbox2}/campaigns`, { key: tenant.keys.read })).json()) as { data: { id: string }[] };
    gemini.script([
      { functionCalls: [{ name: 'add_negative_keywords', args: { campaign_id: campaigns.data[0]!.id, keywords: [{ text: 'free' }] } }] },
      { text: 'I could not propose.' },
    ]);
    const run = await waitForTerminalRun(svc, tenant.keys.read, await startRun(svc, tenant.keys.read, tenant.accounts.sandbox2, 'Add negatives'));
    expect(run.status).to.equal('succeeded');
    expect(run.scope).to.equal('read');
    expect(run.result.actions).to.deep.equal([]);
    expect(run.result.tool_calls).to.deep.equal([{ name: 'add_negative_keywords', input: { campaign_id: campaigns.data[0]!.id, keywords: [{ text: 'free' }] }, ok: false }]);
    const offered = toolNames(gemini.requests[0]!);
    expect(offered).to.include('get_search_terms');
    expect(offered.filter((n) => ['add_negative_keywords', 'pause_keywords', 'set_campaign_budget', 'set_target_cpa', 'set_target_roas'].includes(n))).to.deep.equal([]);
    const approvals = (await (await svc.request('GET', `/api/v1/accounts/${tenant.accounts.sandbox2}/approvals`, { key: tenant.keys.read })).json()) as { data: unknown[] };
    expect(approvals.data).to.deep.equal([]);
  });
});

describe('a key revoked while its run is queued', function () {
  this.timeout(60_000);
  let svc: TestService;

  after(async () => svc?.stop());

  it('fails the run with key_revoked when a worker picks it up', async () => {
    // No agent worker yet: the run stays queued while the key is revoked.
    svc = await startTestService('keyrevoked', { ROLES: 'http,projectors' });
    const tenant = await svc.tenant();
    const runId = await startRun(svc, tenant.keys.write, tenant.accounts.sandbox, 'Find waste');
    await revokeKey(svc.service.infrastructure, tenant.keyIds.write);
    const worker = await startAgentWorker(svc);
    try {
      const run = await waitForTerminalRun(svc, tenant.keys.admin, runId);
      expect(run.status).to.equal('failed');
      expect(run.error.code).to.equal('key_revoked');
      expect(run.result.tool_calls).to.deep.equal([]);
    } finally {
      await worker.stop();
    }
  });
});
