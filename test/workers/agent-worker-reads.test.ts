import { expect } from 'chai';
import { streams } from '../../src/event-store/subjects.ts';
import type { AgentWorker } from '../../src/workers/agent-worker.ts';
import { startAgentWorker } from '../support/agent-worker.ts';
import { startRun, waitForTerminalRun } from '../support/runs.ts';
import { startTestService, type TestService, type TestTenant } from '../support/test-service.ts';

/**
 * What a run costs in reads of the event log: the worker decides its claim and its finish on the
 * account state it holds, and records tool calls on a transcript it knows to begin with the run,
 * so none of them reads first (the appends' expected sequences prove the state current).
 */
describe('the reads of the event log an agent run makes', function () {
  this.timeout(60_000);
  let svc: TestService;
  let tenant: TestTenant;
  let worker: AgentWorker | undefined;
  const reads = new Map<string, number>();
  let restore: (() => void) | undefined;

  before(async () => {
    svc = await startTestService('workerreads', { ROLES: 'http,projectors' });
    tenant = await svc.tenant();
    // Every read of a subject's newest event, which is what loading an aggregate's state starts with.
    const { store } = svc.service.infrastructure;
    const lastOfChecked = store.lastOfChecked.bind(store);
    store.lastOfChecked = (subject: string) => {
      reads.set(subject, (reads.get(subject) ?? 0) + 1);
      return lastOfChecked(subject);
    };
    restore = () => {
      store.lastOfChecked = lastOfChecked;
    };
    worker = await startAgentWorker(svc);
  });
  after(async () => {
    restore?.();
    await worker?.stop();
    await svc?.stop();
  });

  it('reads the account once (the worker’s check of the queued run), the key once and the run’s transcript never, over a run with tool calls', async () => {
    const { subjects } = svc.service.infrastructure;
    const accountId = tenant.accounts.sandbox;
    const account = subjects.forAggregate(streams.account(tenant.workspaceId, accountId));
    const key = subjects.forAggregate(streams.key(tenant.workspaceId, tenant.keyIds.write));
    reads.clear();
    const runId = await startRun(svc, tenant.keys.write, accountId, 'How are my campaigns doing?');
    const run = await waitForTerminalRun(svc, tenant.keys.write, runId);
    expect(run.status).to.equal('succeeded');
    expect(run.result.tool_calls.length, 'the rules agent called tools').to.be.greaterThan(0);
    const transcript = subjects.forAggregate(streams.run(tenant.workspaceId, accountId, runId));
    expect(reads.get(transcript) ?? 0, 'reads of the run’s transcript').to.equal(0);
    expect(reads.get(account) ?? 0, 'reads of the account').to.equal(1);
    expect(reads.get(key) ?? 0, 'reads of the key (the check before the first model turn)').to.equal(1);
  });
});
