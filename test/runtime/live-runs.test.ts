import { expect } from 'chai';
import { v7 as uuidv7 } from 'uuid';
import { accountDecider } from '../../commands/account/account-decider.ts';
import type { RunOutcome } from '../../commands/account/run-lifecycle.ts';
import { actionDecider } from '../../commands/action/action-decider.ts';
import { transcriptDecider } from '../../commands/run/transcript.ts';
import { RUNS_PROJECTION } from '../../projections/runs/runs-projection.ts';
import { findRun, findRunActions, toRunRepresentation } from '../../projections/runs/run-view.ts';
import type { RunStatus } from '../../projections/runs/run-record.ts';
import { waitForProjection } from '../../projections/runtime/projector.ts';
import { toActionRepresentation } from '../../src/http/representations/action-representation.ts';
import { LiveRuns, type LiveRun } from '../../src/runtime/live-runs.ts';
import { runIdOf } from '../../projections/runs/fold-runs.ts';
import type { DomainEvent } from '../../src/events/catalogue/index.ts';
import { API_TEST_ROLES, call, freshAccount } from '../api/support/api-call.ts';
import { startTestService, type TestService, type TestTenant } from '../support/test-service.ts';

const WORKER_ID = 'live-runs-worker';

/**
 * The in-memory read path (the live fold an HTTP process keeps, src/runtime/live-runs.ts)
 * against the Postgres read model: for a run in every status, the representation built from
 * each is the same to the byte, and so is what GET /api/v1/runs/{id} answers.
 */
describe('live runs: the in-memory read path matches the Postgres read model', function () {
  this.timeout(30_000);
  let svc: TestService;
  let tenant: TestTenant;
  const runs = new Map<RunStatus, { runId: string; accountId: string }>();

  const meta = (runId: string) => ({ actor: { kind: 'worker' as const, id: WORKER_ID }, correlationId: runId });

  before(async () => {
    svc = await startTestService('live-runs', { ROLES: API_TEST_ROLES });
    tenant = await svc.tenant('live');
    const { commands } = svc.service.infrastructure;
    const queue = async (): Promise<{ runId: string; accountId: string }> => {
      const accountId = await freshAccount(svc, tenant.workspaceId);
      const created = await call(svc, 'POST', '/api/v1/runs', { key: tenant.keys.write, body: { brief: 'Compare me.', project_id: accountId } });
      expect(created.status).to.equal(202);
      return { runId: created.body.id as string, accountId };
    };
    const claim = (run: { runId: string; accountId: string }) =>
      commands.handle(accountDecider, {
        type: 'ClaimRun',
        workspaceId: tenant.workspaceId,
        accountId: run.accountId,
        runId: run.runId,
        workerId: WORKER_ID,
        agent: { kind: 'rules', model: 'test' },
        meta: meta(run.runId),
      });
    // Keys out of jsonb's order (shorter first), so the live fold has to order them as Postgres does.
    const work = async (run: { runId: string; accountId: string }) => {
      for (const index of [1, 2]) {
        await commands.handle(transcriptDecider, {
          type: 'RecordToolCall',
          workspaceId: tenant.workspaceId,
          accountId: run.accountId,
          call: { run_id: run.runId, index, name: 'get_search_terms', input: { campaign_id: `c${index}`, z: index, ab: { yy: 1, x: [{ bb: 1, a: 2 }] } }, ok: index === 1, output: {}, duration_ms: 3 },
          meta: meta(run.runId),
        });
      }
      await commands.handle(actionDecider, {
        type: 'ProposeAction',
        workspaceId: tenant.workspaceId,
        accountId: run.accountId,
        proposal: {
          action_id: uuidv7(),
          run_id: run.runId,
          kind: 'set_target_cpa',
          summary: 'Lower the target CPA',
          reason: 'r',
          params: { campaign_id: 'c1', target_cpa: 21 },
          based_on: {},
          risk_tier: 'review',
          disposition: 'queued',
          policy_reasons: ['needs a person', 'second reason'],
          auto_apply_requested: false,
          proposer_key_id: tenant.keyIds.write,
        },
        meta: meta(run.runId),
      });
    };
    const finish = (run: { runId: string; accountId: string }, outcome: RunOutcome) =>
      commands.handle(accountDecider, { type: 'FinishRun', workspaceId: tenant.workspaceId, accountId: run.accountId, runId: run.runId, workerId: WORKER_ID, outcome, meta: meta(run.runId) });

    runs.set('queued', await queue());
    const running = await queue();
    await claim(running);
    await work(running);
    runs.set('running', running);
    const succeeded = await queue();
    await claim(succeeded);
    await work(succeeded);
    await finish(succeeded, { kind: 'succeeded', text: 'Done.', truncated: false, usage: { input_tokens: 10, output_tokens: 5, steps: 2 }, durationMs: 1234 });
    runs.set('succeeded', succeeded);
    const failed = await queue();
    await claim(failed);
    await work(failed);
    await finish(failed, { kind: 'failed', code: 'agent_error', message: 'The model gave up.', text: 'Partial.', truncated: true, usage: { input_tokens: 3, output_tokens: 1, steps: 1 }, durationMs: null });
    runs.set('failed', failed);
    const canceled = await queue();
    expect((await call(svc, 'DELETE', `/api/v1/runs/${canceled.runId}`, { key: tenant.keys.write })).status).to.equal(200);
    runs.set('canceled', canceled);

    const head = await svc.service.infrastructure.store.lastSequence();
    expect(await waitForProjection(svc.service.infrastructure.database.db, RUNS_PROJECTION, head, 10_000)).to.equal(true);
  });

  after(async () => {
    await svc?.stop();
  });

  /** The response body GET builds from the Postgres read model. */
  const fromPostgres = async (runId: string): Promise<string> => {
    const { db } = svc.service.infrastructure.database;
    const row = await findRun(db, tenant.workspaceId, runId);
    expect(row, `run ${runId} in Postgres`).to.not.equal(undefined);
    const actions = (await findRunActions(db, runId)).map((action) => toActionRepresentation(action, action.account_id, svc.config.publicBaseUrl));
    return JSON.stringify(toRunRepresentation(row!, svc.config.publicBaseUrl, actions));
  };

  /** The same, built from a live fold of the whole stream. */
  const fromLiveFold = async (): Promise<Map<string, LiveRun>> => {
    const ended = new Map<string, LiveRun>();
    const live = new LiveRuns({ onTerminal: (run) => ended.set(run.row.id, run) });
    const { store, subjects } = svc.service.infrastructure;
    for await (const stored of store.readFiltered(subjects.all, 1)) live.apply([stored]);
    const found = new Map<string, LiveRun>(ended);
    for (const { runId } of runs.values()) {
      const held = live.get(runId);
      if (held) found.set(runId, held);
    }
    return found;
  };

  const toBody = (run: LiveRun): string =>
    JSON.stringify(toRunRepresentation(run.row, svc.config.publicBaseUrl, run.actions.map((action) => toActionRepresentation(action, action.account_id, svc.config.publicBaseUrl))));

  for (const status of ['queued', 'running', 'succeeded', 'failed', 'canceled'] as const) {
    it(`a ${status} run: the live fold's representation is the read model's, byte for byte`, async () => {
      const { runId } = runs.get(status)!;
      const live = (await fromLiveFold()).get(runId);
      expect(live, `run ${runId} in the live fold`).to.not.equal(undefined);
      expect(live!.row.status).to.equal(status);
      expect(toBody(live!)).to.equal(await fromPostgres(runId));
    });

    it(`a ${status} run: GET answers the read model's representation`, async () => {
      const { runId } = runs.get(status)!;
      const response = await svc.request('GET', `/api/v1/runs/${runId}`, { key: tenant.keys.read });
      expect(response.status).to.equal(200);
      expect(await response.text()).to.equal(await fromPostgres(runId));
    });
  }

  it('holds the tool calls and actions a running run has so far', async () => {
    const live = (await fromLiveFold()).get(runs.get('running')!.runId)!;
    expect(live.row.tool_calls.map((c) => c.ok)).to.deep.equal([true, false]);
    expect(live.actions.map((a) => a.policy_reasons)).to.deep.equal([['needs a person', 'second reason']]);
  });

  it('lets ended runs go, and the oldest when over its bound', async () => {
    const { store, subjects } = svc.service.infrastructure;
    const ended: string[] = [];
    const live = new LiveRuns({ maxRuns: 1, onTerminal: (run) => ended.push(run.row.status) });
    for await (const stored of store.readFiltered(subjects.all, 1)) live.apply([stored]);
    expect(live.size).to.be.at.most(1);
    expect(live.get(runs.get('queued')!.runId), 'the oldest run, evicted').to.equal(undefined);
    expect(ended).to.include.members(['succeeded', 'failed', 'canceled']);
  });

  it('lets the oldest runs go when the events it holds pass its byte bound', async () => {
    const { store, subjects } = svc.service.infrastructure;
    // The two runs that never end, so what is held at the end is what was held at the peak.
    const kept = new Set([runs.get('queued')!.runId, runs.get('running')!.runId]);
    const fold = async (live: LiveRuns) => {
      for await (const stored of store.readFiltered(subjects.all, 1)) {
        if (kept.has(runIdOf(stored.event as DomainEvent) ?? '')) live.apply([stored]);
      }
      return live;
    };
    const unbounded = await fold(new LiveRuns());
    expect(unbounded.size).to.equal(2);
    const bound = unbounded.bytesHeld - 1;
    const bounded = await fold(new LiveRuns({ maxBytes: bound }));
    expect(bounded.bytesHeld).to.be.greaterThan(0).and.at.most(bound);
    expect(bounded.get(runs.get('queued')!.runId), 'the oldest run, evicted').to.equal(undefined);
    expect(bounded.get(runs.get('running')!.runId), 'the newer run, kept').to.not.equal(undefined);
    bounded.clear();
    expect(bounded.bytesHeld).to.equal(0);
  });

  it('GET of a run created a moment ago by another process finds it (the live fold catches up first)', async () => {
    const accountId = await freshAccount(svc, tenant.workspaceId, 'behind the back');
    const runId = uuidv7();
    // Appended straight to the stream, as another HTTP process would.
    await svc.service.infrastructure.commands.handle(accountDecider, {
      type: 'StartRun',
      workspaceId: tenant.workspaceId,
      accountId,
      runId,
      brief: 'Elsewhere.',
      autoApply: false,
      keyId: tenant.keyIds.write,
      scope: 'write',
      meta: { actor: { kind: 'api_key', id: tenant.keyIds.write }, correlationId: runId },
    });
    const response = await svc.request('GET', `/api/v1/runs/${runId}`, { key: tenant.keys.write });
    expect(response.status).to.equal(200);
    expect(((await response.json()) as { status: string }).status).to.equal('queued');
  });
});
