import { expect } from 'chai';
import type { RunOutcome } from '../../commands/account/run-lifecycle.ts';
import { v7 as uuidv7 } from 'uuid';
import { RunNotClaimableError } from '../../commands/account/run-lifecycle.ts';
import { eventually } from '../support/eventually.ts';
import { startTestService, type TestService, type TestTenant } from '../support/test-service.ts';
import { API_TEST_ROLES, call, expectProblem, freshAccount, problemShape, type ApiResult } from './support/api-call.ts';
import { accountDecider } from '../../commands/account/account-decider.ts';

const WORKER_ID = 'api-test-worker';

describe('GET and DELETE /api/v1/runs/{runId}', function () {
  this.timeout(30_000);
  let svc: TestService;
  let tenant: TestTenant;
  let other: TestTenant;

  before(async () => {
    svc = await startTestService('api-runs-poll', { ROLES: API_TEST_ROLES });
    [tenant, other] = await Promise.all([svc.tenant('poll-a'), svc.tenant('poll-b')]);
  });

  after(async () => {
    await svc?.stop();
  });

  const get = (runId: string, key = tenant.keys.write, headers: Record<string, string> = {}): Promise<ApiResult> =>
    call(svc, 'GET', `/api/v1/runs/${runId}`, { key, headers });
  const cancel = (runId: string, key = tenant.keys.write): Promise<ApiResult> => call(svc, 'DELETE', `/api/v1/runs/${runId}`, { key });

  /** Queues a run on a new account of the tenant; returns both ids. */
  const queueRun = async (t: TestTenant = tenant): Promise<{ runId: string; accountId: string }> => {
    const accountId = await freshAccount(svc, t.workspaceId);
    const created = await call(svc, 'POST', '/api/v1/runs', { key: t.keys.write, body: { brief: 'Poll me.', project_id: accountId } });
    expect(created.status).to.equal(202);
    return { runId: created.body.id as string, accountId };
  };

  /** What an agent worker does when it picks a run up. */
  const claim = (run: { runId: string; accountId: string }, workspaceId = tenant.workspaceId) =>
    svc.service.infrastructure.commands.handle(accountDecider, {
      type: 'ClaimRun',
      workspaceId,
      accountId: run.accountId,
      runId: run.runId,
      workerId: WORKER_ID,
      agent: { kind: 'rules', model: 'test' },
      meta: { actor: { kind: 'worker', id: WORKER_ID }, correlationId: run.runId },
    });

  /** What the worker does when the agent is done. */
  const finish = (run: { runId: string; accountId: string }, outcome: RunOutcome) =>
    svc.service.infrastructure.commands.handle(accountDecider, {
      type: 'FinishRun',
      workspaceId: tenant.workspaceId,
      accountId: run.accountId,
      runId: run.runId,
      workerId: WORKER_ID,
      outcome,
      meta: { actor: { kind: 'worker', id: WORKER_ID }, correlationId: run.runId },
    });

  const statusBecomes = async (runId: string, status: string): Promise<ApiResult> => {
    let last: ApiResult | undefined;
    await eventually(async () => {
      last = await get(runId);
      expect(last.body.status).to.equal(status);
    }, 5000);
    return last!;
  };

  describe('polling', () => {
    it('never answers 404 for a run right after its 202 (30 POST-then-GET pairs on fresh accounts)', async () => {
      const accounts = await Promise.all(Array.from({ length: 30 }, (_, i) => freshAccount(svc, tenant.workspaceId, `pair ${i}`)));
      const polls = await Promise.all(
        accounts.map(async (accountId) => {
          const created = await call(svc, 'POST', '/api/v1/runs', { key: tenant.keys.write, body: { brief: 'Read my writes.', project_id: accountId } });
          expect(created.status).to.equal(202);
          const polled = await call(svc, 'GET', new URL(created.body.poll_url).pathname, { key: tenant.keys.write });
          return { created, polled };
        }),
      );
      for (const { created, polled } of polls) {
        expect(polled.status).to.equal(200);
        expect(polled.body.id).to.equal(created.body.id);
        expect(polled.body.status).to.equal('queued');
      }
    });

    it('answers a queued run with Retry-After: 15, no-store and no ETag', async () => {
      const { runId, accountId } = await queueRun();
      const polled = await get(runId);
      expect(polled.status).to.equal(200);
      expect(polled.body).to.include({ id: runId, object: 'run', status: 'queued', project_id: accountId, duration_ms: null, error: null });
      expect(polled.headers.get('retry-after')).to.equal('15');
      expect(polled.headers.get('cache-control')).to.equal('no-store');
      expect(polled.headers.get('etag')).to.equal(null);
    });

    it('answers 404 run-not-found for an unknown id and for an id that is not a UUID', async () => {
      const unknown = await get(uuidv7());
      expectProblem(unknown, 404, 'run-not-found');
      const notUuid = await get('not-a-uuid');
      expectProblem(notUuid, 404, 'run-not-found');
      expect(problemShape(notUuid.body)).to.deep.equal(problemShape(unknown.body));
    });

    it("answers another workspace's run exactly like a missing one, and does not let it be canceled", async () => {
      const foreign = await queueRun(other);
      const seen = await get(foreign.runId, tenant.keys.admin);
      const missing = await get(uuidv7(), tenant.keys.admin);
      expectProblem(seen, 404, 'run-not-found');
      expect(problemShape(seen.body)).to.deep.equal(problemShape(missing.body));

      const canceled = await cancel(foreign.runId, tenant.keys.admin);
      expectProblem(canceled, 404, 'run-not-found');
      expect(problemShape(canceled.body)).to.deep.equal(problemShape(missing.body));
      expect((await get(foreign.runId, other.keys.read)).body.status).to.equal('queued');
    });
  });

  describe('canceling', () => {
    it('cancels a queued run (200, canceled); the finished run is cacheable and answers If-None-Match with 304', async () => {
      const { runId, accountId } = await queueRun();
      const canceled = await cancel(runId);
      expect(canceled.status).to.equal(200);
      expect(canceled.body).to.include({ id: runId, status: 'canceled' });
      expect(canceled.body.result.actions).to.deep.equal([]);

      const polled = await get(runId);
      expect(polled.status).to.equal(200);
      expect(polled.body.status).to.equal('canceled');
      expect(polled.body.finished_at).to.be.a('string');
      expect(polled.headers.get('retry-after')).to.equal(null);
      const etag = polled.headers.get('etag');
      expect(etag).to.match(/^"[^"]+"$/);
      expect(polled.headers.get('cache-control')).to.match(/^private, max-age=\d+/);

      const again = await get(runId);
      expect(again.headers.get('etag')).to.equal(etag);
      expect(again.body).to.deep.equal(polled.body);

      const notModified = await get(runId, tenant.keys.write, { 'if-none-match': etag! });
      expect(notModified.status).to.equal(304);
      expect(notModified.text).to.equal('');
      expect(notModified.headers.get('etag')).to.equal(etag);

      const stale = await get(runId, tenant.keys.write, { 'if-none-match': '"something-else"' });
      expect(stale.status).to.equal(200);
      expect(stale.body.status).to.equal('canceled');

      // The account is free again.
      const next = await call(svc, 'POST', '/api/v1/runs', { key: tenant.keys.write, body: { brief: 'Next.', project_id: accountId } });
      expect(next.status).to.equal(202);
    });

    it('answers If-None-Match with the weak form of the ETag with 304 (weak comparison)', async () => {
      const { runId } = await queueRun();
      await cancel(runId);
      const etag = (await get(runId)).headers.get('etag')!;
      const notModified = await get(runId, tenant.keys.write, { 'if-none-match': `W/${etag}` });
      expect(notModified.status).to.equal(304);
    });

    it('does not answer 304 to another workspace that presents the ETag', async () => {
      const { runId } = await queueRun();
      await cancel(runId);
      const etag = (await get(runId)).headers.get('etag')!;
      const foreign = await get(runId, other.keys.write, { 'if-none-match': etag });
      expectProblem(foreign, 404, 'run-not-found');
    });

    it('answers DELETE of an already canceled run with 200 again (idempotent)', async () => {
      const { runId } = await queueRun();
      const first = await cancel(runId);
      const second = await cancel(runId);
      expect(second.status).to.equal(200);
      expect(second.body.status).to.equal('canceled');
      expect(second.body.finished_at).to.equal(first.body.finished_at);
    });

    it('answers every one of 8 concurrent DELETEs of a queued run with 200 and the one canceled run (3 runs)', async () => {
      for (let trial = 0; trial < 3; trial++) {
        const { runId } = await queueRun();
        const answers = await Promise.all(Array.from({ length: 8 }, () => cancel(runId)));
        expect(answers.map((a) => `${a.status} ${a.body.status}`)).to.deep.equal(Array(8).fill('200 canceled'));
        expect(new Set(answers.map((a) => a.body.finished_at)).size).to.equal(1);
      }
    });

    it('answers 503 with Retry-After, not a guess, when the run ended meanwhile and the read model is too far behind to tell how', async () => {
      const { runId, accountId } = await queueRun();
      // In the runs read model (GET may answer from the live fold before it is).
      const { db } = svc.service.infrastructure.database;
      await eventually(async () => expect(await db.selectFrom('runs').select('id').where('id', '=', runId).executeTakeFirst()).to.not.equal(undefined), 5000);
      const projector = svc.service.projectorCopy!.projector!;
      await projector.stop();
      let restarted = false;
      try {
        // Canceled by another DELETE whose effect the read model has not seen (its projector is stopped).
        await svc.service.infrastructure.commands.handle(accountDecider, {
          type: 'CancelRun', workspaceId: tenant.workspaceId, accountId, runId, knownStatus: 'queued',
          meta: { actor: { kind: 'api_key', id: tenant.keyIds.write }, correlationId: runId },
        });
        const answer = await cancel(runId);
        expectProblem(answer, 503, 'service-unavailable');
        expect(answer.headers.get('retry-after')).to.equal('2');
        await projector.start();
        restarted = true;
        const again = await cancel(runId);
        expect(`${again.status} ${again.body.status}`).to.equal('200 canceled');
      } finally {
        if (!restarted) await projector.start();
      }
    });

    it('refuses to cancel a running run with 409 run-not-cancelable; the run stays running', async () => {
      const run = await queueRun();
      await claim(run);
      await statusBecomes(run.runId, 'running');

      const refused = await cancel(run.runId);
      expectProblem(refused, 409, 'run-not-cancelable');
      expect(refused.body.run_status).to.equal('running');

      const polled = await get(run.runId);
      expect(polled.body.status).to.equal('running');
      expect(polled.body.agent).to.deep.equal({ kind: 'rules', model: 'test' });
      expect(polled.headers.get('retry-after')).to.equal('15');
      expect(polled.headers.get('etag')).to.equal(null);
      const blocked = await call(svc, 'POST', '/api/v1/runs', { key: tenant.keys.write, body: { brief: 'Now?', project_id: run.accountId } });
      expectProblem(blocked, 409, 'run-in-progress');
    });

    it('refuses to cancel a succeeded run with 409 run-already-finished', async () => {
      const run = await queueRun();
      await claim(run);
      await finish(run, { kind: 'succeeded', text: 'All good.', truncated: false, usage: { input_tokens: 10, output_tokens: 5, steps: 2 }, durationMs: 1234 });
      const succeeded = await statusBecomes(run.runId, 'succeeded');
      expect(succeeded.body.duration_ms).to.equal(1234);
      expect(succeeded.body.result).to.include({ text: 'All good.', truncated: false });
      expect(succeeded.body.result.usage).to.deep.equal({ input_tokens: 10, output_tokens: 5, steps: 2 });
      expect(succeeded.body.error).to.equal(null);
      expect(succeeded.headers.get('retry-after')).to.equal(null);

      const refused = await cancel(run.runId);
      expectProblem(refused, 409, 'run-already-finished');
      expect(refused.body.run_status).to.equal('succeeded');
      expect((await get(run.runId)).body.status).to.equal('succeeded');
    });

    it('refuses to cancel a failed run with 409 run-already-finished; the failure is in error', async () => {
      const run = await queueRun();
      await claim(run);
      await finish(run, {
        kind: 'failed',
        code: 'agent_error',
        message: 'model exploded',
        text: '',
        truncated: false,
        usage: { input_tokens: 1, output_tokens: 0, steps: 1 },
        durationMs: 50,
      });
      const failed = await statusBecomes(run.runId, 'failed');
      expect(failed.body.error).to.deep.equal({ code: 'agent_error', message: 'model exploded' });
      expectProblem(await cancel(run.runId), 409, 'run-already-finished');
    });

    it('lets exactly one of cancel and start win when they race (20 runs), never both', async () => {
      const runs = await Promise.all(Array.from({ length: 20 }, () => queueRun()));
      const outcomes: { run: (typeof runs)[number]; deleted: ApiResult; claimed: PromiseSettledResult<unknown> }[] = [];
      for (const [index, run] of runs.entries()) {
        // Each race starts DELETE and the worker's claim together; the claim is offset by 0 to 36 ms (densest
        // near 0) so the races land on every point of the DELETE's processing and both sides get to win some.
        const claimDelayMs = Math.floor((index * index) / 10);
        const [deleted, claimed] = await Promise.allSettled([
          cancel(run.runId),
          new Promise((resolve) => setTimeout(resolve, claimDelayMs)).then(() => claim(run)),
        ]);
        if (deleted.status === 'rejected') throw deleted.reason;
        outcomes.push({ run, deleted: deleted.value, claimed });
      }

      for (const { run, deleted, claimed } of outcomes) {
        const cancelWon = deleted.status === 200;
        const claimWon = claimed.status === 'fulfilled';
        expect(cancelWon !== claimWon, `run ${run.runId}: DELETE ${deleted.status}, claim ${claimed.status}`).to.equal(true);
        if (cancelWon) {
          expect(deleted.body.status).to.equal('canceled');
          expect((claimed as PromiseRejectedResult).reason).to.be.instanceOf(RunNotClaimableError);
          expect((await get(run.runId)).body.status).to.equal('canceled');
        } else {
          expectProblem(deleted, 409, 'run-not-cancelable');
          expect(deleted.body.run_status).to.equal('running');
          await statusBecomes(run.runId, 'running');
        }
      }
      const cancelWins = outcomes.filter((o) => o.deleted.status === 200).length;
      expect(cancelWins, 'the race never let the cancel win').to.be.greaterThan(0);
      expect(cancelWins, 'the race never let the claim win').to.be.lessThan(outcomes.length);
    });
  });
});
