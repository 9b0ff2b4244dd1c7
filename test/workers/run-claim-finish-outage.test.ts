import { expect } from 'chai';
import type { ModelClient, ModelTurn } from '../../src/agent/model/model-port.ts';
import type { Commands } from '../../commands/command-bus.ts';
import { EventStoreUnavailableError } from '../../src/event-store/errors.ts';
import type { EventStore } from '../../src/event-store/event-store.ts';
import type { AgentWorker } from '../../src/workers/agent-worker.ts';
import { askLiveness, Liveness } from '../../src/workers/worker-liveness.ts';
import { startAgentWorker } from '../support/agent-worker.ts';
import { eventually } from '../support/eventually.ts';
import { startRun, waitForTerminalRun } from '../support/runs.ts';
import { startTestService, type TestService, type TestTenant } from '../support/test-service.ts';

const ANSWER = 'Spend is steady; nothing to change.';

/** A model that answers every request in text at once, and counts the requests (a run asks once). */
class AnsweringModel implements ModelClient {
  readonly identity = { kind: 'gemini', model: 'answering' } as const;
  requests = 0;

  generate(): Promise<ModelTurn> {
    this.requests++;
    return Promise.resolve({ parts: [{ kind: 'text', text: ANSWER }], usage: { input_tokens: 3, output_tokens: 2 } });
  }
}

/** The account events of one run, as the history API shows them. */
async function runEvents(svc: TestService, tenant: TestTenant, runId: string): Promise<string[]> {
  const response = await svc.request('GET', `/api/v1/accounts/${tenant.accounts.sandbox}/history?run_id=${runId}`, { key: tenant.keys.read });
  const body = (await response.json()) as { data: { type: string }[] };
  return body.data.map((e) => e.type).filter((type) => type.startsWith('Run'));
}

/** Replaces the bus's handling of commands for the test; the returned function puts it back. */
function interceptCommands(commands: Commands, intercept: (real: Commands['handle']) => Commands['handle']): () => void {
  const real = commands.handle.bind(commands);
  commands.handle = intercept(real);
  return () => {
    commands.handle = real;
  };
}

/** Replaces the store's appends for the test; the returned function puts them back. */
function interceptAppends(store: EventStore, intercept: (real: EventStore['append']) => EventStore['append']): () => void {
  const real = store.append.bind(store);
  store.append = intercept(real);
  return () => {
    store.append = real;
  };
}

describe('an agent run whose claim or outcome meets an event-log outage', function () {
  this.timeout(90_000);
  let svc: TestService;
  let tenant: TestTenant;
  let worker: AgentWorker | undefined;
  let restore: (() => void) | undefined;

  beforeEach(async () => {
    // No agent worker in the service: the only one is the test's.
    svc = await startTestService('claimfinishoutage', { ROLES: 'http,projectors' });
    tenant = await svc.tenant('claimfinish');
  });

  afterEach(async () => {
    restore?.();
    restore = undefined;
    await worker?.stop();
    worker = undefined;
    await svc?.stop();
  });

  /** Starts the test's worker and a run: the run succeeds with the agent's answer, the agent asked once, one RunStarted and one RunSucceeded. */
  async function expectRunSucceedsOnce(): Promise<void> {
    const model = new AnsweringModel();
    worker = await startAgentWorker(svc, { model, ackWaitMs: 3000 });
    const runId = await startRun(svc, tenant.keys.write, tenant.accounts.sandbox, 'Summarise the account');
    const run = await waitForTerminalRun(svc, tenant.keys.read, runId, 30_000);
    expect(run.status).to.equal('succeeded');
    expect(run.result.text).to.equal(ANSWER);
    expect(model.requests, 'the agent ran once').to.equal(1);
    expect(await runEvents(svc, tenant, runId)).to.deep.equal(['RunQueued', 'RunStarted', 'RunSucceeded']);
  }

  it('given the claim was stored but its acknowledgement lost, the worker runs the run once and it succeeds with the agent’s text', async () => {
    const { store } = svc.service.infrastructure;
    let lost = 0;
    restore = interceptAppends(store, (real) => async (subject, events, expected) => {
      const stored = await real(subject, events, expected);
      if (lost === 0 && events.some((e) => e.type === 'RunStarted')) {
        lost++;
        // The server stored it; the client never saw the PubAck (a timeout during a leader change).
        throw new EventStoreUnavailableError(`append to ${subject} failed: TimeoutError: timeout`);
      }
      return stored as never;
    });
    await expectRunSucceedsOnce();
    expect(lost, 'the RunStarted acknowledgement was lost').to.equal(1);
  });

  it('given the claim was stored but its handling gave up (an outage past its allowance), the message’s redelivery runs the run instead of failing it as orphaned', async () => {
    const { commands } = svc.service.infrastructure;
    let gaveUp = 0;
    restore = interceptCommands(commands, (real) => (async (decider, command, options) => {
      const result = await real(decider, command, options);
      if (gaveUp === 0 && command.type === 'ClaimRun') {
        gaveUp++;
        // What handle() throws once the event log stayed unreachable past its allowance, after the append landed.
        throw new EventStoreUnavailableError('append failed: no responders');
      }
      return result;
    }) as Commands['handle']);
    await expectRunSucceedsOnce();
    expect(gaveUp, 'the claim’s handling gave up').to.equal(1);
  });

  it('given the event log is unreachable for 17 s when the run finishes, the worker keeps the run (liveness: working) and records the agent’s answer once the log is back', async () => {
    const { store, nc } = svc.service.infrastructure;
    let outageUntil = 0;
    restore = interceptAppends(store, (real) => async (subject, events, expected) => {
      // Longer than the command bus waits out an outage (15 s).
      if (outageUntil === 0 && events.some((e) => e.type === 'RunSucceeded')) outageUntil = Date.now() + 17_000;
      if (Date.now() < outageUntil) throw new EventStoreUnavailableError(`append to ${subject} failed: no responders`);
      return real(subject, events, expected);
    });
    const model = new AnsweringModel();
    const w = await startAgentWorker(svc, { model, ackWaitMs: 3000 });
    worker = w;

    const runId = await startRun(svc, tenant.keys.write, tenant.accounts.sandbox, 'Summarise the account');
    await eventually(() => expect(outageUntil).to.be.greaterThan(0), 20_000);
    // Past the bus's allowance, the outcome still waits in the worker, which still owns the run.
    await new Promise((resolve) => setTimeout(resolve, 16_000));
    const liveness = await askLiveness(nc, svc.config.subjectPrefix, w.workerId, runId);
    const run = await waitForTerminalRun(svc, tenant.keys.read, runId, 30_000);

    expect(run.status).to.equal('succeeded');
    expect(run.error).to.equal(null);
    expect(run.result.text).to.equal(ANSWER);
    expect(run.result.usage).to.include({ input_tokens: 3, output_tokens: 2 });
    expect(model.requests, 'the agent ran once').to.equal(1);
    expect(await runEvents(svc, tenant, runId)).to.deep.equal(['RunQueued', 'RunStarted', 'RunSucceeded']);
    expect(liveness, 'the worker answered that it still works on the run').to.equal(Liveness.Working);
  });

  it('given the event log stays unreachable, a stopping worker gives the outcome up after its grace instead of hanging', async () => {
    const { commands } = svc.service.infrastructure;
    let attempts = 0;
    restore = interceptCommands(commands, (real) => (async (decider, command, options) => {
      if (command.type === 'FinishRun') {
        attempts++;
        throw new EventStoreUnavailableError('append failed: no responders');
      }
      return real(decider, command, options);
    }) as Commands['handle']);
    const w = await startAgentWorker(svc, { model: new AnsweringModel(), ackWaitMs: 3000 });
    worker = w;

    await startRun(svc, tenant.keys.write, tenant.accounts.sandbox, 'Summarise the account');
    await eventually(() => expect(attempts).to.be.greaterThan(1), 20_000);
    const stopping = Date.now();
    worker = undefined;
    await w.stop();

    // The grace is 1 s; a retry step is at most 5 s, and the stop ends the current one.
    expect(Date.now() - stopping).to.be.lessThan(3000);
  });

  it('given recording the outcome failed for another reason than an outage, the run this worker began is not run again: it is failed as orphaned', async () => {
    const { commands } = svc.service.infrastructure;
    let failed = 0;
    restore = interceptCommands(commands, (real) => (async (decider, command, options) => {
      // The first FinishRun is the worker's own, with the agent's answer.
      if (failed === 0 && command.type === 'FinishRun') {
        failed++;
        throw new Error('a bug while recording the outcome');
      }
      return real(decider, command, options);
    }) as Commands['handle']);
    const model = new AnsweringModel();
    worker = await startAgentWorker(svc, { model, ackWaitMs: 3000 });

    const runId = await startRun(svc, tenant.keys.write, tenant.accounts.sandbox, 'Summarise the account');
    const run = await waitForTerminalRun(svc, tenant.keys.read, runId, 30_000);

    expect(failed).to.equal(1);
    expect(run.status).to.equal('failed');
    expect(run.error.code).to.equal('internal');
    expect(run.error.message).to.include('stopped while running');
    expect(model.requests, 'the agent did not run again').to.equal(1);
  });
});
