import { expect } from 'chai';
import { RUNS_PROJECTION } from '../../projections/runs/runs-projection.ts';
import { waitForProjection } from '../../projections/runtime/projector.ts';
import { USAGE_READ_TTL_MS } from '../../src/http/quota/workspace-quotas.ts';
import { startTestService, type TestService, type TestTenant } from '../support/test-service.ts';
import { startRun, waitForTerminalRun } from '../support/runs.ts';
import { API_TEST_ROLES, call, countBy, expectProblem, freshAccount, type ApiResult } from '../api/support/api-call.ts';

const RUNS_PER_HOUR = 3;
const HOUR_MS = 3_600_000;

describe('workspace quotas at POST /api/v1/runs', function () {
  this.timeout(60_000);

  describe('runs per hour', () => {
    let svc: TestService;
    let tenant: TestTenant;
    let other: TestTenant;

    before(async () => {
      svc = await startTestService('quota-runs', { ROLES: API_TEST_ROLES, WORKSPACE_RUNS_PER_HOUR: String(RUNS_PER_HOUR) });
      [tenant, other] = await Promise.all([svc.tenant('quota-a'), svc.tenant('quota-b')]);
    });

    after(async () => {
      await svc?.stop();
    });

    const post = async (t: TestTenant, headers: Record<string, string> = {}, account?: string): Promise<ApiResult> =>
      call(svc, 'POST', '/api/v1/runs', {
        key: t.keys.write,
        body: { brief: 'Find wasted spend.', project_id: account ?? (await freshAccount(svc, t.workspaceId)) },
        headers,
      });

    it('gives a workspace at its run quota 429 quota-exceeded naming the quota and its reset, and another workspace 202', async () => {
      const firstAt = Date.now();
      const firstAccount = await freshAccount(svc, tenant.workspaceId);
      const first = await post(tenant, { 'Idempotency-Key': 'quota-first' }, firstAccount);
      expect(first.status).to.equal(202);
      for (let i = 1; i < RUNS_PER_HOUR; i++) expect((await post(tenant)).status).to.equal(202);

      const refused = await post(tenant);
      expectProblem(refused, 429, 'quota-exceeded');
      expect(refused.body).to.include({ quota: 'runs_per_hour', limit: RUNS_PER_HOUR, used: RUNS_PER_HOUR });
      const resetsAt = Date.parse(refused.body.resets_at);
      // The window frees its first slot an hour after the oldest run in it was queued.
      expect(resetsAt).to.be.within(firstAt + HOUR_MS - 1000, Date.now() + HOUR_MS);
      const retryAfter = Number(refused.headers.get('retry-after'));
      expect(retryAfter).to.be.within(Math.floor((resetsAt - Date.now()) / 1000) - 2, Math.ceil((resetsAt - Date.now()) / 1000) + 2);

      expect((await post(other)).status, 'another workspace').to.equal(202);

      // Replaying an accepted request is not a new run: it is answered, not refused.
      const replay = await post(tenant, { 'Idempotency-Key': 'quota-first' }, firstAccount);
      expect(replay.status).to.equal(202);
      expect(replay.headers.get('idempotent-replayed')).to.equal('true');
      expect(replay.body.id).to.equal(first.body.id);
    });

    it('does not charge a request that was refused (409 run-in-progress)', async () => {
      const fresh = await svc.tenant('quota-refused');
      const busy = await freshAccount(svc, fresh.workspaceId);
      expect((await post(fresh, {}, busy)).status).to.equal(202);
      for (let i = 0; i < 5; i++) expectProblem(await post(fresh, {}, busy), 409, 'run-in-progress');
      for (let i = 1; i < RUNS_PER_HOUR; i++) expect((await post(fresh)).status, `run ${i + 1}`).to.equal(202);
      expectProblem(await post(fresh), 429, 'quota-exceeded');
    });

    it('counts a run it let through once, before and after the read model holds it', async () => {
      const fresh = await svc.tenant('quota-projected');
      for (let i = 1; i < RUNS_PER_HOUR; i++) expect((await post(fresh)).status, `run ${i}`).to.equal(202);
      // The read model holds them now: they are counted there, and no longer as this process's own.
      const { store, database } = svc.service.infrastructure;
      expect(await waitForProjection(database.db, RUNS_PROJECTION, await store.lastSequence())).to.equal(true);
      // Past the time a usage read serves later requests: the next one reads the read model again.
      await new Promise((resolve) => setTimeout(resolve, USAGE_READ_TTL_MS + 200));
      expect((await post(fresh)).status, 'the last run of the quota').to.equal(202);
      expectProblem(await post(fresh), 429, 'quota-exceeded');
    });

    it('admits exactly the quota of 12 concurrent runs of one workspace', async () => {
      const fresh = await svc.tenant('quota-race');
      const accounts = await Promise.all(Array.from({ length: 12 }, () => freshAccount(svc, fresh.workspaceId)));
      const results = await Promise.all(
        accounts.map((account) => call(svc, 'POST', '/api/v1/runs', { key: fresh.keys.write, body: { brief: 'Race.', project_id: account } })),
      );
      expect(countBy(results, (r) => r.status)).to.deep.equal({ 202: RUNS_PER_HOUR, 429: 12 - RUNS_PER_HOUR });
      for (const refused of results.filter((r) => r.status === 429)) expect(refused.body.quota).to.equal('runs_per_hour');
    });
  });

  describe('model tokens per day', () => {
    let svc: TestService;
    let tenant: TestTenant;
    let other: TestTenant;

    before(async () => {
      svc = await startTestService('quota-tokens', { ROLES: 'http,projectors,agent-worker', WORKSPACE_MODEL_TOKENS_PER_DAY: '1' });
      [tenant, other] = await Promise.all([svc.tenant('tokens-a'), svc.tenant('tokens-b')]);
    });

    after(async () => {
      await svc?.stop();
    });

    it('refuses new runs once the day’s tokens are used, until the next UTC midnight; other workspaces are unaffected', async () => {
      const runId = await startRun(svc, tenant.keys.write, tenant.accounts.sandbox, 'Which search terms waste money?');
      const finished = await waitForTerminalRun(svc, tenant.keys.write, runId);
      const used = finished.result.usage.input_tokens + finished.result.usage.output_tokens;
      expect(used, 'the run recorded model tokens').to.be.greaterThan(0);

      const refused = await call(svc, 'POST', '/api/v1/runs', { key: tenant.keys.write, body: { brief: 'Again.', project_id: tenant.accounts.sandbox2 } });
      expectProblem(refused, 429, 'quota-exceeded');
      expect(refused.body).to.include({ quota: 'model_tokens_per_day', limit: 1, used });
      const now = new Date();
      const midnight = Date.UTC(now.getUTCFullYear(), now.getUTCMonth(), now.getUTCDate() + 1);
      expect(refused.body.resets_at).to.equal(new Date(midnight).toISOString());
      expect(Number(refused.headers.get('retry-after'))).to.be.within(Math.floor((midnight - Date.now()) / 1000) - 2, Math.ceil((midnight - Date.now()) / 1000) + 2);

      const otherRun = await startRun(svc, other.keys.write, other.accounts.sandbox, 'Which search terms waste money?');
      expect(otherRun).to.be.a('string');
    });
  });
});
