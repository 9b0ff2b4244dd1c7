import { expect } from 'chai';
import { sql } from 'kysely';
import { v7 as uuidv7 } from 'uuid';
import { IdempotencyStore, requestFingerprint } from '../../src/http/idempotency/idempotency-store.ts';
import { startTestService, type TestService, type TestTenant } from '../support/test-service.ts';
import { API_TEST_ROLES, call, countBy, expectProblem, freshAccount, runIdsOf as runIdsOfAccount, type ApiResult } from './support/api-call.ts';
import { accountDecider } from '../../commands/account/account-decider.ts';
import { RECENT_RUN_IDS } from '../../commands/account/account-state.ts';

describe('POST /api/v1/runs with Idempotency-Key', function () {
  this.timeout(30_000);
  let svc: TestService;
  let tenant: TestTenant;
  let keyCounter = 0;

  before(async () => {
    svc = await startTestService('api-runs-idem', { ROLES: API_TEST_ROLES });
    tenant = await svc.tenant('idem');
  });

  after(async () => {
    await svc?.stop();
  });

  const newIdempotencyKey = (): string => `idem-${process.pid}-${Date.now()}-${++keyCounter}`;

  const post = (key: string, body: unknown, idempotencyKey?: string): Promise<ApiResult> =>
    call(svc, 'POST', '/api/v1/runs', { key, body, headers: idempotencyKey === undefined ? {} : { 'idempotency-key': idempotencyKey } });

  const runIdsOf = (accountId: string): Promise<string[]> => runIdsOfAccount(svc, accountId);

  it('replays the same run for the same key and body, marked Idempotent-Replayed', async () => {
    const account = await freshAccount(svc, tenant.workspaceId);
    const idem = newIdempotencyKey();
    const body = { brief: 'Find wasted spend.', project_id: account };

    const first = await post(tenant.keys.write, body, idem);
    expect(first.status).to.equal(202);
    expect(first.headers.get('idempotent-replayed')).to.equal(null);

    const retry = await post(tenant.keys.write, body, idem);
    expect(retry.status).to.equal(202);
    expect(retry.headers.get('idempotent-replayed')).to.equal('true');
    expect(retry.body).to.deep.equal(first.body);
    expect(retry.headers.get('location')).to.equal(first.headers.get('location'));

    // The same members in another order are the same request.
    const reordered = await post(tenant.keys.write, { project_id: account, brief: body.brief }, idem);
    expect(reordered.status).to.equal(202);
    expect(reordered.body.id).to.equal(first.body.id);

    // Without the key the same body is a new request, refused because the account is busy.
    expectProblem(await post(tenant.keys.write, body), 409, 'run-in-progress');
    expect(await runIdsOf(account)).to.deep.equal([first.body.id]);
  });

  it('still replays after the run has finished (canceled)', async () => {
    const account = await freshAccount(svc, tenant.workspaceId);
    const idem = newIdempotencyKey();
    const body = { brief: 'Audit keywords.', project_id: account };
    const first = await post(tenant.keys.write, body, idem);
    expect(first.status).to.equal(202);

    const canceled = await call(svc, 'DELETE', `/api/v1/runs/${first.body.id}`, { key: tenant.keys.write });
    expect(canceled.body.status).to.equal('canceled');

    const retry = await post(tenant.keys.write, body, idem);
    expect(retry.status).to.equal(202);
    expect(retry.headers.get('idempotent-replayed')).to.equal('true');
    expect(retry.body.id).to.equal(first.body.id);
    // The replay did not queue another run: the account is idle, and only one run exists.
    expect(await runIdsOf(account)).to.deep.equal([first.body.id]);
    const polled = await call(svc, 'GET', `/api/v1/runs/${first.body.id}`, { key: tenant.keys.write });
    expect(polled.body.status).to.equal('canceled');
  });

  it('answers 422 idempotency-key-reused for the same key with a different body', async () => {
    const account = await freshAccount(svc, tenant.workspaceId);
    const idem = newIdempotencyKey();
    const first = await post(tenant.keys.write, { brief: 'Original brief.', project_id: account }, idem);
    expect(first.status).to.equal(202);

    const reused = await post(tenant.keys.write, { brief: 'A different brief.', project_id: account }, idem);
    expectProblem(reused, 422, 'idempotency-key-reused');
    const reusedElsewhere = await post(tenant.keys.write, { brief: 'Original brief.', project_id: tenant.accounts.sandbox2 }, idem);
    expectProblem(reusedElsewhere, 422, 'idempotency-key-reused');
    expect(await runIdsOf(tenant.accounts.sandbox2)).to.deep.equal([]);
  });

  it('scopes the key to the API key: another API key with the same Idempotency-Key and body starts its own run', async () => {
    const account = await freshAccount(svc, tenant.workspaceId);
    const idem = newIdempotencyKey();
    const body = { brief: 'Shared idempotency key.', project_id: account };

    const byWrite = await post(tenant.keys.write, body, idem);
    expect(byWrite.status).to.equal(202);
    await call(svc, 'DELETE', `/api/v1/runs/${byWrite.body.id}`, { key: tenant.keys.write });

    const byAdmin = await post(tenant.keys.admin, body, idem);
    expect(byAdmin.status).to.equal(202);
    expect(byAdmin.headers.get('idempotent-replayed')).to.equal(null);
    expect(byAdmin.body.id).to.not.equal(byWrite.body.id);

    // Each API key still replays its own run.
    const writeRetry = await post(tenant.keys.write, body, idem);
    expect(writeRetry.body.id).to.equal(byWrite.body.id);
    const adminRetry = await post(tenant.keys.admin, body, idem);
    expect(adminRetry.body.id).to.equal(byAdmin.body.id);
  });

  it('does not remember an error: a retry after a 409 run-in-progress can succeed', async () => {
    const account = await freshAccount(svc, tenant.workspaceId);
    const blocker = await post(tenant.keys.write, { brief: 'Blocker.', project_id: account });
    expect(blocker.status).to.equal(202);

    const idem = newIdempotencyKey();
    const body = { brief: 'Queued behind the blocker.', project_id: account };
    expectProblem(await post(tenant.keys.write, body, idem), 409, 'run-in-progress');

    await call(svc, 'DELETE', `/api/v1/runs/${blocker.body.id}`, { key: tenant.keys.write });
    const retry = await post(tenant.keys.write, body, idem);
    expect(retry.status).to.equal(202);
    expect(retry.headers.get('idempotent-replayed')).to.equal(null);
    expect(retry.body.id).to.not.equal(blocker.body.id);
  });

  it('creates exactly one run from 20 concurrent retries with one Idempotency-Key', async () => {
    const account = await freshAccount(svc, tenant.workspaceId);
    const idem = newIdempotencyKey();
    const body = { brief: 'Concurrent retries.', project_id: account };

    const results = await Promise.all(Array.from({ length: 20 }, () => post(tenant.keys.write, body, idem)));

    const statuses = countBy(results, (r) => r.status);
    expect(Object.keys(statuses).sort(), JSON.stringify(statuses)).to.satisfy((s: string[]) => s.every((x) => x === '202' || x === '409'));
    const accepted = results.filter((r) => r.status === 202);
    expect(accepted.length).to.be.greaterThan(0);
    const ids = new Set(accepted.map((r) => r.body.id));
    expect(ids.size).to.equal(1);
    for (const refused of results.filter((r) => r.status === 409)) {
      expectProblem(refused, 409, 'idempotent-request-in-progress');
      expect(refused.headers.get('retry-after')).to.match(/^\d+$/);
    }

    const [runId] = [...ids];
    const polled = await call(svc, 'GET', `/api/v1/runs/${runId}`, { key: tenant.keys.write });
    expect(polled.body.status).to.equal('queued');
    expect(await runIdsOf(account)).to.deep.equal([runId]);

    const later = await post(tenant.keys.write, body, idem);
    expect(later.status).to.equal(202);
    expect(later.headers.get('idempotent-replayed')).to.equal('true');
    expect(later.body.id).to.equal(runId);
  });

  it('answers 400 invalid-idempotency-key for a key that is too long or not printable ASCII, and queues nothing', async () => {
    const account = await freshAccount(svc, tenant.workspaceId);
    const body = { brief: 'Bad key.', project_id: account };
    expectProblem(await post(tenant.keys.write, body, 'k'.repeat(300)), 400, 'invalid-idempotency-key');
    expectProblem(await post(tenant.keys.write, body, 'has space'), 400, 'invalid-idempotency-key');
    expect(await runIdsOf(account)).to.deep.equal([]);

    const longest = await post(tenant.keys.write, body, 'k'.repeat(255));
    expect(longest.status).to.equal(202);
  });
  it('an empty Idempotency-Key gets 400, not the "no key" path that would start a run per retry (issue #15)', async () => {
    const account = await freshAccount(svc, tenant.workspaceId);
    const empty = await post(tenant.keys.write, { brief: 'Empty key.', project_id: account }, '');
    expectProblem(empty, 400, 'invalid-idempotency-key');
    expect(empty.body.detail).to.include('empty');
    expect(await runIdsOf(account)).to.deep.equal([]);
  });

  it('a retry that spells out auto_apply:false replays the first run (idempotency compares meaning, issue #15)', async () => {
    const account = await freshAccount(svc, tenant.workspaceId);
    const idem = newIdempotencyKey();
    const first = await post(tenant.keys.write, { brief: 'Defaults.', project_id: account }, idem);
    expect(first.status, first.text).to.equal(202);
    const spelledOut = await post(tenant.keys.write, { brief: 'Defaults.', project_id: account, auto_apply: false }, idem);
    expect(spelledOut.status, spelledOut.text).to.equal(202);
    expect(spelledOut.headers.get('idempotent-replayed')).to.equal('true');
    expect(spelledOut.body.id).to.equal(first.body.id);
    // Another value of the default is another request.
    expectProblem(await post(tenant.keys.write, { brief: 'Defaults.', project_id: account, auto_apply: true }, idem), 422, 'idempotency-key-reused');
    expect(await runIdsOf(account)).to.deep.equal([first.body.id]);
  });

  describe('recovery after the first request died mid-way', () => {
    /** What a request that crashed after claiming the key leaves behind: a processing record whose lease ran out. */
    const abandonedClaim = async (idempotencyKey: string, body: unknown, runId: string, lockedUntil = sql`now() - interval '1 minute'`): Promise<void> => {
      await svc.service.infrastructure.database.db
        .insertInto('idempotency_records')
        .values({
          key_id: tenant.keyIds.write,
          idempotency_key: idempotencyKey,
          // The route fingerprints the body with its schema's defaults filled in (auto_apply: false).
          request_hash: requestFingerprint({ auto_apply: false, ...(body as object) }),
          run_id: runId,
          state: 'processing',
          response_status: null,
          response_body: null,
          locked_until: lockedUntil as any,
        })
        .execute();
    };

    it('a retry while the claim is still held gets 409 with Retry-After saying when the claim ends', async () => {
      const account = await freshAccount(svc, tenant.workspaceId);
      const idem = newIdempotencyKey();
      const body = { brief: 'Still being processed elsewhere.', project_id: account };
      await abandonedClaim(idem, body, uuidv7(), sql`now() + interval '7 seconds'`);

      const retry = await post(tenant.keys.write, body, idem);
      expectProblem(retry, 409, 'idempotent-request-in-progress');
      expect(Number(retry.headers.get('retry-after'))).to.be.within(6, 7);
      expect(await runIdsOf(account)).to.deep.equal([]);
    });

    it('a retry takes over a claim that died before queueing, and queues the run under the claimed id', async () => {
      const account = await freshAccount(svc, tenant.workspaceId);
      const idem = newIdempotencyKey();
      const body = { brief: 'Crashed before queueing.', project_id: account };
      const claimedRunId = uuidv7();
      await abandonedClaim(idem, body, claimedRunId);

      const retry = await post(tenant.keys.write, body, idem);
      expect(retry.status).to.equal(202);
      expect(retry.body.id).to.equal(claimedRunId);
      expect(await runIdsOf(account)).to.deep.equal([claimedRunId]);
      const replay = await post(tenant.keys.write, body, idem);
      expect(replay.headers.get('idempotent-replayed')).to.equal('true');
      expect(replay.body.id).to.equal(claimedRunId);
    });

    it('a retry takes over a claim that died after queueing, and answers with that run instead of a second one', async () => {
      const account = await freshAccount(svc, tenant.workspaceId);
      const idem = newIdempotencyKey();
      const body = { brief: 'Crashed after queueing.', project_id: account };
      const claimedRunId = uuidv7();
      await svc.service.infrastructure.commands.handle(accountDecider, {
        type: 'StartRun',
        workspaceId: tenant.workspaceId,
        accountId: account,
        runId: claimedRunId,
        brief: body.brief,
        autoApply: false,
        keyId: tenant.keyIds.write,
        scope: 'write',
        meta: { actor: { kind: 'api_key', id: tenant.keyIds.write }, correlationId: claimedRunId },
      });
      await abandonedClaim(idem, body, claimedRunId);

      const retry = await post(tenant.keys.write, body, idem);
      expect(retry.status).to.equal(202);
      expect(retry.body.id).to.equal(claimedRunId);
      expect(await runIdsOf(account)).to.deep.equal([claimedRunId]);
    });

    it('a takeover whose account still remembers the run answers 202 for it at once, with the read model behind, and queues nothing', async () => {
      const account = await freshAccount(svc, tenant.workspaceId);
      const idem = newIdempotencyKey();
      const body = { brief: 'Queued, then the answer was lost.', project_id: account };
      const claimedRunId = uuidv7();
      const { commands, store, subjects } = svc.service.infrastructure;
      const meta = { actor: { kind: 'api_key' as const, id: tenant.keyIds.write }, correlationId: claimedRunId };
      const projector = svc.service.projectorCopy!.projector!;
      await projector.stop();
      try {
        await commands.handle(accountDecider, {
          type: 'StartRun', workspaceId: tenant.workspaceId, accountId: account, runId: claimedRunId, brief: body.brief,
          autoApply: false, keyId: tenant.keyIds.write, scope: 'write', meta,
        });
        await abandonedClaim(idem, body, claimedRunId);
        // No projection saw the run: only the write model (the account's recent run ids) can tell.
        const retry = await post(tenant.keys.write, body, idem);
        expect(retry.status).to.equal(202);
        expect(retry.body.id).to.equal(claimedRunId);
      } finally {
        await projector.start();
      }
      let queued = 0;
      for await (const { event } of store.readFiltered(subjects.all, 1)) {
        if (event.type === 'RunQueued' && (event.data as { run_id?: string }).run_id === claimedRunId) queued++;
      }
      expect(queued).to.equal(1);
    });

    it('a takeover that cannot tell whether the run was queued (the account queued too many runs since to remember it, read model behind) answers 409 and keeps the claim, never queueing the run twice', async () => {
      const account = await freshAccount(svc, tenant.workspaceId);
      const idem = newIdempotencyKey();
      const body = { brief: 'Crashed after queueing, while the read model lags.', project_id: account };
      const claimedRunId = uuidv7();
      const { commands, store, subjects } = svc.service.infrastructure;
      const meta = { actor: { kind: 'api_key' as const, id: tenant.keyIds.write }, correlationId: claimedRunId };
      const projector = svc.service.projectorCopy!.projector!;
      await projector.stop();
      let restarted = false;
      try {
        // The first attempt queued the run and died; the run was canceled since; no projection saw either.
        await commands.handle(accountDecider, {
          type: 'StartRun', workspaceId: tenant.workspaceId, accountId: account, runId: claimedRunId, brief: body.brief,
          autoApply: false, keyId: tenant.keyIds.write, scope: 'write', meta,
        });
        await commands.handle(accountDecider, { type: 'CancelRun', workspaceId: tenant.workspaceId, accountId: account, runId: claimedRunId, knownStatus: 'queued', meta });
        // As many runs again since: the account no longer remembers the first one.
        for (let i = 0; i < RECENT_RUN_IDS; i++) {
          const runId = uuidv7();
          await commands.handle(accountDecider, { type: 'StartRun', workspaceId: tenant.workspaceId, accountId: account, runId, brief: 'later', autoApply: false, keyId: tenant.keyIds.write, scope: 'write', meta });
          await commands.handle(accountDecider, { type: 'CancelRun', workspaceId: tenant.workspaceId, accountId: account, runId, knownStatus: 'queued', meta });
        }
        await abandonedClaim(idem, body, claimedRunId);

        const undecided = await post(tenant.keys.write, body, idem);
        expectProblem(undecided, 409, 'idempotent-request-in-progress');
        expect(undecided.headers.get('retry-after')).to.equal('10');

        await projector.start();
        restarted = true;
        await svc.service.infrastructure.database.db
          .updateTable('idempotency_records')
          .set({ locked_until: sql`now() - interval '1 second'` as any })
          .where('idempotency_key', '=', idem)
          .execute();
        const retry = await post(tenant.keys.write, body, idem);
        expect(retry.status).to.equal(202);
        expect(retry.body.id).to.equal(claimedRunId);
      } finally {
        if (!restarted) await projector.start();
      }
      let queued = 0;
      for await (const { event } of store.readFiltered(subjects.all, 1)) {
        if (event.type === 'RunQueued' && (event.data as { run_id?: string }).run_id === claimedRunId) queued++;
      }
      expect(queued).to.equal(1);
    });

    it('a request taken over while it stalled neither releases nor answers for its successor', async () => {
      const account = await freshAccount(svc, tenant.workspaceId);
      const idem = newIdempotencyKey();
      const body = { brief: 'Stalled, then taken over.', project_id: account };
      const fingerprint = requestFingerprint({ auto_apply: false, ...body });
      const store = new IdempotencyStore(svc.service.infrastructure.database.db);
      const stalled = await store.claim(tenant.keyIds.write, idem, fingerprint, uuidv7());
      if (stalled.kind !== 'new') throw new Error(`expected a new claim, got ${stalled.kind}`);
      await svc.service.infrastructure.database.db
        .updateTable('idempotency_records')
        .set({ locked_until: sql`now() - interval '1 second'` as any })
        .where('idempotency_key', '=', idem)
        .execute();
      const successor = await store.claim(tenant.keyIds.write, idem, fingerprint, uuidv7());
      if (successor.kind !== 'takeover') throw new Error(`expected a takeover, got ${successor.kind}`);
      expect(successor.runId).to.equal(stalled.runId);

      // The stalled request fails (say its append lost to the successor's) and lets go of the key:
      // the successor still holds it, so a retry now waits instead of claiming it for a second run.
      await store.release(stalled.held);
      expectProblem(await post(tenant.keys.write, body, idem), 409, 'idempotent-request-in-progress');

      // Nor does its answer replace the successor's.
      await store.complete(stalled.held, 202, { id: 'from-the-stalled-request' });
      await store.complete(successor.held, 202, { id: successor.runId, object: 'run', status: 'queued', poll_url: `http://api.test/${successor.runId}` });
      const replay = await post(tenant.keys.write, body, idem);
      expect(replay.headers.get('idempotent-replayed')).to.equal('true');
      expect(replay.body.id).to.equal(successor.runId);
      expect(await runIdsOf(account)).to.deep.equal([]);
    });

    it('forgets a key after the 24-hour retention: the same key with another body is a new request', async () => {
      const account = await freshAccount(svc, tenant.workspaceId);
      const idem = newIdempotencyKey();
      await svc.service.infrastructure.database.db
        .insertInto('idempotency_records')
        .values({
          key_id: tenant.keyIds.write,
          idempotency_key: idem,
          request_hash: requestFingerprint({ brief: 'Long ago.', project_id: account }),
          run_id: uuidv7(),
          state: 'completed',
          response_status: 202,
          response_body: JSON.stringify({ id: uuidv7(), object: 'run', status: 'queued', poll_url: 'http://api.test/x' }),
          created_at: sql`now() - interval '25 hours'` as any,
          locked_until: sql`now() - interval '25 hours'` as any,
        })
        .execute();

      const fresh = await post(tenant.keys.write, { brief: 'Today.', project_id: account }, idem);
      expect(fresh.status).to.equal(202);
      expect(fresh.headers.get('idempotent-replayed')).to.equal(null);
    });
  });
});
