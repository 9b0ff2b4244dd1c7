import { expect } from 'chai';
import { randomUUID } from 'node:crypto';
import { SandboxPlatform } from '../../src/platform/sandbox/sandbox-platform.ts';
import { startRun, waitForTerminalRun } from '../support/runs.ts';
import { startTestService, type TestService, type TestTenant } from '../support/test-service.ts';
import { api, campaignsByStrategy, cents, expectProblem, platformAccount, problemShape, proposeTarget } from './helpers.ts';

/** docs/api.md, "History": every event of the account, from the event log, in stream order. */
describe('safe-apply: history', function () {
  this.timeout(60_000);
  let svc: TestService;
  let tenant: TestTenant;
  let other: TestTenant;
  let account: string;
  let runId: string;
  let run: any;
  let all: any[];

  const history = (query: string, key = tenant.keys.read, accountId = account) =>
    api(svc, 'GET', `/api/v1/accounts/${accountId}/history${query ? `?${query}` : ''}`, { key });

  before(async () => {
    svc = await startTestService('sa-history', { ROLES: 'http,projectors,agent-worker' });
    [tenant, other] = await Promise.all([svc.tenant('history-a'), svc.tenant('history-b')]);
    account = tenant.accounts.sandbox;
    // An event of the account outside the run: a proposal through the target endpoint.
    const { cpa } = await campaignsByStrategy(svc, tenant.keys.read, account);
    await proposeTarget(svc, tenant.keys.write, account, cpa.id, { target_cpa: cents(cpa.bidding_strategy.target_cpa! * 1.02) });
    runId = await startRun(svc, tenant.keys.write, account, 'Where are we wasting money? Find search terms without conversions and add negative keywords.');
    run = await waitForTerminalRun(svc, tenant.keys.read, runId, 30_000);
    expect(run.status, JSON.stringify(run.error)).to.equal('succeeded');
    // A second run on the other account: its events must not show up in this account's history.
    const otherRun = await startRun(svc, tenant.keys.write, tenant.accounts.sandbox2, 'Find wasted spend and add negative keywords.');
    await waitForTerminalRun(svc, tenant.keys.read, otherRun, 30_000);
    const page = await history('limit=500');
    expect(page.status, page.text).to.equal(200);
    expect(page.body.next_cursor).to.equal(null);
    all = page.body.data;
  });

  after(async () => {
    await svc?.stop();
  });

  it("lists the account's events in stream order, with the run's lifecycle, tool calls and proposals", async () => {
    expect(all.length).to.be.greaterThan(5);
    const seqs = all.map((e) => e.seq as number);
    for (let i = 1; i < seqs.length; i++) expect(seqs[i]!, `seq at ${i}`).to.be.greaterThan(seqs[i - 1]!);
    for (const event of all) {
      expect(event.account_id).to.equal(account);
      expect(event.workspace_id).to.equal(tenant.workspaceId);
      expect(event).to.include.keys('id', 'type', 'version', 'time', 'aggregate', 'actor', 'correlation_id', 'data', 'hash', 'prev_hash', 'seq');
    }
    const ofRun = all.filter((e) => e.correlation_id === runId);
    const types = ofRun.map((e) => e.type as string);
    for (const type of ['RunQueued', 'RunStarted', 'ToolCalled', 'ActionProposed', 'RunSucceeded']) expect(types, type).to.include(type);
    const first = (type: string) => types.indexOf(type);
    expect(first('RunQueued')).to.be.below(first('RunStarted'));
    expect(first('RunStarted')).to.be.below(first('ToolCalled'));
    expect(first('ToolCalled')).to.be.below(first('ActionProposed'));
    expect(types.lastIndexOf('ActionProposed')).to.be.below(first('RunSucceeded'));
    expect(types.at(-1)).to.equal('RunSucceeded');
    // As many ToolCalled events as the run's result records, and every action the run proposed.
    expect(ofRun.filter((e) => e.type === 'ToolCalled')).to.have.length(run.result.tool_calls.length);
    const proposedIds = ofRun.filter((e) => e.type === 'ActionProposed').map((e) => e.data.action_id);
    expect(proposedIds).to.have.members(run.result.actions.map((a: any) => a.id));
    // The target-endpoint proposal is there too, and it is not correlated with the run.
    expect(all.filter((e) => e.type === 'ActionProposed' && e.data.run_id === null)).to.have.length(1);
  });

  it('keeps each ToolCalled with its full output (what the platform returned)', async () => {
    const calls = all.filter((e) => e.type === 'ToolCalled' && e.correlation_id === runId);
    const ref = await platformAccount(svc, tenant.workspaceId, account);
    const platform = new SandboxPlatform(svc.service.infrastructure.database.db);

    const summary = calls.find((e) => e.data.name === 'get_account_summary');
    expect(summary, 'a get_account_summary call').to.not.equal(undefined);
    expect(summary.data.ok).to.equal(true);
    expect(summary.data.output).to.deep.equal({ summary: await platform.accountSummary(ref) });

    const terms = calls.find((e) => e.data.name === 'get_search_terms');
    expect(terms, 'a get_search_terms call').to.not.equal(undefined);
    const { range, search_terms: rows } = terms.data.output;
    const expected = await platform.searchTerms(ref, range, { limit: (terms.data.input.limit as number | undefined) ?? 100 });
    expect(rows).to.have.length(expected.length);
    expect(rows.length).to.be.greaterThan(20);
    expect(rows).to.deep.equal(expected);
    // The run resource itself keeps only name, input and ok.
    expect(run.result.tool_calls[0]).to.not.have.property('output');
  });

  it('filters by run_id: only the events correlated with that run', async () => {
    const filtered = await history(`run_id=${runId}&limit=500`);
    expect(filtered.status).to.equal(200);
    expect(filtered.body.data.length).to.be.greaterThan(0);
    for (const event of filtered.body.data) expect(event.correlation_id).to.equal(runId);
    expect(filtered.body.data.map((e: any) => e.seq)).to.deep.equal(all.filter((e) => e.correlation_id === runId).map((e) => e.seq));
    const none = await history(`run_id=${randomUUID()}`);
    expect(none.body.data).to.deep.equal([]);
    expect(none.body.next_cursor).to.equal(null);
  });

  it('pages with limit=3: next_cursor walks every event exactly once, in order', async () => {
    const walked: number[] = [];
    let cursor: string | null = null;
    let pages = 0;
    do {
      const page = await history(`limit=3${cursor === null ? '' : `&cursor=${cursor}`}`);
      expect(page.status, page.text).to.equal(200);
      expect(page.body.data.length).to.be.at.most(3);
      walked.push(...page.body.data.map((e: any) => e.seq));
      cursor = page.body.next_cursor;
      if (cursor !== null) {
        expect(page.body.data).to.have.length(3);
        expect(cursor).to.equal(String(page.body.data[2].seq));
      }
      expect(++pages).to.be.below(200);
    } while (cursor !== null);
    expect(walked).to.deep.equal(all.map((e) => e.seq));
    expect(new Set(walked).size).to.equal(walked.length);
  });

  it('pages a run_id-filtered history too (limit=2)', async () => {
    const walked: number[] = [];
    let cursor: string | null = null;
    do {
      const page = await history(`run_id=${runId}&limit=2${cursor === null ? '' : `&cursor=${cursor}`}`);
      walked.push(...page.body.data.map((e: any) => e.seq));
      cursor = page.body.next_cursor;
    } while (cursor !== null);
    expect(walked).to.deep.equal(all.filter((e) => e.correlation_id === runId).map((e) => e.seq));
  });

  it('is readable with a read key, and an account without events has an empty history', async () => {
    const fresh = await history('', tenant.keys.read, tenant.accounts.disconnected);
    expect(fresh.status).to.equal(200);
    // Only the account's own creation event(s), none of the runs.
    for (const event of fresh.body.data) expect(event.account_id).to.equal(tenant.accounts.disconnected);
    expect(fresh.body.data.filter((e: any) => e.aggregate.type === 'run')).to.deep.equal([]);
  });

  it("answers another workspace's account like a nonexistent one (404 account-not-found)", async () => {
    const missingId = randomUUID();
    const foreign = await history('', tenant.keys.read, other.accounts.sandbox);
    const missing = await history('', tenant.keys.read, missingId);
    expectProblem(foreign, 404, 'account-not-found');
    expectProblem(missing, 404, 'account-not-found');
    expect(problemShape(foreign.body, [other.accounts.sandbox])).to.deep.equal(problemShape(missing.body, [missingId]));
  });

  for (const query of ['cursor=abc', 'cursor=-1', 'cursor=1.5', 'limit=0', 'limit=501', 'limit=x', 'run_id=nope']) {
    it(`refuses ?${query} with 422 validation-error`, async () => {
      const result = await history(query);
      expectProblem(result, 422, 'validation-error');
    });
  }
});
