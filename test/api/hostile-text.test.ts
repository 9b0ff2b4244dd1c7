import { expect } from 'chai';
import { randomUUID } from 'node:crypto';
import { GENESIS_HASH, type EventEnvelope } from '../../src/events/envelope.ts';
import { sealEvent } from '../../src/events/event-hash.ts';
import { runCli } from '../support/cli.ts';
import { call } from './support/api-call.ts';
import { eventually } from '../support/eventually.ts';
import { startRun, waitForTerminalRun } from '../support/runs.ts';
import { startTestService, type TestService, type TestTenant } from '../support/test-service.ts';
import { api, approvalsPath, campaignsByStrategy, expectProblem, proposeTarget, waitForStatus } from '../safe-apply/helpers.ts';

/** Issue #9 item 1-2: no string can freeze the read side, from the API or straight from NATS. */
describe('hostile text: U+0000, C0 controls and lone surrogates', function () {
  this.timeout(60_000);
  let svc: TestService;
  let tenant: TestTenant;
  let other: TestTenant;

  before(async () => {
    svc = await startTestService('hostile-text');
    [tenant, other] = await Promise.all([svc.tenant('hostile-a'), svc.tenant('hostile-b')]);
  });
  after(async () => {
    await svc?.stop();
  });

  /** Sends a body as written: `\ud800` must reach JSON.parse as an escape, which JSON.stringify would not produce. */
  const postRaw = (path: string, body: string, key = tenant.keys.write) =>
    api(svc, 'POST', path, { key, body, headers: { 'content-type': 'application/json' } });

  describe('at the HTTP edge', () => {
    for (const [label, escaped] of [
      ['U+0000', '\\u0000'],
      ['an unpaired high surrogate', '\\ud800'],
      ['an unpaired low surrogate', '\\udc00'],
      ['a C0 control (ESC)', '\\u001b'],
    ] as const) {
      it(`refuses a brief containing ${label} with 422 naming /brief`, async () => {
        const result = await postRaw('/api/v1/runs', `{"brief":"waste ${escaped} here","project_id":"${tenant.accounts.sandbox}"}`);
        expectProblem(result, 422, 'validation-error');
        expect(result.body.errors.map((e: { pointer: string }) => e.pointer)).to.deep.equal(['/brief']);
      });
    }

    it('accepts tab, newline, carriage return and paired surrogates (an emoji)', async () => {
      const result = await postRaw('/api/v1/runs', `{"brief":"a\\tb\\nc\\r\\ud83d\\ude00","project_id":"${tenant.accounts.sandbox}"}`);
      expect(result.status, result.text).to.equal(202);
    });

    it('names a bad key by its pointer, and nested values by theirs', async () => {
      const result = await postRaw('/api/v1/runs', `{"brief":"ok","project_id":"${tenant.accounts.sandbox}","x\\u0000":{"y":["\\ud800"]}}`);
      expectProblem(result, 422, 'validation-error');
      expect(result.body.errors.map((e: { pointer: string }) => e.pointer)).to.deep.equal(['/x\uFFFD', '/x\uFFFD/y/0']);
    });

    it('refuses a body nesting deeper than 32 levels with 422 on every JSON-body route, and takes 32 levels', async () => {
      const nested = (depth: number) => `{"brief":"deep","project_id":"${tenant.accounts.sandbox}","x":${'['.repeat(depth - 1)}${']'.repeat(depth - 1)}}`;
      const deep = '['.repeat(10_000) + ']'.repeat(10_000);
      const campaign = (await campaignsByStrategy(svc, tenant.keys.read, tenant.accounts.sandbox)).cpa.id;
      for (const [path, key] of [
        ['/api/v1/runs', tenant.keys.write],
        [`/api/v1/accounts/${tenant.accounts.sandbox}/campaigns/${campaign}/target`, tenant.keys.write],
        ['/api/v1/workspace/kill-switch/engage', tenant.keys.admin],
      ] as const) {
        const result = await postRaw(path, deep, key);
        expectProblem(result, 422, 'validation-error');
        expect(result.body.errors).to.deep.equal([{ pointer: '/', message: 'nests arrays and objects deeper than 32 levels' }]);
      }
      expectProblem(await postRaw('/api/v1/runs', nested(33)), 422, 'validation-error');
      // 32 levels pass the guard and reach the schema, which names the unknown member.
      const atLimit = await postRaw('/api/v1/runs', nested(32));
      expectProblem(atLimit, 422, 'validation-error');
      expect(atLimit.body.errors.map((e: { pointer: string }) => e.pointer)).to.deep.equal(['/x']);
    });

    it('refuses a query parameter with U+0000 with 422 naming /<name>, on any API route', async () => {
      const history = await api(svc, 'GET', `/api/v1/accounts/${tenant.accounts.sandbox}/history?run_id=a%00b`, { key: tenant.keys.read });
      expectProblem(history, 422, 'validation-error');
      expect(history.body.errors[0].pointer).to.equal('/run_id');
      // Through the OpenAPI validator: a route without query parameters documents this 422 too.
      const accounts = await call(svc, 'GET', `/api/v1/accounts?x%01=1`, { key: tenant.keys.read });
      expect(accounts.status).to.equal(422);
      expect(accounts.body.errors).to.deep.equal([{ pointer: '/x\uFFFD', message: 'key contains a control character (only tab, newline and carriage return are allowed)' }]);
    });

    it('refuses a reject reason with U+0000 with 422, and the approvals view keeps updating', async () => {
      const account = tenant.accounts.sandbox;
      const { roas } = await campaignsByStrategy(svc, tenant.keys.read, account);
      const now = roas.bidding_strategy.target_roas_pct!;
      const first = await proposeTarget(svc, tenant.keys.write, account, roas.id, { target_roas_pct: Math.round(now * 0.97 * 10) / 10, reason: 'a' });
      const refused = await postRaw(`${approvalsPath(account)}/${first.id}/reject`, '{"reason":"no\\u0000"}');
      expectProblem(refused, 422, 'validation-error');
      expect(refused.body.errors.map((e: { pointer: string }) => e.pointer)).to.deep.equal(['/reason']);
      const note = await postRaw(`${approvalsPath(account)}/${first.id}/approve`, '{"note":"\\ud800"}');
      expectProblem(note, 422, 'validation-error');
      expect(note.body.errors.map((e: { pointer: string }) => e.pointer)).to.deep.equal(['/note']);

      const rejected = await postRaw(`${approvalsPath(account)}/${first.id}/reject`, '{"reason":"not now"}');
      expect(rejected.status, rejected.text).to.equal(200);
      await waitForStatus(svc, tenant.keys.read, account, first.id, 'rejected');
      const second = await proposeTarget(svc, tenant.keys.write, account, roas.id, { target_roas_pct: Math.round(now * 0.98 * 10) / 10, reason: 'b' });
      await waitForStatus(svc, tenant.keys.read, account, second.id, 'queued');
    });
  });

  describe('straight onto the log, bypassing the API', () => {
    it('parks the poisoned events, stays ready, and a run of another workspace created afterwards is projected and finishes', async () => {
      const infra = svc.service.infrastructure;
      // A genuine RunQueued to copy: the forged ones differ only in the brief and the run id.
      const genuineId = await startRun(svc, tenant.keys.write, tenant.accounts.sandbox2, 'Which campaigns waste budget?');
      await waitForTerminalRun(svc, tenant.keys.read, genuineId, 30_000);
      let template: EventEnvelope | undefined;
      for await (const { event } of infra.store.readFiltered(infra.subjects.all, 1)) {
        if (event.type === 'RunQueued' && (event.data as { run_id?: string }).run_id === genuineId) template = event;
      }
      expect(template, 'the genuine RunQueued').to.not.equal(undefined);
      const poisoned: number[] = [];
      const subject = infra.subjects.forAggregate({
        workspaceId: tenant.workspaceId,
        accountId: tenant.accounts.sandbox2,
        aggregate: template!.aggregate,
      });
      for (const brief of ['nul \u0000 here', 'surrogate \ud800 here']) {
        const runId = randomUUID();
        const { hash: _h, prev_hash: _p, ...unsealed } = template!;
        const forged = { ...unsealed, id: randomUUID(), correlation_id: runId, data: { ...(template!.data as Record<string, unknown>), run_id: runId, brief } };
        // Chained like the store does: after the subject's last event, guarded by its sequence.
        const position = await infra.store.positionOf(subject);
        let envelope: unknown;
        try {
          envelope = sealEvent(forged, position.lastHash);
        } catch {
          // The canonical JSON of the hash has no form for a lone surrogate: a forger writes any hash.
          envelope = { ...forged, prev_hash: position.lastHash, hash: 'e'.repeat(64) };
        }
        const ack = await infra.js.publish(subject, JSON.stringify(envelope), { expect: { lastSubjectSequence: position.lastSequence } });
        poisoned.push(ack.seq);
      }

      const runId = await startRun(svc, other.keys.write, other.accounts.sandbox, 'Which campaigns waste budget?');
      const run = await waitForTerminalRun(svc, other.keys.read, runId, 30_000);
      expect(run.status, JSON.stringify(run.error)).to.equal('succeeded');
      // The write model does not believe them either: the poisoned account is not "busy" with a forged run.
      const own = await waitForTerminalRun(svc, tenant.keys.read, await startRun(svc, tenant.keys.write, tenant.accounts.sandbox2, 'Which campaigns waste budget?'), 30_000);
      expect(own.status, JSON.stringify(own.error)).to.equal('succeeded');

      const ready = await api(svc, 'GET', '/readyz');
      expect(ready.status, ready.text).to.equal(200);
      expect(ready.body.checks.projections.detail).to.match(/parked in quarantine/);
      const metrics = await api(svc, 'GET', '/metrics');
      for (const projection of ['identity', 'runs', 'approvals']) {
        expect(metrics.text).to.include(`projector_quarantined_events{projection="${projection}"} 2`);
      }

      const listed = await runCli(svc.config, ['projections', 'quarantine', 'list', '--json']);
      expect(listed.code, listed.stderr).to.equal(0);
      const rows = JSON.parse(listed.stdout).events as { seq: number; projection: string; code: string }[];
      expect(rows.filter((r) => r.projection === 'runs').map((r) => [r.seq, r.code])).to.deep.equal(poisoned.map((seq) => [seq, 'bad-text']));

      const retried = await runCli(svc.config, ['projections', 'quarantine', 'retry', String(poisoned[0]), '--json']);
      expect(retried.code).to.equal(1);
      expect(JSON.parse(retried.stdout).results.map((r: { outcome: string }) => r.outcome)).to.deep.equal(['still-failing', 'still-failing', 'still-failing']);

      const human = await runCli(svc.config, ['projections', 'quarantine', 'list']);
      expect(human.stdout).to.include(`${poisoned[1]}\truns\tbad-text`);
    });
  });
});
