import { expect } from 'chai';
import type { ModelClient, ModelPart, ModelTurn } from '../../src/agent/model/model-port.ts';
import { createLogger } from '../../src/log/logger.ts';
import { setDistinctApprover } from '../../src/operator/operator-commands.ts';
import type { AdsPlatform } from '../../src/platform/ads-platform.ts';
import { createPlatform } from '../../src/platform/create-platform.ts';
import { ProposalService } from '../../src/policy/proposal-service.ts';
import { AgentWorker } from '../../src/workers/agent-worker.ts';
import { ApprovalsAppliedChangeLookup } from '../../projections/approvals/applied-change-lookup.ts';
import { eventually } from '../support/eventually.ts';
import { startRun, waitForTerminalRun } from '../support/runs.ts';
import { startTestService, type TestService, type TestTenant } from '../support/test-service.ts';

const WALL_CLOCK_MS = 1500;
/** Longer than the wall clock: the tool is still working when the run ends. */
const SLOW_PLATFORM_MS = 2500;

const turn = (parts: ModelPart[]): ModelTurn => ({ parts, usage: { input_tokens: 1, output_tokens: 1 } });

/** Makes one tool call, then answers. */
function callThenAnswer(name: string, args: Record<string, unknown>): ModelClient {
  let turns = 0;
  return {
    identity: { kind: 'rules', model: `${name}-then-answer` },
    generate: async () => (turns++ === 0 ? turn([{ kind: 'function_call', call: { name, args } }]) : turn([{ kind: 'text', text: 'done' }])),
  };
}

/** The sandbox, except that the account summary never answers (a call that hangs and ignores its signal). */
function hangingSummary(real: AdsPlatform): AdsPlatform {
  return new Proxy(real, {
    get: (target, property, receiver) =>
      property === 'accountSummary' ? () => new Promise(() => undefined) : Reflect.get(target, property, receiver),
  });
}

/** The sandbox, except that the search-term totals a negative-keyword proposal reads take SLOW_PLATFORM_MS. */
function slowSearchTermTotals(real: AdsPlatform): AdsPlatform {
  return new Proxy(real, {
    get: (target, property, receiver) => {
      const value = Reflect.get(target, property, receiver);
      if (property !== 'searchTermTotals' || typeof value !== 'function') return value;
      return async (...args: unknown[]) => {
        await new Promise((resolve) => setTimeout(resolve, SLOW_PLATFORM_MS));
        return value.apply(target, args);
      };
    },
  });
}

describe('a tool call that outlasts its run', function () {
  this.timeout(60_000);
  let svc: TestService;
  let worker: AgentWorker | undefined;

  before(async () => {
    svc = await startTestService('toollimit', { ROLES: 'http,projectors' });
  });
  afterEach(async () => {
    await worker?.stop();
    worker = undefined;
  });
  after(async () => {
    await svc?.stop();
  });

  async function startWorker(platform: (real: AdsPlatform) => AdsPlatform, model: ModelClient, options: { wallClockMs?: number; shutdownGraceMs?: number } = {}): Promise<AgentWorker> {
    const infra = svc.service.infrastructure;
    worker = new AgentWorker({
      infrastructure: infra,
      executor: {
        platform: platform(createPlatform(infra.database.db)),
        proposals: new ProposalService(infra.commands, new ApprovalsAppliedChangeLookup(infra.database.db)),
        model,
        wallClockMs: options.wallClockMs ?? WALL_CLOCK_MS,
        modelBudgetMs: options.wallClockMs ?? WALL_CLOCK_MS,
      },
      concurrency: 1,
      logger: createLogger('silent'),
      shutdownGraceMs: options.shutdownGraceMs ?? 1000,
      ackWaitMs: 5000,
    });
    await worker.start();
    return worker;
  }

  /** A tenant whose approvals need a key other than the proposer's, and a campaign to add negatives to. */
  async function distinctApproverTenant(): Promise<{ tenant: TestTenant; campaignId: string }> {
    const tenant = await svc.tenant();
    await setDistinctApprover(svc.service.infrastructure, tenant.workspaceId, true);
    const listed = (await (await svc.request('GET', `/api/v1/accounts/${tenant.accounts.sandbox}/campaigns`, { key: tenant.keys.read })).json()) as { data: { id: string; status: string }[] };
    return { tenant, campaignId: listed.data.find((c) => c.status === 'enabled')!.id };
  }

  /** The run's actions once the proposal still in flight has had time to land (it never should). */
  async function actionsOfRunLater(tenant: TestTenant, runId: string): Promise<unknown[]> {
    await new Promise((resolve) => setTimeout(resolve, SLOW_PLATFORM_MS + 1000));
    const listed = await svc.request('GET', `/api/v1/accounts/${tenant.accounts.sandbox}/approvals?run_id=${runId}`, { key: tenant.keys.read });
    return ((await listed.json()) as { data: unknown[] }).data;
  }

  it('given a platform call that hangs, when the run reaches its wall clock, then the run fails timed_out naming the tool and the account takes runs again', async () => {
    const tenant = await svc.tenant();
    await startWorker(hangingSummary, callThenAnswer('get_account_summary', {}));

    const runId = await startRun(svc, tenant.keys.write, tenant.accounts.sandbox, 'Summarise the account');
    const run = await waitForTerminalRun(svc, tenant.keys.write, runId, 15_000);
    expect(run.status).to.equal('failed');
    expect(run.error.code).to.equal('timed_out');
    expect(run.error.message).to.include('wall clock').and.include('get_account_summary');
    // The account is free again: a new run is accepted (202), not refused with run-in-progress.
    const next = await svc.request('POST', '/api/v1/runs', {
      key: tenant.keys.write,
      body: { project_id: tenant.accounts.sandbox, brief: 'Again' },
    });
    expect(next.status).to.equal(202);
  });

  it('given a propose tool whose platform call outlasts the wall clock, when the run times out, then no action of the run is recorded, for its own key to approve', async () => {
    const { tenant, campaignId } = await distinctApproverTenant();
    await startWorker(slowSearchTermTotals, callThenAnswer('add_negative_keywords', { campaign_id: campaignId, keywords: [{ text: 'zzqx nothing' }] }));

    const runId = await startRun(svc, tenant.keys.write, tenant.accounts.sandbox, 'Add negatives');
    const run = await waitForTerminalRun(svc, tenant.keys.write, runId, 15_000);
    expect(run.status).to.equal('failed');
    expect(run.error.code).to.equal('timed_out');
    expect(run.result.actions).to.deep.equal([]);
    expect(await actionsOfRunLater(tenant, runId), 'no action recorded after the run failed').to.deep.equal([]);
  });

  it('given a propose tool still working when its worker shuts down, when the run has been failed, then no action of the run is recorded', async () => {
    const { tenant, campaignId } = await distinctApproverTenant();
    const stopping = await startWorker(slowSearchTermTotals, callThenAnswer('add_negative_keywords', { campaign_id: campaignId, keywords: [{ text: 'zzqx nothing' }] }), {
      wallClockMs: 20_000,
      shutdownGraceMs: 200,
    });

    const runId = await startRun(svc, tenant.keys.write, tenant.accounts.sandbox, 'Add negatives');
    await eventually(async () => {
      const body = (await (await svc.request('GET', `/api/v1/runs/${runId}`, { key: tenant.keys.read })).json()) as { status: string };
      expect(body.status).to.equal('running');
    }, 10_000, 20);
    await stopping.stop();
    const run = await waitForTerminalRun(svc, tenant.keys.write, runId, 15_000);
    expect(run.status).to.equal('failed');
    expect(run.error.code).to.equal('internal');
    expect(await actionsOfRunLater(tenant, runId), 'no action recorded after the run failed').to.deep.equal([]);
  });
});
