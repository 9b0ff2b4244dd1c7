import { expect } from 'chai';
import { negativeBlocks } from '../../src/platform/keyword-match.ts';
import { startRun, waitForTerminalRun } from '../support/runs.ts';
import { startTestService, type TestService, type TestTenant } from '../support/test-service.ts';

interface Term {
  search_term: string;
  campaign_id: string;
  cost: number;
  clicks: number;
  conversions: number;
}

describe('the built-in rules agent on a sandbox account, over HTTP', function () {
  this.timeout(60_000);
  let svc: TestService;
  let tenant: TestTenant;

  before(async () => {
    svc = await startTestService('rulesagent');
    tenant = await svc.tenant();
  });
  after(async () => svc?.stop());

  it('finds wasted spend and proposes negative keywords that match only non-converting search terms', async () => {
    const runId = await startRun(svc, tenant.keys.write, tenant.accounts.sandbox, 'Find wasted spend in my search terms and propose negative keywords');
    const run = await waitForTerminalRun(svc, tenant.keys.write, runId);
    expect(run.status).to.equal('succeeded');
    expect(run.agent).to.deep.equal({ kind: 'rules', model: 'rules-v1' });
    expect(run.result.text).to.match(/€[\d,]+\.\d\d/).and.match(/search terms spent/);
    expect(run.result.usage.steps).to.be.greaterThan(1);
    expect(run.result.tool_calls.map((c: { name: string }) => c.name)).to.include('get_search_terms');
    expect(run.result.actions.length).to.be.within(1, 3);

    // What the agent saw, from the full transcript in the event log.
    const history = (await (await svc.request('GET', `/api/v1/accounts/${tenant.accounts.sandbox}/history?run_id=${runId}&limit=500`, { key: tenant.keys.read })).json()) as {
      data: { type: string; data: any }[];
    };
    const seen: Term[] = history.data
      .filter((e) => e.type === 'ToolCalled' && e.data.name === 'get_search_terms')
      .flatMap((e) => e.data.output.search_terms as Term[]);
    const keywords: { campaign_id: string; text: string; status: string }[] = history.data.find(
      (e) => e.type === 'ToolCalled' && e.data.name === 'list_keywords',
    )!.data.output.keywords;
    const proposals = history.data.filter((e) => e.type === 'ActionProposed');
    expect(proposals).to.have.length(run.result.actions.length);
    for (const proposal of proposals) {
      expect(proposal.data.kind).to.equal('add_negative_keywords');
      const campaignTerms = seen.filter((t) => t.campaign_id === proposal.data.params.campaign_id);
      for (const keyword of proposal.data.params.keywords as { text: string; match_type: string }[]) {
        const matches = (t: Term) => negativeBlocks(keyword as { text: string; match_type: 'exact' | 'phrase' }, t.search_term);
        const matched = campaignTerms.filter(matches);
        expect(matched.length, `"${keyword.text}" matches a search term of the campaign`).to.be.greaterThan(0);
        expect(matched.every((t) => t.conversions === 0), `"${keyword.text}" blocks no converting search term`).to.equal(true);
        expect(seen.filter((t) => t.conversions > 0).some(matches), `"${keyword.text}" blocks no converting term anywhere`).to.equal(false);
        const own = keywords.filter((k) => k.campaign_id === proposal.data.params.campaign_id && k.status === 'enabled');
        expect(own.filter((k) => negativeBlocks(keyword as never, k.text)).map((k) => k.text), `"${keyword.text}" blocks none of the campaign's keywords`).to.deep.equal([]);
      }
      expect(proposal.data.based_on.matched_cost_30d).to.be.greaterThan(0);
      expect(proposal.data.based_on.matched_conversions_30d).to.equal(0);
      expect(proposal.data.based_on.blocked_keywords).to.deep.equal([]);
    }
  });

  it('answers a plain question with figures and proposes nothing for a read key', async () => {
    const run = await waitForTerminalRun(
      svc,
      tenant.keys.read,
      await startRun(svc, tenant.keys.read, tenant.accounts.sandbox2, 'How did my campaigns do in the last 30 days? Find waste too.'),
    );
    expect(run.status).to.equal('succeeded');
    expect(run.result.actions).to.deep.equal([]);
    expect(run.result.text).to.match(/in the last 30 days [\d,]+ impressions/).and.match(/Campaigns by spend/);
  });

  it('proposes pausing keywords that spent without converting for a keywords brief', async () => {
    const run = await waitForTerminalRun(
      svc,
      tenant.keys.write,
      await startRun(svc, tenant.keys.write, tenant.accounts.sandbox, 'Pause the worst performing keywords'),
    );
    expect(run.status).to.equal('succeeded');
    const kinds = run.result.actions.map((a: { kind: string }) => a.kind);
    if (kinds.length === 0) expect(run.result.text).to.include('No enabled keyword spent');
    else expect(kinds).to.deep.equal(['pause_keywords']);
    expect(run.result.tool_calls.map((c: { name: string }) => c.name)).to.include('list_keywords');
  });
});
