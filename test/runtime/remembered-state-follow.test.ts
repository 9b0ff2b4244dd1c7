import { expect } from 'chai';
import { accountDecider } from '../../commands/account/account-decider.ts';
import { streams } from '../../src/event-store/subjects.ts';
import { openInfrastructure, type Infrastructure } from '../../src/runtime/infrastructure.ts';
import { freshAccount } from '../api/support/api-call.ts';
import { eventually } from '../support/eventually.ts';
import { startTestService, type TestService, type TestTenant } from '../support/test-service.ts';

/**
 * An HTTP process remembers the account state it last wrote; its run-state follower keeps that
 * state current with what other processes append (src/runtime/service.ts wires it), so a run
 * started right after another process ended the previous one needs no read of the account.
 */
describe('an HTTP process following what other processes append to an account', function () {
  this.timeout(30_000);
  let svc: TestService;
  let other: Infrastructure;
  let tenant: TestTenant;
  const meta = { actor: { kind: 'operator' as const, id: 'op' }, correlationId: 'c' };

  before(async () => {
    svc = await startTestService('followremembered', { ROLES: 'http,projectors' });
    // Another process on the same stream: an operator's tool, another HTTP process, a worker.
    other = await openInfrastructure(svc.config, 'test-other-process');
    tenant = await svc.tenant('follow');
  });

  after(async () => {
    await other?.close();
    await svc?.stop();
  });

  it('starts a run on an account whose run another process canceled without reading the account again', async () => {
    const account = await freshAccount(svc, tenant.workspaceId);
    const first = await svc.request('POST', '/api/v1/runs', { key: tenant.keys.write, body: { brief: 'First.', project_id: account } });
    expect(first.status).to.equal(202);
    const runId = ((await first.json()) as { id: string }).id;
    await other.commands.handle(accountDecider, { type: 'CancelRun', workspaceId: tenant.workspaceId, accountId: account, runId, knownStatus: 'queued', meta });
    // The service shows the cancel once its follower has folded it (the feed runs in the same step).
    await eventually(async () => {
      const run = (await (await svc.request('GET', `/api/v1/runs/${runId}`, { key: tenant.keys.write })).json()) as { status: string };
      expect(run.status).to.equal('canceled');
    });

    const { store, subjects } = svc.service.infrastructure;
    const accountSubject = subjects.forAggregate(streams.account(tenant.workspaceId, account));
    let accountReads = 0;
    const lastOfChecked = store.lastOfChecked.bind(store);
    store.lastOfChecked = async (subject: string) => {
      if (subject === accountSubject) accountReads++;
      return lastOfChecked(subject);
    };
    try {
      const second = await svc.request('POST', '/api/v1/runs', { key: tenant.keys.write, body: { brief: 'Second.', project_id: account } });
      expect(second.status).to.equal(202);
    } finally {
      store.lastOfChecked = lastOfChecked;
    }
    expect(accountReads, 'reads of the account by the second POST').to.equal(0);
  });
});
