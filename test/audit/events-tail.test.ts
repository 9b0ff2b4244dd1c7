import { expect } from 'chai';
import { randomUUID } from 'node:crypto';
import { GENESIS_HASH } from '../../src/events/envelope.ts';
import { workspaceCreated } from '../support/event-factory.ts';
import { streams } from '../../src/event-store/subjects.ts';
import { runCli, spawnCli } from '../support/cli.ts';
import { eventually } from '../support/eventually.ts';
import { startRun } from '../support/runs.ts';
import { startTestService, type TestService, type TestTenant } from '../support/test-service.ts';

describe('adsagent events tail', function () {
  this.timeout(90_000);
  let svc: TestService;
  let tenant: TestTenant;

  before(async () => {
    svc = await startTestService('eventstail', { ROLES: 'http,projectors' });
    tenant = await svc.tenant();
    await startRun(svc, tenant.keys.write, tenant.accounts.sandbox, 'first');
  });
  after(async () => svc?.stop());

  const lines = (stdout: string) => stdout.trim().split('\n').filter(Boolean).map((l) => JSON.parse(l) as { seq: number; type: string; account_id: string | null });

  it('prints every event as a JSON line, in stream order', async () => {
    const result = await runCli(svc.config, ['events', 'tail']);
    expect(result.code, result.stderr).to.equal(0);
    const events = lines(result.stdout);
    expect(events).to.have.length(await svc.service.infrastructure.store.lastSequence());
    expect(events.map((e) => e.seq)).to.deep.equal([...events.map((e) => e.seq)].sort((a, b) => a - b));
  });

  it('filters by account and type, and starts at a sequence or a time', async () => {
    const byAccount = lines((await runCli(svc.config, ['events', 'tail', '--account', tenant.accounts.sandbox])).stdout);
    expect(byAccount.length).to.be.greaterThan(1);
    expect(byAccount.every((e) => e.account_id === tenant.accounts.sandbox)).to.equal(true);
    const queued = lines((await runCli(svc.config, ['events', 'tail', '--type', 'RunQueued'])).stdout);
    expect(queued.map((e) => e.type)).to.deep.equal(['RunQueued']);
    const fromSeq = lines((await runCli(svc.config, ['events', 'tail', '--from-seq', '3'])).stdout);
    expect(fromSeq[0]!.seq).to.equal(3);
    const future = await runCli(svc.config, ['events', 'tail', '--since', '2999-01-01T00:00:00Z']);
    expect(future.code).to.equal(0);
    expect(future.stdout).to.equal('');
    const bad = await runCli(svc.config, ['events', 'tail', '--since', 'yesterday-ish']);
    expect(bad.code).to.equal(2);
  });

  it('follows new events until interrupted', async () => {
    const tail = spawnCli(svc.config, ['events', 'tail', '--follow', '--type', 'RunCanceled']);
    try {
      const runs = (await (await svc.request('GET', `/api/v1/accounts`, { key: tenant.keys.read })).json()) as unknown;
      expect(runs).to.be.an('object');
      await new Promise((resolve) => setTimeout(resolve, 1500));
      const runId = await startRun(svc, tenant.keys.write, tenant.accounts.sandbox2, 'to cancel');
      const canceled = await svc.request('DELETE', `/api/v1/runs/${runId}`, { key: tenant.keys.write });
      expect(canceled.status).to.equal(200);
      await eventually(() => expect(tail.stdout()).to.include(runId), 20_000);
    } finally {
      tail.child.kill('SIGINT');
    }
    const result = await tail.done;
    expect(result.code).to.equal(0);
    expect(lines(result.stdout).map((e) => e.type)).to.deep.equal(['RunCanceled']);
  });
  it('ends quietly (exit 0) when the reader of its output goes away, as `events tail --follow | head -1` does', async () => {
    const tail = spawnCli(svc.config, ['events', 'tail', '--follow']);
    // Like `head -1`: read the first line, then close the pipe.
    await new Promise<void>((resolve) => tail.child.stdout.once('data', () => resolve()));
    tail.child.stdout.destroy();
    // The next event is written to a closed pipe.
    const runId = await startRun(svc, tenant.keys.write, tenant.accounts.sandbox2, 'written after the reader left');
    const result = await tail.done;
    // This service runs no worker: free the account for the tests after this one.
    expect((await svc.request('DELETE', `/api/v1/runs/${runId}`, { key: tenant.keys.write })).status).to.equal(200);
    expect(result.code, result.stderr).to.equal(0);
    expect(result.stderr).to.not.include('EPIPE');
  });

  it('refuses an --account that is not an id (it would widen the subject filter), exit 2', async () => {
    for (const command of [['events', 'tail'], ['audit', 'verify']]) {
      const result = await runCli(svc.config, [...command, '--account', 'x.>']);
      expect(result.code, `${command.join(' ')}: ${result.stderr}`).to.equal(2);
      expect(result.stderr).to.include("--account must be an account id").and.not.include('a bug in adsagent');
    }
  });

  it('audit verify of an account or a range with no event verifies nothing and says so, exit 2 (never a passed audit)', async () => {
    const unknown = await runCli(svc.config, ['audit', 'verify', '--account', 'no-such-account']);
    expect(unknown.code).to.equal(2);
    expect(unknown.stderr).to.include('no event of account no-such-account is in the log').and.include('nothing was verified');
    const beyond = await runCli(svc.config, ['audit', 'verify', '--from-seq', '999999']);
    expect(beyond.code).to.equal(2);
    expect(beyond.stderr).to.include('no event from sequence 999999');
  });

  it('prints a replayed copy of a signed event as a corrupt chain-broken line, never as the event again', async () => {
    const infra = svc.service.infrastructure;
    const subject = infra.subjects.forAggregate(streams.account(tenant.workspaceId, tenant.accounts.sandbox));
    let queuedSeq = 0;
    for await (const { seq, event } of infra.store.readFiltered(subject, 1)) if (event.type === 'RunQueued') queuedSeq = seq;
    // The exact signed bytes again, without Nats-Msg-Id: nothing de-duplicates them.
    const replayed = (await infra.js.publish(subject, (await infra.store.rawAt(queuedSeq))!.data)).seq;
    const result = await runCli(svc.config, ['events', 'tail', '--account', tenant.accounts.sandbox, '--type', 'RunQueued']);
    expect(result.code, result.stderr).to.equal(0);
    const printed = result.stdout.trim().split('\n').map((line) => JSON.parse(line) as Record<string, unknown>);
    const replay = printed.find((line) => line.seq === replayed);
    expect(replay).to.deep.include({ subject, corrupt: true, code: 'chain-broken' });
    expect(replay).to.not.have.property('type');
    expect(printed.filter((line) => line.type === 'RunQueued' && line.seq === queuedSeq)).to.have.length(1);
  });
  it('from a later sequence, a subject with junk published before its first event: the junk is corrupt, the genuine first event is an event', async () => {
    const infra = svc.service.infrastructure;
    const workspaceId = randomUUID();
    const subject = infra.subjects.forAggregate({ workspaceId, accountId: null, aggregate: { type: 'workspace', id: workspaceId } });
    // A message on the subject before its first event: were the chain's start its first message,
    // the genuine WorkspaceCreated would print as a replayed copy of itself.
    const junk = (await infra.js.publish(subject, '{"not":"an event"}')).seq;
    const [created] = await infra.store.append(subject, [workspaceCreated(workspaceId)], { lastSequence: junk, lastHash: GENESIS_HASH });
    const result = await runCli(svc.config, ['events', 'tail', '--from-seq', String(junk)]);
    expect(result.code, result.stderr).to.equal(0);
    const printed = result.stdout.trim().split('\n').map((line) => JSON.parse(line) as Record<string, any>);
    expect(printed.find((line) => line.seq === junk)).to.deep.include({ corrupt: true, code: 'schema' });
    expect(printed.find((line) => line.seq === created!.seq)).to.deep.include({ type: 'WorkspaceCreated', workspace_id: workspaceId });
  });

  it('from a later sequence, prints a replayed first event as chain-broken and the genuine events after it as events', async () => {
    const infra = svc.service.infrastructure;
    const account = tenant.accounts.sandbox2;
    const subject = infra.subjects.forAggregate(streams.account(tenant.workspaceId, account));
    const first = (await infra.store.firstSeqOf(subject))!;
    // AccountCreated's signed bytes again, long after the subject began.
    const replayed = (await infra.js.publish(subject, (await infra.store.rawAt(first))!.data)).seq;
    const runId = await startRun(svc, tenant.keys.write, account, 'after the replay');
    const result = await runCli(svc.config, ['events', 'tail', '--account', account, '--from-seq', String(replayed)]);
    expect(result.code, result.stderr).to.equal(0);
    const printed = result.stdout.trim().split('\n').map((line) => JSON.parse(line) as Record<string, any>);
    expect(printed[0]).to.deep.include({ seq: replayed, corrupt: true, code: 'chain-broken' });
    const queued = printed.find((line) => line.type === 'RunQueued' && line.data.run_id === runId);
    expect(queued, 'the genuine RunQueued after the replay').to.not.equal(undefined);
    expect(printed.filter((line) => line.corrupt)).to.have.length(1);
  });
});
