import { expect } from 'chai';
import type { ModelClient, ModelPart, ModelTurn } from '../../src/agent/model/model-port.ts';
import { createLogger } from '../../src/log/logger.ts';
import type { AdsPlatform } from '../../src/platform/ads-platform.ts';
import { createPlatform } from '../../src/platform/create-platform.ts';
import { ProposalService } from '../../src/policy/proposal-service.ts';
import { AgentWorker } from '../../src/workers/agent-worker.ts';
import { ApprovalsAppliedChangeLookup } from '../../projections/approvals/applied-change-lookup.ts';
import { startRun, waitForTerminalRun } from '../support/runs.ts';
import { startTestService, type TestService } from '../support/test-service.ts';

const WALL_CLOCK_MS = 1500;

const turn = (parts: ModelPart[]): ModelTurn => ({ parts, usage: { input_tokens: 1, output_tokens: 1 } });

/** Asks for the account summary, then answers. */
function summaryThenAnswer(): ModelClient {
  let turns = 0;
  return {
    identity: { kind: 'rules', model: 'summary-then-answer' },
    generate: async () =>
      turns++ === 0 ? turn([{ kind: 'function_call', call: { name: 'get_account_summary', args: {} } }]) : turn([{ kind: 'text', text: 'done' }]),
  };
}

/** The sandbox, except that the account summary never answers (a call that hangs and ignores its signal). */
function hangingSummary(real: AdsPlatform): AdsPlatform {
  return new Proxy(real, {
    get: (target, property, receiver) =>
      property === 'accountSummary' ? () => new Promise(() => undefined) : Reflect.get(target, property, receiver),
  });
}

describe('a tool call that never returns', function () {
  this.timeout(60_000);
  let svc: TestService;
  let worker: AgentWorker | undefined;

  before(async () => {
    svc = await startTestService('toollimit', { ROLES: 'http,projectors' });
  });
  after(async () => {
    await worker?.stop();
    await svc?.stop();
  });

  it('given a platform call that hangs, when the run reaches its wall clock, then the run fails timed_out naming the tool and the account takes runs again', async () => {
    const tenant = await svc.tenant();
    const infra = svc.service.infrastructure;
    worker = new AgentWorker({
      infrastructure: infra,
      executor: {
        platform: hangingSummary(createPlatform(infra.database.db)),
        proposals: new ProposalService(infra.commands, new ApprovalsAppliedChangeLookup(infra.database.db)),
        model: summaryThenAnswer(),
        wallClockMs: WALL_CLOCK_MS,
        modelBudgetMs: WALL_CLOCK_MS,
      },
      concurrency: 1,
      logger: createLogger('silent'),
      shutdownGraceMs: 1000,
      ackWaitMs: 5000,
    });
    await worker.start();

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
});
