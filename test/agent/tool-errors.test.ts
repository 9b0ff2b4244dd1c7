import { expect } from 'chai';
import type { ModelClient, ModelRequest, ModelTurn } from '../../src/agent/model/model-port.ts';
import type { EventEnvelope } from '../../src/events/envelope.ts';
import { createLogger } from '../../src/log/logger.ts';
import type { AdsPlatform } from '../../src/platform/ads-platform.ts';
import { createPlatform } from '../../src/platform/create-platform.ts';
import { PlatformUnavailableError } from '../../src/platform/platform-errors.ts';
import { ProposalService } from '../../src/policy/proposal-service.ts';
import { AgentWorker } from '../../src/workers/agent-worker.ts';
import { ApprovalsAppliedChangeLookup } from '../../projections/approvals/applied-change-lookup.ts';
import { startRun, waitForTerminalRun } from '../support/runs.ts';
import { startTestService, type TestService } from '../support/test-service.ts';

/** What a platform might say: U+0000 and a lone surrogate (no event may carry either), at length. */
const HOSTILE_MESSAGE = `the platform said: bad\u0000value \ud800 ${'x'.repeat(5_000)}`;

/** The sandbox, except that the account summary fails with HOSTILE_MESSAGE. */
function failingSummary(real: AdsPlatform): AdsPlatform {
  return new Proxy(real, {
    get: (target, property, receiver) =>
      property === 'accountSummary' ? async () => Promise.reject(new PlatformUnavailableError(HOSTILE_MESSAGE)) : Reflect.get(target, property, receiver),
  });
}

/** Asks for the account summary, then answers; keeps every request it was given. */
function summaryThenAnswer(requests: ModelRequest[]): ModelClient {
  const turn = (parts: ModelTurn['parts']): ModelTurn => ({ parts, usage: { input_tokens: 1, output_tokens: 1 } });
  return {
    identity: { kind: 'rules', model: 'summary-then-answer' },
    generate: async (request) => {
      requests.push(request);
      return requests.length === 1 ? turn([{ kind: 'function_call', call: { name: 'get_account_summary', args: {} } }]) : turn([{ kind: 'text', text: 'The platform failed.' }]);
    },
  };
}

describe('a tool error whose text no event may carry', function () {
  this.timeout(60_000);
  let svc: TestService;
  let worker: AgentWorker | undefined;

  before(async () => {
    svc = await startTestService('toolerrors', { ROLES: 'http,projectors' });
  });
  after(async () => {
    await worker?.stop();
    await svc?.stop();
  });

  it('given a platform error with U+0000 and a lone surrogate, when the tool fails, then the model and ToolCalled get it sanitised and cut, and the run succeeds', async () => {
    const tenant = await svc.tenant();
    const infra = svc.service.infrastructure;
    const requests: ModelRequest[] = [];
    worker = new AgentWorker({
      infrastructure: infra,
      executor: {
        platform: failingSummary(createPlatform(infra.database.db)),
        proposals: new ProposalService(infra.commands, new ApprovalsAppliedChangeLookup(infra.database.db)),
        model: summaryThenAnswer(requests),
        wallClockMs: 10_000,
        modelBudgetMs: 10_000,
      },
      concurrency: 1,
      logger: createLogger('silent'),
      shutdownGraceMs: 1000,
      ackWaitMs: 5000,
    });
    await worker.start();

    const runId = await startRun(svc, tenant.keys.write, tenant.accounts.sandbox, 'Summarise the account');
    const run = await waitForTerminalRun(svc, tenant.keys.write, runId, 15_000);
    expect(run.status, JSON.stringify(run.error)).to.equal('succeeded');
    expect(run.result.tool_calls).to.deep.equal([{ name: 'get_account_summary', input: {}, ok: false }]);

    const told = requests[1]!.conversation.find((entry) => entry.role === 'tool');
    const error = (told?.role === 'tool' ? told.results[0]!.response.error : undefined) as string;
    expect(error.startsWith('the platform said: bad\uFFFDvalue \uFFFD xxx')).to.equal(true);
    expect(error).to.have.length(2_000);

    const recorded: EventEnvelope[] = [];
    for await (const { event } of infra.store.readFiltered(infra.subjects.all, 1)) {
      if (event.correlation_id === runId && event.type === 'ToolCalled') recorded.push(event);
    }
    expect(recorded.map((e) => (e.data as { output: unknown }).output)).to.deep.equal([{ error }]);
  });
});
