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

  /** An agent worker (the one of this file; a previous one is stopped) on `platform` with `model`. */
  const startWorker = async (platform: AdsPlatform, model: ModelClient) => {
    await worker?.stop();
    const infra = svc.service.infrastructure;
    worker = new AgentWorker({
      infrastructure: infra,
      executor: {
        platform,
        proposals: new ProposalService(infra.commands, new ApprovalsAppliedChangeLookup(infra.database.db)),
        model,
        wallClockMs: 20_000,
        modelBudgetMs: 20_000,
      },
      concurrency: 1,
      logger: createLogger('silent'),
      shutdownGraceMs: 1000,
      ackWaitMs: 5000,
    });
    await worker.start();
  };

  it('given a platform error with U+0000 and a lone surrogate, when the tool fails, then the model and ToolCalled get it sanitised and cut, and the run succeeds', async () => {
    const tenant = await svc.tenant();
    const infra = svc.service.infrastructure;
    const requests: ModelRequest[] = [];
    await startWorker(failingSummary(createPlatform(infra.database.db)), summaryThenAnswer(requests));

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

  it('given a tool call whose arguments nest 3,000 levels deep (6 KB), then the model is told, the call is recorded as text, and the run succeeds', async () => {
    const tenant = await svc.tenant();
    const infra = svc.service.infrastructure;
    let deep: unknown = 1;
    for (let i = 0; i < 3_000; i++) deep = [deep];
    const requests: ModelRequest[] = [];
    const turn = (parts: ModelTurn['parts']): ModelTurn => ({ parts, usage: { input_tokens: 1, output_tokens: 1 } });
    await startWorker(createPlatform(infra.database.db), {
      identity: { kind: 'rules', model: 'deep-arguments' },
      generate: async (request) => {
        requests.push(request);
        return requests.length === 1 ? turn([{ kind: 'function_call', call: { name: 'list_campaigns', args: { deep } } }]) : turn([{ kind: 'text', text: 'Done.' }]);
      },
    });
    const runId = await startRun(svc, tenant.keys.write, tenant.accounts.sandbox, 'List campaigns');
    const run = await waitForTerminalRun(svc, tenant.keys.write, runId, 20_000);
    expect(run.status, JSON.stringify(run.error)).to.equal('succeeded');
    const recorded: Record<string, unknown>[] = [];
    for await (const { event } of infra.store.readFiltered(infra.subjects.all, 1)) {
      if (event.correlation_id === runId && event.type === 'ToolCalled') recorded.push((event.data as { input: Record<string, unknown> }).input);
    }
    expect(recorded).to.have.length(1);
    expect(recorded[0]!.truncated_input).to.be.a('string').and.match(/^\{"deep":\[\[\[/);
    expect(recorded[0]!.original_chars).to.equal(JSON.stringify({ deep }).length);
  });

  it('given an account of 20,000 keywords, when the model lists them, then it is given whole rows up to 200,000 characters with a note on how to ask for less, and the history records the same', async () => {
    const tenant = await svc.tenant();
    const infra = svc.service.infrastructure;
    const real = createPlatform(infra.database.db);
    const keyword = (i: number) => ({ id: `kw-${i}`, campaign_id: '1', ad_group_id: '1', text: `keyword number ${i}`, match_type: 'broad', status: 'enabled', max_cpc: 1.5, impressions: 100, clicks: 10, cost: 12.5, conversions: 1, conversion_value: 40 });
    const huge: AdsPlatform = new Proxy(real, {
      get: (target, property, receiver) =>
        property === 'listKeywords' ? async () => Array.from({ length: 20_000 }, (_, i) => keyword(i)) : Reflect.get(target, property, receiver),
    });
    const requests: ModelRequest[] = [];
    const turn = (parts: ModelTurn['parts']): ModelTurn => ({ parts, usage: { input_tokens: 1, output_tokens: 1 } });
    await startWorker(huge, {
      identity: { kind: 'rules', model: 'list-keywords-then-answer' },
      generate: async (request) => {
        requests.push(request);
        return requests.length === 1 ? turn([{ kind: 'function_call', call: { name: 'list_keywords', args: {} } }]) : turn([{ kind: 'text', text: 'Listed.' }]);
      },
    });

    const runId = await startRun(svc, tenant.keys.write, tenant.accounts.sandbox, 'List my keywords');
    const run = await waitForTerminalRun(svc, tenant.keys.write, runId, 20_000);
    expect(run.status, JSON.stringify(run.error)).to.equal('succeeded');
    const told = requests[1]!.conversation.find((entry) => entry.role === 'tool');
    const given = (told?.role === 'tool' ? told.results[0]!.response : undefined) as { keywords: { id: string }[]; cut: { member: string; kept: number; of: number; note: string } };
    expect(JSON.stringify(given).length).to.be.at.most(200_000);
    expect(given.cut).to.include({ member: 'keywords', of: 20_000 });
    expect(given.cut.kept).to.equal(given.keywords.length).and.be.greaterThan(100).and.below(20_000);
    expect(given.cut.note).to.include('campaign_id');
    // Whole rows, in order: the first kept ones as the platform listed them.
    expect(given.keywords.slice(0, 2).map((k) => k.id)).to.deep.equal(['kw-0', 'kw-1']);

    const recorded: unknown[] = [];
    for await (const { event } of infra.store.readFiltered(infra.subjects.all, 1)) {
      if (event.correlation_id === runId && event.type === 'ToolCalled') recorded.push((event.data as { output: unknown }).output);
    }
    expect(recorded).to.deep.equal([given]);
  });
});
