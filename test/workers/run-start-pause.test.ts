import { expect } from 'chai';
import { pauseRunStarts } from '../../src/operator/operator-commands.ts';
import { runCli } from '../support/cli.ts';
import { startRun, waitForTerminalRun } from '../support/runs.ts';
import { startTestService, type TestService, type TestTenant } from '../support/test-service.ts';

describe('pausing a workspace’s run starts (adsagent workspace pause-runs / resume-runs)', function () {
  this.timeout(90_000);
  let svc: TestService;
  let tenant: TestTenant;

  before(async () => {
    svc = await startTestService('runpause');
    tenant = await svc.tenant();
  });
  after(async () => svc?.stop());

  const statusOf = async (runId: string): Promise<string> =>
    ((await (await svc.request('GET', `/api/v1/runs/${runId}`, { key: tenant.keys.read })).json()) as { status: string }).status;

  it('keeps new runs queued while paused (another workspace’s runs go on), and starts them once resumed', async () => {
    const paused = await runCli(svc.config, ['workspace', 'pause-runs', tenant.workspaceId, '--for', '300', '--reason', 'incident review', '--json']);
    expect(paused.code, paused.stderr).to.equal(0);
    expect(Date.parse((JSON.parse(paused.stdout) as { run_starts_paused_until: string }).run_starts_paused_until)).to.be.greaterThan(Date.now() + 200_000);

    const held = await startRun(svc, tenant.keys.write, tenant.accounts.sandbox, 'Find wasted spend in search terms and propose negative keywords');
    const other = await svc.tenant('other');
    const free = await startRun(svc, other.keys.write, other.accounts.sandbox, 'Find wasted spend in search terms and propose negative keywords');
    expect((await waitForTerminalRun(svc, other.keys.write, free)).status).to.equal('succeeded');
    // The other workspace's run finished meanwhile; this one was offered to the worker and left queued.
    expect(await statusOf(held)).to.equal('queued');

    const resumed = await runCli(svc.config, ['workspace', 'resume-runs', tenant.workspaceId]);
    expect(resumed.code, resumed.stderr).to.equal(0);
    expect(resumed.stdout).to.include(`run starts of ${tenant.workspaceId} resumed`);
    expect((await waitForTerminalRun(svc, tenant.keys.write, held, 30_000)).status).to.equal('succeeded');
  });

  it('refuses a pause that is not a positive number of seconds, saying what to send', async () => {
    const result = await runCli(svc.config, ['workspace', 'pause-runs', tenant.workspaceId, '--for', '1.5']);
    expect(result.code).to.equal(2);
    expect(result.stderr).to.include('--for must be whole seconds from 1 to 604800');
  });

  it('an unknown workspace is refused with what to do next', async () => {
    const result = await pauseRunStarts(svc.service.infrastructure, 'no-such-workspace', 60, 'x').catch((error: unknown) => error);
    expect(result).to.be.instanceOf(Error);
    expect((result as Error).name).to.equal('WorkspaceNotFoundError');
  });
});
