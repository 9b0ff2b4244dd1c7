import { expect } from 'chai';
import { parseCurl, sendCurl } from '../docs/curl-request.ts';
import { runCli } from '../support/cli.ts';
import { eventually } from '../support/eventually.ts';
import { startTestService, type TestService } from '../support/test-service.ts';

describe('adsagent demo (a real run, then a curl for every endpoint)', function () {
  this.timeout(180_000);
  let svc: TestService;

  before(async () => {
    svc = await startTestService('clidemo');
  });
  after(async () => svc?.stop());

  it('prints curls with real ids that answer, pasted in order, the status the demo says', async () => {
    const result = await runCli(svc.config, ['demo', '--json', '--url', svc.baseUrl], 150_000);
    expect(result.code, result.stderr).to.equal(0);
    const demo = JSON.parse(result.stdout) as {
      run_id: string;
      run_status: string;
      accounts: { platform: string }[];
      held_run: { id: string; queued_until: string; workspace_id: string; write_key: string } | null;
      write_key: string;
      read_key: string;
      examples: { name: string; expect_status: number; curl: string }[];
      curl: Record<string, string>;
    };
    expect(demo.run_status).to.equal('succeeded');
    expect(demo.accounts.map((a) => a.platform)).to.deep.equal(['sandbox', 'sandbox', 'none', 'sandbox']);
    // The cancel example has a queued run to cancel, in a workspace of its own whose run starts are paused.
    expect(demo.held_run).to.not.equal(null);
    expect(Date.parse(demo.held_run!.queued_until)).to.be.greaterThan(Date.now() + 60_000);
    expect(demo.curl.cancel_run).to.include(demo.held_run!.id).and.include(demo.held_run!.write_key);
    const held = await svc.request('GET', `/api/v1/runs/${demo.held_run!.id}`, { key: demo.held_run!.write_key });
    expect(((await held.json()) as { status: string }).status).to.equal('queued');
    // The demo workspace itself is not paused: a run a reader starts there with the demo's keys
    // (README, "Calling the API") finishes at once.
    const readerRun = await svc.request('POST', '/api/v1/runs', { key: demo.write_key, body: { brief: 'How did my campaigns do?', project_id: (demo.accounts[1] as unknown as { id: string }).id } });
    expect(readerRun.status).to.equal(202);
    const readerRunId = ((await readerRun.json()) as { id: string }).id;
    await eventually(async () => {
      const polled = await svc.request('GET', `/api/v1/runs/${readerRunId}`, { key: demo.read_key });
      expect(((await polled.json()) as { status: string }).status).to.equal('succeeded');
    }, 20_000);
    // Every endpoint of the API, each with the ids of the demo (no placeholder left to fill in).
    expect(demo.examples.map((e) => e.name)).to.include.members([
      'poll_run',
      'run_events',
      'list_approvals',
      'approve_action',
      'reject_action',
      'propose_target',
      'history',
      'kill_switch',
      'kill_switch_engage',
      'kill_switch_release',
      'cancel_run',
    ]);
    for (const example of demo.examples) expect(example.curl).not.to.match(/RUN_ID|ACTION_ID|<[a-z ]+>/);
    expect(demo.curl.poll_run).to.include(demo.run_id).and.include(demo.write_key);
    expect(demo.curl.kill_switch_engage).not.to.include(demo.write_key);

    const answered: Record<string, number> = {};
    for (const example of demo.examples) answered[example.name] = (await sendCurl(parseCurl(example.curl))).status;
    expect(answered).to.deep.equal(Object.fromEntries(demo.examples.map((e) => [e.name, e.expect_status])));

    // What the approve and reject curls did is visible afterwards in the approvals view.
    const account = (demo.accounts[0] as unknown as { id: string }).id;
    const approvals = await svc.request('GET', `/api/v1/accounts/${account}/approvals?run_id=${demo.run_id}`, { key: demo.read_key });
    const statuses = ((await approvals.json()) as { data: { status: string }[] }).data.map((a) => a.status);
    expect(statuses).to.include('rejected');
    expect(statuses.some((s) => s === 'approved' || s === 'applying' || s === 'applied')).to.equal(true);
    const canceled = await svc.request('GET', `/api/v1/runs/${demo.held_run!.id}`, { key: demo.held_run!.write_key });
    expect(((await canceled.json()) as { status: string; duration_ms: number | null })).to.include({ status: 'canceled' });
  });

  it('with --hold 0 keeps no run queued, and shows cancel on the finished demo run (409)', async () => {
    const result = await runCli(svc.config, ['demo', '--json', '--hold', '0', '--url', svc.baseUrl], 150_000);
    expect(result.code, result.stderr).to.equal(0);
    const demo = JSON.parse(result.stdout) as { run_id: string; held_run: unknown; examples: { name: string; expect_status: number; curl: string }[] };
    expect(demo.held_run).to.equal(null);
    const cancel = demo.examples.find((e) => e.name === 'cancel_run')!;
    expect(cancel.expect_status).to.equal(409);
    expect((await sendCurl(parseCurl(cancel.curl))).status).to.equal(409);
  });

  it('prints the same as text without --json: keys, the run and every curl with the status to expect', async () => {
    const result = await runCli(svc.config, ['demo', '--url', svc.baseUrl], 150_000);
    expect(result.code, result.stderr).to.equal(0);
    expect(result.stdout).to.include('write key').and.include('demo run').and.include('curl -si');
    expect(result.stdout).to.match(/# approve action \[200\]/).and.match(/# cancel run \[200\]/).and.include('held run');
  });

  it('says how to start the service when it cannot reach it, and exits 1', async () => {
    const result = await runCli(svc.config, ['demo', '--url', 'http://127.0.0.1:9']);
    expect(result.code).to.equal(1);
    expect(result.stderr).to.include('cannot reach the service at http://127.0.0.1:9').and.include('npm start').and.include('--url');
  });
});
