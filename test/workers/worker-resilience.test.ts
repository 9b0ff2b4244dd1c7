import { expect } from 'chai';
import { randomUUID } from 'node:crypto';
import type { ModelClient, ModelRequest, ModelTurn } from '../../src/agent/model/model-port.ts';
import { createLogger } from '../../src/log/logger.ts';
import { createAccount, revokeKey } from '../../src/operator/operator-commands.ts';
import { createPlatform } from '../../src/platform/create-platform.ts';
import { ProposalService } from '../../src/policy/proposal-service.ts';
import { AGENT_WORKER_CONSUMER, AgentWorker } from '../../src/workers/agent-worker.ts';
import { eventually } from '../support/eventually.ts';
import { startRun, waitForTerminalRun } from '../support/runs.ts';
import { startTestService, type TestService } from '../support/test-service.ts';
import { accountDecider } from '../../commands/account/account-decider.ts';
import { loadAccount } from '../../commands/queries.ts';
import { streams } from '../../src/event-store/subjects.ts';
import { ApprovalsAppliedChangeLookup } from '../../projections/approvals/applied-change-lookup.ts';
import { sampleOf } from '../support/prometheus.ts';

const TEXT = (text: string): ModelTurn => ({ parts: [{ kind: 'text', text }], usage: { input_tokens: 1, output_tokens: 1 } });
const CALL = (name: string, args: Record<string, unknown> = {}): ModelTurn => ({
  parts: [{ kind: 'function_call', call: { name, args } }],
  usage: { input_tokens: 1, output_tokens: 1 },
});

/** A model whose turns the test hands out one by one. */
class ScriptedModel implements ModelClient {
  readonly identity = { kind: 'gemini', model: 'scripted' } as const;
  readonly requests: ModelRequest[] = [];
  private readonly waiting: ((turn: ModelTurn) => void)[] = [];
  private readonly ready: ModelTurn[] = [];

  generate(request: ModelRequest): Promise<ModelTurn> {
    this.requests.push(request);
    const turn = this.ready.shift();
    if (turn) return Promise.resolve(turn);
    return new Promise((resolve) => this.waiting.push(resolve));
  }

  give(turn: ModelTurn): void {
    const waiter = this.waiting.shift();
    if (waiter) waiter(turn);
    else this.ready.push(turn);
  }
}

/** A model that thinks for `ms`, then answers in text: a slow run. */
class SlowModel implements ModelClient {
  readonly identity = { kind: 'gemini', model: 'slow' } as const;
  private readonly ms: number;

  constructor(ms: number) {
    this.ms = ms;
  }
  async generate(): Promise<ModelTurn> {
    await new Promise((resolve) => setTimeout(resolve, this.ms));
    return TEXT('done');
  }
}

function worker(svc: TestService, model: ModelClient, options: { concurrency?: number; maxRunsPerWorkspace?: number } = {}): AgentWorker {
  const infra = svc.service.infrastructure;
  return new AgentWorker({
    infrastructure: infra,
    executor: {
      platform: createPlatform(infra.database.db),
      proposals: new ProposalService(infra.commands, new ApprovalsAppliedChangeLookup(infra.database.db)),
      model,
      wallClockMs: 30_000,
      modelBudgetMs: 30_000,
    },
    concurrency: options.concurrency ?? 1,
    maxRunsPerWorkspace: options.maxRunsPerWorkspace,
    maxDeliveries: 2,
    logger: createLogger('silent'),
    shutdownGraceMs: 1000,
    ackWaitMs: 5000,
  });
}

async function metric(svc: TestService, name: string, labels: string): Promise<number> {
  return sampleOf(await (await svc.request('GET', '/metrics')).text(), `${name}{${labels}}`) ?? 0;
}

describe('agent runs stop before their next tool call once they may not go on', function () {
  this.timeout(60_000);
  let svc: TestService | undefined;
  let agent: AgentWorker | undefined;
  afterEach(async () => {
    await agent?.stop();
    await svc?.stop();
  });

  /** A run whose first tool call is done and recorded, its model waiting for the next turn. */
  async function runAfterItsFirstToolCall(label: string) {
    svc = await startTestService(label, { ROLES: 'http,projectors' });
    const tenant = await svc.tenant(label);
    const model = new ScriptedModel();
    agent = worker(svc, model);
    await agent.start();
    model.give(CALL('get_account_summary'));
    const runId = await startRun(svc, tenant.keys.write, tenant.accounts.sandbox, 'Summarise the account, then look at campaigns');
    // The second model request: the first tool call is done and recorded.
    await eventually(() => expect(model.requests).to.have.length(2), 20_000);
    return { svc, tenant, model, runId };
  }

  it('makes the tool call before a revocation and none after it; the run fails with key_revoked', async () => {
    const { svc, tenant, model, runId } = await runAfterItsFirstToolCall('revoke');
    await revokeKey(svc.service.infrastructure, tenant.keyIds.write);
    model.give(CALL('list_campaigns'));
    const run = await waitForTerminalRun(svc, tenant.keys.read, runId, 20_000);
    expect(run.status).to.equal('failed');
    expect(run.error.code).to.equal('key_revoked');
    expect(run.error.message).to.include('before its next tool call');
    expect(run.result.tool_calls.map((c: { name: string }) => c.name)).to.deep.equal(['get_account_summary']);
    expect(model.requests, 'no model turn after the stop').to.have.length(2);
  });

  it('makes no tool call and no model turn after another worker failed the run (a takeover)', async () => {
    const { svc, tenant, model, runId } = await runAfterItsFirstToolCall('takeover');
    // What a worker that took this run for dead does: it fails the run in the owner's name.
    const { aggregates, commands } = svc.service.infrastructure;
    const account = await loadAccount(aggregates, tenant.workspaceId, tenant.accounts.sandbox);
    await commands.handle(accountDecider, {
      type: 'FinishRun',
      workspaceId: tenant.workspaceId,
      accountId: tenant.accounts.sandbox,
      runId,
      workerId: account.state.activeRun!.workerId,
      outcome: {
        kind: 'failed',
        code: 'internal',
        message: 'taken over by another worker (test)',
        text: '',
        truncated: false,
        usage: { input_tokens: 0, output_tokens: 0, steps: 0 },
        durationMs: null,
      },
      meta: { actor: { kind: 'worker', id: 'the-other-worker' }, correlationId: runId },
    });
    model.give(CALL('list_campaigns'));
    const run = await waitForTerminalRun(svc, tenant.keys.read, runId, 20_000);
    expect(run.status).to.equal('failed');
    expect(run.error.message).to.equal('taken over by another worker (test)');
    await new Promise((resolve) => setTimeout(resolve, 500));
    const history = (await (await svc.request('GET', `/api/v1/accounts/${tenant.accounts.sandbox}/history?run_id=${runId}`, { key: tenant.keys.read })).json()) as {
      data: { type: string; data: { name?: string } }[];
    };
    expect(history.data.filter((e) => e.type === 'ToolCalled').map((e) => e.data.name)).to.deep.equal(['get_account_summary']);
    expect(model.requests, 'no model turn after the stop').to.have.length(2);
  });
});

describe('agent worker fairness across workspaces (AGENT_MAX_RUNS_PER_WORKSPACE)', function () {
  this.timeout(90_000);
  let svc: TestService;
  let agent: AgentWorker | undefined;
  after(async () => {
    await agent?.stop();
    await svc?.stop();
  });

  it("starts workspace B's run before workspace A's backlog drains, and never runs more than the limit of A at once", async () => {
    svc = await startTestService('fairness', { ROLES: 'http,projectors' });
    const [a, b] = await Promise.all([svc.tenant('ws-a'), svc.tenant('ws-b')]);
    const infra = svc.service.infrastructure;
    const extra = await Promise.all([1, 2].map((i) => createAccount(infra, a.workspaceId, `a extra ${i}`, 'sandbox')));
    const accountsOfA = [a.accounts.sandbox, a.accounts.sandbox2, ...extra.map((e) => e.value.id)];
    const runsOfA: string[] = [];
    for (const account of accountsOfA) runsOfA.push(await startRun(svc, a.keys.write, account, 'Summarise the account'));
    const runOfB = await startRun(svc, b.keys.write, b.accounts.sandbox, 'Summarise the account');

    agent = worker(svc, new SlowModel(1500), { concurrency: 2, maxRunsPerWorkspace: 1 });
    await agent.start();
    const finishedA = await Promise.all(runsOfA.map((id) => waitForTerminalRun(svc, a.keys.read, id, 60_000)));
    const finishedB = await waitForTerminalRun(svc, b.keys.read, runOfB, 60_000);
    for (const run of [...finishedA, finishedB]) expect(run.status).to.equal('succeeded');

    const startsOfA = finishedA.map((r) => Date.parse(r.started_at)).sort((x, y) => x - y);
    // B waited for at most one run of A, not for A's backlog of four.
    expect(Date.parse(finishedB.started_at)).to.be.below(startsOfA[1]!);
    // A's runs never overlapped: one at a time in this process.
    const spans = finishedA.map((r) => [Date.parse(r.started_at), Date.parse(r.finished_at)] as const).sort((x, y) => x[0] - y[0]);
    for (let i = 1; i < spans.length; i++) expect(spans[i]![0], `run ${i} of A starts after run ${i - 1} ended`).to.be.at.least(spans[i - 1]![1]);
  });
});

describe('worker loops that cannot be wedged', function () {
  this.timeout(90_000);
  let svc: TestService;
  after(async () => {
    await svc?.stop();
  });

  before(async () => {
    svc = await startTestService('wedge', { ROLES: 'http,projectors,agent-worker,apply-worker', WORKER_MAX_DELIVERIES: '2' });
  });

  it('restarts a loop whose consumer was deleted under it, logs it, and work still gets done', async () => {
    const tenant = await svc.tenant('restart');
    const infra = svc.service.infrastructure;
    expect(await metric(svc, 'worker_loop_restarts_total', 'worker="agent-worker"')).to.equal(0);
    await infra.jsm.consumers.delete(svc.config.eventStream, AGENT_WORKER_CONSUMER);
    await eventually(async () => expect(await metric(svc, 'worker_loop_restarts_total', 'worker="agent-worker"')).to.be.at.least(1), 20_000, 200);
    const runId = await startRun(svc, tenant.keys.write, tenant.accounts.sandbox, 'Summarise the account');
    const run = await waitForTerminalRun(svc, tenant.keys.read, runId, 30_000);
    expect(run.status).to.equal('succeeded');
  });

  // A forged or unreadable message is parked at once by both workers (admission refuses it);
  // a believable message whose handling keeps failing is covered in test/workers/pull-loop.test.ts.
  it('parks unreadable and forged (unsigned) messages in both workers at once, and goes on', async () => {
    const tenant = await svc.tenant('poison');
    const other = await svc.tenant('poison-other');
    const infra = svc.service.infrastructure;
    const { js, subjects, store } = infra;
    // A RunQueued of a real run, to copy a schema-valid envelope from.
    const realRun = await startRun(svc, tenant.keys.write, tenant.accounts.sandbox, 'Summarise the account');
    await waitForTerminalRun(svc, tenant.keys.read, realRun, 30_000);
    const queued = (await (await svc.request('GET', `/api/v1/accounts/${tenant.accounts.sandbox}/history?run_id=${realRun}`, { key: tenant.keys.read })).json()) as {
      data: Record<string, any>[];
    };
    const template = queued.data.find((e) => e.type === 'RunQueued')!;
    const ghost = randomUUID();
    const ghostSubject = subjects.forAggregate(streams.account(tenant.workspaceId, ghost));
    const { seq: _seq, ...envelope } = template;
    // Unreadable, on an account subject (agent worker) and on an action subject (apply worker).
    const unreadable = (await js.publish(ghostSubject, '{"not json')).seq;
    const ghostAction = randomUUID();
    const ghostActionSubject = subjects.forAggregate(streams.action(tenant.workspaceId, ghost, ghostAction));
    await js.publish(ghostActionSubject, '\u0000');
    // Well-formed but forged: a copy of a signed envelope with other content no longer verifies.
    const approved = {
      ...envelope,
      id: randomUUID(),
      type: 'ActionApproved',
      account_id: ghost,
      aggregate: { type: 'action', id: ghostAction },
      correlation_id: ghostAction,
      data: { note: 'approved' },
    };
    await js.publish(ghostActionSubject, JSON.stringify(approved));
    const failing = (
      await js.publish(ghostSubject, JSON.stringify({ ...envelope, id: randomUUID(), account_id: ghost, aggregate: { type: 'account', id: ghost }, data: { ...template.data, run_id: randomUUID() } }))
    ).seq;
    expect(failing).to.be.greaterThan(unreadable);

    await eventually(async () => {
      expect(await metric(svc, 'worker_parked_messages_total', 'worker="agent-worker",reason="inadmissible"')).to.equal(2);
      expect(await metric(svc, 'worker_parked_messages_total', 'worker="apply-worker",reason="inadmissible"')).to.equal(2);
    }, 20_000, 200);
    await eventually(async () => {
      // Nothing left waiting or unacknowledged: the consumer moved past both.
      const consumer = await infra.jsm.consumers.info(svc.config.eventStream, AGENT_WORKER_CONSUMER);
      expect([consumer.num_pending, consumer.num_ack_pending]).to.deep.equal([0, 0]);
      expect(consumer.delivered.stream_seq).to.be.at.least(failing);
    }, 10_000, 100);

    // The worker goes on: a run of another workspace, created afterwards, runs to the end.
    const after = await startRun(svc, other.keys.write, other.accounts.sandbox, 'Summarise the account');
    await eventually(async () => {
      const last = await store.lastOf(subjects.forAggregate(streams.account(other.workspaceId, other.accounts.sandbox)));
      expect(last?.event.type).to.equal('RunSucceeded');
      expect((last?.event.data as { run_id: string }).run_id).to.equal(after);
    }, 30_000, 100);
  });
});
