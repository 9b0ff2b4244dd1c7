import { expect } from 'chai';
import { randomUUID } from 'node:crypto';
import { waitForTerminalRun, startRun } from '../support/runs.ts';
import { startTestService, type TestService, type TestTenant } from '../support/test-service.ts';
import {
  api,
  approvalOf,
  approvalsPath,
  campaignById,
  campaignsByStrategy,
  cents,
  expectProblem,
  listAllApprovals,
  problemShape,
  proposeTarget,
  waitForStatus,
  type CampaignsByStrategy,
} from './helpers.ts';

/** docs/api.md, "Approvals": the list, approve and reject, with every role running. */
describe('safe-apply: approvals', function () {
  this.timeout(60_000);
  let svc: TestService;
  let tenant: TestTenant;
  let other: TestTenant;
  let account: string;
  let campaigns: CampaignsByStrategy;
  /** Actions proposed on `account` in order, through the target endpoint (all queued). */
  const queued: any[] = [];
  let blocked: any;
  let runId: string;
  let runActionIds: string[];
  let theirAction: any;

  const approve = (actionId: string, key = tenant.keys.write, accountId = account, body: unknown = {}) =>
    api(svc, 'POST', `${approvalsPath(accountId)}/${actionId}/approve`, { key, body });
  const reject = (actionId: string, body: unknown, key = tenant.keys.write, accountId = account) =>
    api(svc, 'POST', `${approvalsPath(accountId)}/${actionId}/reject`, { key, body });
  const list = (query: string, key = tenant.keys.read, accountId = account) => api(svc, 'GET', `${approvalsPath(accountId)}?${query}`, { key });

  before(async () => {
    svc = await startTestService('sa-approvals');
    [tenant, other] = await Promise.all([svc.tenant('approvals-a'), svc.tenant('approvals-b')]);
    account = tenant.accounts.sandbox;
    campaigns = await campaignsByStrategy(svc, tenant.keys.read, account);
    // A run on the second account, so the list has actions with a run id to filter by.
    runId = await startRun(svc, tenant.keys.write, tenant.accounts.sandbox2, 'Find wasted spend on search terms without conversions and add negative keywords.');
    // Five queued actions on the ROAS campaign (the CPA campaign is kept for the apply test).
    const roasNow = campaigns.roas.bidding_strategy.target_roas_pct!;
    for (const factor of [0.96, 0.97, 0.98, 1.02, 1.03]) {
      queued.push(
        await proposeTarget(svc, tenant.keys.write, account, campaigns.roas.id, {
          target_roas_pct: Math.round(roasNow * factor * 10) / 10,
          reason: `roas ${factor}`,
        }),
      );
    }
    blocked = await proposeTarget(svc, tenant.keys.write, account, campaigns.cpa.id, {
      target_cpa: cents(campaigns.cpa.bidding_strategy.target_cpa! * 3),
      reason: 'far too much',
    });
    const theirs = await campaignsByStrategy(svc, other.keys.read, other.accounts.sandbox);
    theirAction = await proposeTarget(svc, other.keys.write, other.accounts.sandbox, theirs.roas.id, {
      target_roas_pct: theirs.roas.bidding_strategy.target_roas_pct!,
      reason: 'theirs',
    });
    const run = await waitForTerminalRun(svc, tenant.keys.read, runId, 30_000);
    expect(run.status, JSON.stringify(run.error)).to.equal('succeeded');
    runActionIds = (run.result.actions as { id: string }[]).map((a) => a.id);
  });

  after(async () => {
    await svc?.stop();
  });

  describe('GET .../approvals', () => {
    it('lists the proposed actions oldest first, each with its status', async () => {
      const all = await listAllApprovals(svc, tenant.keys.read, account);
      const ids = all.map((a) => a.id);
      expect(ids.slice(0, 6)).to.deep.equal([...queued.map((a) => a.id), blocked.id]);
      for (const action of all.slice(0, 5)) {
        expect(action).to.include({ object: 'action', kind: 'set_target_roas', status: 'queued', disposition: 'queued', project_id: account, run_id: null });
        expect(action.approvals_url).to.equal(`http://api.test/console/accounts/${account}/approvals`);
      }
      expect(all[5]).to.include({ status: 'blocked', risk_tier: 'blocked', disposition: 'blocked' });
    });

    it('filters by status', async () => {
      const onlyBlocked = await list('status=blocked');
      expect(onlyBlocked.status).to.equal(200);
      expect(onlyBlocked.body.data.map((a: any) => a.id)).to.deep.equal([blocked.id]);
      const onlyQueued = await listAllApprovals(svc, tenant.keys.read, account, 'status=queued');
      expect(onlyQueued.length).to.be.greaterThan(0);
      for (const action of onlyQueued) expect(action.status).to.equal('queued');
      expect(onlyQueued.map((a) => a.id)).to.not.include(blocked.id);
      const none = await list('status=applied', tenant.keys.read, tenant.accounts.disconnected);
      expect(none.status).to.equal(200);
      expect(none.body.data).to.deep.equal([]);
    });

    it("filters by run_id: exactly the run's actions", async () => {
      expect(runActionIds.length, 'the waste run proposed actions').to.be.greaterThan(0);
      const byRun = await listAllApprovals(svc, tenant.keys.read, tenant.accounts.sandbox2, `run_id=${runId}`);
      expect(byRun.map((a) => a.id)).to.have.members(runActionIds);
      for (const action of byRun) expect(action.run_id).to.equal(runId);
      // Another run id (or the run's id on another account) matches nothing.
      expect((await list(`run_id=${randomUUID()}`, tenant.keys.read, tenant.accounts.sandbox2)).body.data).to.deep.equal([]);
      expect((await list(`run_id=${runId}`)).body.data).to.deep.equal([]);
    });

    it('pages with limit=2: next_cursor walks every item exactly once, in order', async () => {
      const all = (await listAllApprovals(svc, tenant.keys.read, account)).map((a) => a.id);
      expect(all.length).to.be.greaterThan(4);
      const walked: string[] = [];
      let cursor: string | null = null;
      let pages = 0;
      do {
        const page = await list(`limit=2${cursor === null ? '' : `&cursor=${cursor}`}`);
        expect(page.status, page.text).to.equal(200);
        expect(page.body.data.length).to.be.at.most(2);
        walked.push(...page.body.data.map((a: any) => a.id));
        cursor = page.body.next_cursor;
        if (cursor !== null) expect(page.body.data).to.have.length(2);
        expect(++pages).to.be.below(100);
      } while (cursor !== null);
      expect(walked).to.deep.equal(all);
      expect(new Set(walked).size).to.equal(walked.length);
      expect(pages).to.equal(Math.ceil(all.length / 2));
    });

    it('lists newest first with order=newest_first: the same actions reversed, paged with next_cursor (limit=2)', async () => {
      const all = (await listAllApprovals(svc, tenant.keys.read, account)).map((a) => a.id);
      const walked: string[] = [];
      let cursor: string | null = null;
      do {
        const page = await list(`order=newest_first&limit=2${cursor === null ? '' : `&cursor=${cursor}`}`);
        expect(page.status, page.text).to.equal(200);
        walked.push(...page.body.data.map((a: any) => a.id));
        cursor = page.body.next_cursor;
      } while (cursor !== null);
      expect(walked).to.deep.equal([...all].reverse());
      const queuedNewest = await list('order=newest_first&status=queued&limit=1');
      const queued = (await listAllApprovals(svc, tenant.keys.read, account, 'status=queued')).map((a) => a.id);
      expect(queuedNewest.body.data.map((a: any) => a.id)).to.deep.equal(queued.slice(-1));
      expectProblem(await list('order=latest'), 422, 'validation-error');
    });

    it('pages a filtered list too (status=queued, limit=2)', async () => {
      const all = (await listAllApprovals(svc, tenant.keys.read, account, 'status=queued')).map((a) => a.id);
      const walked: string[] = [];
      let cursor: string | null = null;
      do {
        const page = await list(`status=queued&limit=2${cursor === null ? '' : `&cursor=${cursor}`}`);
        walked.push(...page.body.data.map((a: any) => a.id));
        cursor = page.body.next_cursor;
      } while (cursor !== null);
      expect(walked).to.deep.equal(all);
    });

    for (const query of ['status=bogus', 'status=', 'limit=0', 'limit=201', 'limit=abc', 'limit=1.5', 'cursor=abc', 'cursor=-1', 'run_id=not-a-uuid']) {
      it(`refuses ?${query} with 422 validation-error`, async () => {
        const result = await list(query);
        expectProblem(result, 422, 'validation-error');
        expect(result.body.errors).to.be.an('array').that.is.not.empty;
      });
    }

    it("answers another workspace's account like a nonexistent one (404 account-not-found)", async () => {
      const missingId = randomUUID();
      const foreign = await list('', tenant.keys.read, other.accounts.sandbox);
      const missing = await list('', tenant.keys.read, missingId);
      expectProblem(foreign, 404, 'account-not-found');
      expectProblem(missing, 404, 'account-not-found');
      expect(problemShape(foreign.body, [other.accounts.sandbox])).to.deep.equal(problemShape(missing.body, [missingId]));
    });
  });

  describe('approve', () => {
    let applied: any;
    let next: number;

    it('approves a queued action (200, the action approved), which the apply worker then applies on the platform', async () => {
      next = cents(campaigns.cpa.bidding_strategy.target_cpa! * 1.07);
      applied = await proposeTarget(svc, tenant.keys.write, account, campaigns.cpa.id, { target_cpa: next, reason: 'approve me' });
      expect(applied.status).to.equal('queued');
      // No body at all: the body is optional.
      const result = await api(svc, 'POST', `${approvalsPath(account)}/${applied.id}/approve`, { key: tenant.keys.write });
      expect(result.status, result.text).to.equal(200);
      expect(result.body).to.include({ object: 'action', id: applied.id, kind: 'set_target_cpa' });
      // The response reflects at least the approval; a fast apply worker may already have moved it on.
      expect(result.body.status).to.be.oneOf(['approved', 'applying', 'applied']);
      await waitForStatus(svc, tenant.keys.read, account, applied.id, 'applied');
      expect((await campaignById(svc, tenant.keys.read, account, campaigns.cpa.id)).bidding_strategy.target_cpa).to.equal(next);
    });

    it('applies an approved portfolio change to the portfolio: every campaign on it moves', async () => {
      const strategy = campaigns.portfolio.bidding_strategy;
      const target = cents(strategy.target_cpa! * 1.2);
      const action = await proposeTarget(svc, tenant.keys.write, account, campaigns.portfolio.id, { target_cpa: target, reason: 'portfolio' });
      expect(action.risk_tier).to.equal('review');
      expect((await approve(action.id)).status).to.equal(200);
      await waitForStatus(svc, tenant.keys.read, account, action.id, 'applied');
      for (const id of strategy.portfolio!.campaign_ids) {
        expect((await campaignById(svc, tenant.keys.read, account, id)).bidding_strategy.target_cpa, `campaign ${id}`).to.equal(target);
      }
    });

    it('refuses to approve or reject an applied action (409 action-not-in-queue); the approval itself sent again answers 200 and records nothing', async () => {
      expect(applied, 'depends on the previous test').to.not.equal(undefined);
      expectProblem(await approve(applied.id, tenant.keys.write, account, { note: 'a second look' }), 409, 'action-not-in-queue');
      expectProblem(await approve(applied.id, tenant.keys.admin), 409, 'action-not-in-queue');
      expectProblem(await reject(applied.id, { reason: 'too late' }), 409, 'action-not-in-queue');
      // The same request as the approval (same key, same empty body): a client whose answer was lost.
      const before = await approvalOf(svc, tenant.keys.read, account, applied.id);
      const again = await approve(applied.id);
      expect(again.status, again.text).to.equal(200);
      expect(again.body).to.include({ id: applied.id, status: 'applied', version: before.version });
      // Nothing recorded: any event would have changed the action's version.
      expect(await approvalOf(svc, tenant.keys.read, account, applied.id)).to.include({ status: 'applied', version: before.version });
    });

    it('refuses to approve a blocked action (409 action-not-in-queue)', async () => {
      expectProblem(await approve(blocked.id), 409, 'action-not-in-queue');
      expect((await approvalOf(svc, tenant.keys.read, account, blocked.id)).status).to.equal('blocked');
    });

    it('of two concurrent approvals of one action, one gets 200 and the other 409, unless the action was back in the queue in between (10 actions)', async () => {
      const current = (await campaignById(svc, tenant.keys.read, account, campaigns.cpa.id)).bidding_strategy.target_cpa!;
      const actions = [];
      for (let i = 0; i < 10; i++) {
        actions.push(await proposeTarget(svc, tenant.keys.write, account, campaigns.cpa.id, { target_cpa: cents(current * (1 + (i + 1) / 200)), reason: `race ${i}` }));
      }
      const outcomes = await Promise.all(actions.map((action) => Promise.all([approve(action.id), approve(action.id, tenant.keys.admin)])));
      for (const [index, pair] of outcomes.entries()) {
        const action = actions[index]!;
        const statuses = pair.map((r) => r.status).sort();
        // The history says how often the action stood in the queue to be approved.
        const history = await api(svc, 'GET', `/api/v1/accounts/${account}/history?run_id=${action.id}&limit=500`, { key: tenant.keys.read });
        expect(history.status, history.text).to.equal(200);
        const lifecycle = history.body.data
          .filter((e: any) => e.aggregate.id === action.id && (e.type === 'ActionApproved' || e.type === 'ActionReturnedToQueue'))
          .map((e: any) => e.type);
        const approvals = lifecycle.filter((type: string) => type === 'ActionApproved').length;
        const detail = `action ${index}: ${pair.map((r) => r.text).join(' / ')}; ${lifecycle.join(', ')}`;
        // Exactly one ActionApproved per 200: no approval is ever recorded twice for one stay in the queue.
        expect(approvals, detail).to.equal(statuses.filter((status) => status === 200).length);
        if (statuses[1] === 409) {
          expect(statuses, detail).to.deep.equal([200, 409]);
          expectProblem(pair.find((r) => r.status === 409)!, 409, 'action-not-in-queue');
        } else {
          // Both succeeded only because the apply worker returned the action to the queue between them
          // (another action on the same campaign changed its target first): approved, returned, approved.
          expect(statuses, detail).to.deep.equal([200, 200]);
          expect(lifecycle.slice(0, 3), detail).to.deep.equal(['ActionApproved', 'ActionReturnedToQueue', 'ActionApproved']);
        }
      }
    });

    it('of a concurrent approve and reject of one action, exactly one wins, unless the action was back in the queue in between (5 actions)', async () => {
      const current = (await campaignById(svc, tenant.keys.read, account, campaigns.cpa.id)).bidding_strategy.target_cpa!;
      const actions = [];
      for (let i = 0; i < 5; i++) {
        actions.push(await proposeTarget(svc, tenant.keys.write, account, campaigns.cpa.id, { target_cpa: cents(current * 1.01), reason: `approve-or-reject ${i}` }));
      }
      const outcomes = await Promise.all(actions.map((a) => Promise.all([approve(a.id), reject(a.id, { reason: 'racing' })])));
      for (const [index, [approved, rejected]] of outcomes.entries()) {
        const actionId: string = actions[index]!.id;
        const final = await approvalOf(svc, tenant.keys.read, account, actionId);
        if (approved!.status === 200 && rejected!.status === 200) {
          // Not two winners of one race: the apply worker returned the approved action to the queue
          // (an earlier action had changed the target), and the rejection came after that.
          const history = await api(svc, 'GET', `/api/v1/accounts/${account}/history?run_id=${actionId}&limit=500`, { key: tenant.keys.read });
          const lifecycle = history.body.data
            .filter((e: any) => e.aggregate.id === actionId && ['ActionApproved', 'ActionReturnedToQueue', 'ActionRejected'].includes(e.type))
            .map((e: any) => e.type);
          expect(lifecycle, `action ${index}`).to.deep.equal(['ActionApproved', 'ActionReturnedToQueue', 'ActionRejected']);
          expect(final.status).to.equal('rejected');
          continue;
        }
        expect([approved!.status, rejected!.status].sort(), `action ${index}`).to.deep.equal([200, 409]);
        if (rejected!.status === 200) expect(final.status).to.equal('rejected');
        else expect(final.status).to.not.equal('rejected');
      }
    });

    it('refuses an approve body with an unknown field or a non-string note (422)', async () => {
      const target = queued[3];
      expectProblem(await approve(target.id, tenant.keys.write, account, { note: 5 }), 422, 'validation-error');
      expectProblem(await approve(target.id, tenant.keys.write, account, { comment: 'hi' }), 422, 'validation-error');
      expect((await approvalOf(svc, tenant.keys.read, account, target.id)).status).to.equal('queued');
    });

    it("answers 404 action-not-found for an action of the workspace's other account named under this account", async () => {
      const runAction = runActionIds[0]!;
      expectProblem(await approve(runAction), 404, 'action-not-found');
      expectProblem(await reject(runAction, { reason: 'wrong account' }), 404, 'action-not-found');
      expect((await approvalOf(svc, tenant.keys.read, tenant.accounts.sandbox2, runAction)).status).to.equal('queued');
    });

    it('cannot be done with a read key (403 insufficient-scope); the action stays queued', async () => {
      const target = queued[0];
      expectProblem(await approve(target.id, tenant.keys.read), 403, 'insufficient-scope');
      expectProblem(await reject(target.id, { reason: 'read key' }, tenant.keys.read), 403, 'insufficient-scope');
      expect((await approvalOf(svc, tenant.keys.read, account, target.id)).status).to.equal('queued');
    });

    it('answers 404 action-not-found for an unknown action id and for a non-UUID', async () => {
      for (const id of [randomUUID(), 'not-a-uuid', '12345']) {
        expectProblem(await approve(id), 404, 'action-not-found');
        expectProblem(await reject(id, { reason: 'nobody' }), 404, 'action-not-found');
      }
    });

    it("answers another workspace's action exactly like a nonexistent one", async () => {
      const missingId = randomUUID();
      for (const verb of ['approve', 'reject'] as const) {
        const send = (id: string) => (verb === 'approve' ? approve(id) : reject(id, { reason: 'cross-tenant' }));
        const foreign = await send(theirAction.id);
        const missing = await send(missingId);
        expectProblem(foreign, 404, 'action-not-found');
        expectProblem(missing, 404, 'action-not-found');
        expect(problemShape(foreign.body, [theirAction.id])).to.deep.equal(problemShape(missing.body, [missingId]));
      }
      expect((await approvalOf(svc, other.keys.read, other.accounts.sandbox, theirAction.id)).status).to.equal('queued');
    });

    it("answers 404 account-not-found for approve on another workspace's account, like a nonexistent account", async () => {
      const missingAccount = randomUUID();
      const foreign = await approve(theirAction.id, tenant.keys.write, other.accounts.sandbox);
      const missing = await approve(theirAction.id, tenant.keys.write, missingAccount);
      expectProblem(foreign, 404, 'account-not-found');
      expectProblem(missing, 404, 'account-not-found');
      expect(problemShape(foreign.body, [other.accounts.sandbox])).to.deep.equal(problemShape(missing.body, [missingAccount]));
      const foreignReject = await reject(theirAction.id, { reason: 'x' }, tenant.keys.write, other.accounts.sandbox);
      expectProblem(foreignReject, 404, 'account-not-found');
      expect((await approvalOf(svc, other.keys.read, other.accounts.sandbox, theirAction.id)).status).to.equal('queued');
    });
  });

  describe('reject', () => {
    it('rejects with a reason (status rejected); approve and reject afterwards answer 409', async () => {
      const target = queued[1];
      const result = await reject(target.id, { reason: 'not this quarter' });
      expect(result.status, result.text).to.equal(200);
      expect(result.body).to.include({ object: 'action', id: target.id, status: 'rejected' });
      const listed = await approvalOf(svc, tenant.keys.read, account, target.id);
      expect(listed.status).to.equal('rejected');
      expect(listed.status_reason).to.contain('not this quarter');
      expectProblem(await approve(target.id), 409, 'action-not-in-queue');
      expectProblem(await reject(target.id, { reason: 'again' }), 409, 'action-not-in-queue');
      // The rejection itself sent again (its answer lost) is answered as it was, and records nothing.
      const again = await reject(target.id, { reason: 'not this quarter' });
      expect(again.status, again.text).to.equal(200);
      expect(again.body).to.include({ status: 'rejected', version: listed.version });
      expect((await approvalOf(svc, tenant.keys.read, account, target.id)).status).to.equal('rejected');
    });

    for (const [label, body] of [
      ['without a reason', {}],
      ['with a blank reason', { reason: '   ' }],
      ['with an empty reason', { reason: '' }],
      ['with an unknown field', { reason: 'ok', extra: 1 }],
    ] as const) {
      it(`refuses a rejection ${label} (422)`, async () => {
        const target = queued[2];
        expectProblem(await reject(target.id, body), 422, 'validation-error');
        expect((await approvalOf(svc, tenant.keys.read, account, target.id)).status).to.equal('queued');
      });
    }

    it('refuses a rejection with no body at all (422)', async () => {
      const result = await api(svc, 'POST', `${approvalsPath(account)}/${queued[2].id}/reject`, { key: tenant.keys.write });
      expectProblem(result, 422, 'validation-error');
    });
  });
});
