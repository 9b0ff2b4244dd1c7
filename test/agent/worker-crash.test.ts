import { expect } from 'chai';
import { spawn, type ChildProcess } from 'node:child_process';
import type { AgentWorker } from '../../src/workers/agent-worker.ts';
import { startAgentWorker } from '../support/agent-worker.ts';
import { serviceEnv } from '../support/cli.ts';
import { eventually } from '../support/eventually.ts';
import { FAKE_GEMINI_API_KEY, FakeGeminiServer } from '../support/fake-gemini/fake-gemini-server.ts';
import { startRun, waitForTerminalRun } from '../support/runs.ts';
import { startTestService, type TestService } from '../support/test-service.ts';

describe('an agent worker killed in the middle of a run', function () {
  this.timeout(90_000);
  const gemini = new FakeGeminiServer();
  let svc: TestService;
  let child: ChildProcess | undefined;
  let rescuer: AgentWorker | undefined;
  let closeGemini: () => Promise<void>;

  after(async () => {
    child?.kill('SIGKILL');
    await rescuer?.stop();
    await svc?.stop();
    await closeGemini?.();
  });

  it('ends the run failed with internal, keeps what it proposed, and never runs it twice', async () => {
    const started = await gemini.start();
    closeGemini = started.close;
    const geminiEnv = { GEMINI_API_KEY: FAKE_GEMINI_API_KEY, GEMINI_BASE_URL: started.baseUrl, AGENT_ACK_WAIT_MS: '2000' };
    // The service here has no agent worker: the only one is the child process below.
    svc = await startTestService('workercrash', { ROLES: 'http,projectors', ...geminiEnv });
    const tenant = await svc.tenant();
    const campaigns = (await (await svc.request('GET', `/api/v1/accounts/${tenant.accounts.sandbox}/campaigns`, { key: tenant.keys.read })).json()) as {
      data: { id: string; daily_budget: number }[];
    };
    const campaign = campaigns.data[0]!;
    gemini.script([
      { functionCalls: [{ name: 'set_campaign_budget', args: { campaign_id: campaign.id, daily_budget: Math.round(campaign.daily_budget * 1.05) } }] },
      { delayMs: 60_000, then: { text: 'never delivered' } },
    ]);

    const { config } = svc;
    child = spawn(process.execPath, ['src/main.ts'], {
      env: { ...process.env, ...serviceEnv(config), ...geminiEnv, ROLES: 'agent-worker' },
      stdio: 'ignore',
    });
    const runId = await startRun(svc, tenant.keys.write, tenant.accounts.sandbox, 'Raise the budget a little');
    // The second model request means: one tool call made, one action proposed, worker waiting on the model.
    await eventually(() => expect(gemini.requests.length).to.equal(2), 30_000);
    const running = (await (await svc.request('GET', `/api/v1/runs/${runId}`, { key: tenant.keys.write })).json()) as any;
    expect(running.status).to.equal('running');
    child.kill('SIGKILL');

    rescuer = await startAgentWorker(svc, { ackWaitMs: 2000 });

    const run = await waitForTerminalRun(svc, tenant.keys.write, runId, 30_000);
    expect(run.status).to.equal('failed');
    expect(run.error.code).to.equal('internal');
    expect(run.error.message).to.include('stopped while running');
    expect(run.result.actions).to.have.length(1);
    expect(run.result.tool_calls).to.deep.equal([
      { name: 'set_campaign_budget', input: { campaign_id: campaign.id, daily_budget: Math.round(campaign.daily_budget * 1.05) }, ok: true },
    ]);
    expect(gemini.requests, 'nobody ran the agent for this run again').to.have.length(2);

    const history = (await (await svc.request('GET', `/api/v1/accounts/${tenant.accounts.sandbox}/history?run_id=${runId}`, { key: tenant.keys.read })).json()) as {
      data: { type: string }[];
    };
    expect(history.data.filter((e) => e.type === 'RunStarted')).to.have.length(1);
    expect(history.data.filter((e) => e.type === 'RunFailed')).to.have.length(1);
    const approvals = (await (await svc.request('GET', `/api/v1/accounts/${tenant.accounts.sandbox}/approvals?run_id=${runId}`, { key: tenant.keys.read })).json()) as {
      data: { status: string }[];
    };
    expect(approvals.data.map((a) => a.status)).to.deep.equal(['queued']);
  });
});
