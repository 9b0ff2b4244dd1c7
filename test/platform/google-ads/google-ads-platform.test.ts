import { expect } from 'chai';
import { randomBytes } from 'node:crypto';
import type { AdsPlatform, ChangeOutcome, PlatformAccountRef } from '../../../src/platform/ads-platform.ts';
import { createPlatform } from '../../../src/platform/create-platform.ts';
import { withPlatformDeadline } from '../../../src/platform/platform-deadline.ts';
import { FakeGoogleAds, FAKE_DEVELOPER_TOKEN } from '../../support/fake-google-ads/fake-google-ads-server.ts';
import { connectFakeAccount, googleAdsEnv } from '../../support/google-ads.ts';
import { startTestService, type TestService } from '../../support/test-service.ts';
import { workspaceDecider } from '../../../commands/workspace/workspace-decider.ts';

const MANAGER = '1112223333';

describe('Google Ads adapter (against the local fake of the REST API)', function () {
  this.timeout(60_000);
  const fake = new FakeGoogleAds({ managerId: MANAGER, pageSize: 4 });
  let svc: TestService;
  let platform: AdsPlatform;
  let account: PlatformAccountRef;
  let refreshToken: string;
  const slept: number[] = [];
  const range = () => {
    const day = (back: number) => new Date(Date.now() - back * 86_400_000).toISOString().slice(0, 10);
    return { from: day(30), to: day(1) };
  };

  before(async () => {
    await fake.start();
    svc = await startTestService('gadsplatform', { ROLES: 'projectors', ...googleAdsEnv(fake) });
    const infra = svc.service.infrastructure;
    const workspace = await infra.commands.handle(workspaceDecider, { type: 'CreateWorkspace', workspaceId: 'ws-gads', name: 'gads', meta: { actor: { kind: 'operator', id: 't' }, correlationId: 'c' } });
    expect(workspace.appended.length).to.equal(1);
    ({ ref: account, refreshToken } = await connectFakeAccount(infra, fake, 'ws-gads', { loginCustomerId: '111-222-3333' }));
    platform = createPlatform(infra.database.db, svc.config, {
      googleAds: {
        maxWaitMs: 5000,
        sleep: async (ms) => {
          slept.push(ms);
        },
      },
    });
  });
  after(async () => {
    await svc?.stop();
    await fake.stop();
  });
  beforeEach(() => {
    slept.length = 0;
  });

  it('lists campaigns with budgets in currency units and every strategy mapped; removed campaigns are not listed', async () => {
    const campaigns = await platform.listCampaigns(account);
    expect(campaigns.map((c) => c.id)).to.deep.equal(['111', '222', '333', '444', '666']);
    const byId = new Map(campaigns.map((c) => [c.id, c]));
    expect(byId.get('111')).to.deep.include({ status: 'enabled', daily_budget: 50 });
    expect(byId.get('111')!.bidding_strategy).to.deep.equal({ type: 'maximize_conversions', target_cpa: 25, target_roas_pct: null, portfolio: null });
    expect(byId.get('222')!.bidding_strategy).to.deep.include({ type: 'maximize_conversion_value', target_roas_pct: 400 });
    expect(byId.get('333')!.bidding_strategy).to.deep.equal({
      type: 'maximize_conversions',
      target_cpa: 15,
      target_roas_pct: null,
      portfolio: { id: '900', name: 'Portfolio tCPA', campaign_ids: ['333', '444'] },
    });
    expect(byId.get('444')!.status).to.equal('paused');
    expect(byId.get('666')!.bidding_strategy).to.deep.include({ type: 'maximize_conversions', target_cpa: 30 });
  });

  it('reads whether a campaign budget is shared (explicitly_shared, reference_count) and which campaigns draw on it', async () => {
    const customer = fake.accounts.get('1234567890')!;
    expect((await platform.getCampaign(account, '111'))!.shared_budget).to.equal(null);
    customer.campaigns.get('666')!.budgetId = '501';
    customer.budgets.get('503')!.explicitlyShared = true;
    try {
      fake.requests.length = 0;
      const byId = new Map((await platform.listCampaigns(account)).map((c) => [c.id, c]));
      const query = String((fake.apiRequests()[0]!.body as { query: string }).query);
      expect(query).to.include('campaign_budget.explicitly_shared').and.include('campaign_budget.reference_count');
      expect(byId.get('111')).to.deep.include({ daily_budget: 50, shared_budget: { id: '501', campaign_ids: ['111', '666'] } });
      expect(byId.get('666')).to.deep.include({ daily_budget: 50, shared_budget: { id: '501', campaign_ids: ['111', '666'] } });
      // A shared budget only this campaign uses now is still shared: another campaign can join it any time.
      expect(byId.get('333')!.shared_budget).to.deep.equal({ id: '503', campaign_ids: ['333'] });
      expect(byId.get('222')!.shared_budget).to.equal(null);
    } finally {
      customer.campaigns.get('666')!.budgetId = '506';
      delete customer.budgets.get('503')!.explicitlyShared;
    }
  });

  it('sends the bearer token, developer-token and login-customer-id on every call, JSON as the API speaks it', async () => {
    fake.requests.length = 0;
    await platform.accountSummary(account);
    const calls = fake.apiRequests();
    expect(calls).to.have.length.greaterThan(1);
    for (const call of calls) {
      expect(call.path).to.match(/^\/v26\/customers\/1234567890\/googleAds:search$/);
      expect(call.headers['developer-token']).to.equal(FAKE_DEVELOPER_TOKEN);
      expect(call.headers['login-customer-id']).to.equal(MANAGER);
      expect(String(call.headers.authorization)).to.match(/^Bearer ya29\.fake-/);
      expect(String(call.headers.authorization)).not.to.include(refreshToken);
    }
  });

  it('reads search terms over every result page, most expensive first, with keyword ids the port can pause', async () => {
    fake.requests.length = 0;
    const terms = await platform.searchTerms(account, range(), { limit: 500 });
    expect(fake.apiRequests().filter((r) => (r.body as { pageToken?: string }).pageToken)).to.have.length.greaterThan(1);
    expect(terms).to.have.length(13);
    expect(terms[0]).to.deep.include({ search_term: 'hiking boots', campaign_id: '111', ad_group_id: '1111', keyword_id: '1111-11111', clicks: 360, cost: 540, conversions: 30 });
    expect(terms.map((t) => t.cost)).to.deep.equal([...terms.map((t) => t.cost)].sort((a, b) => b - a));
    const keywords = await platform.listKeywords(account, range(), '111');
    expect(keywords.map((k) => [k.id, k.text, k.match_type, k.status, k.max_cpc])).to.deep.equal([
      ['1111-11111', 'hiking boots', 'broad', 'enabled', 1.2],
      ['1111-11112', 'waterproof hiking boots', 'phrase', 'enabled', null],
    ]);
    const totals = await platform.searchTermTotals(account, range(), '222');
    expect(totals.find((t) => t.search_term === 'tent rental')).to.deep.equal({ search_term: 'tent rental', cost: 36, conversions: 0, converting: false });
  });

  it('keeps hostile platform text recordable: control characters in a campaign name become U+FFFD', async () => {
    const campaign = fake.accounts.get('1234567890')!.campaigns.get('444')!;
    const original = campaign.name;
    campaign.name = 'Jackets\u0000\u001b[31m';
    try {
      expect((await platform.getCampaign(account, '444'))!.name).to.equal('Jackets\ufffd\ufffd[31m');
    } finally {
      campaign.name = original;
    }
  });

  it('refuses a hostile or unknown campaign id before it reaches a query', async () => {
    fake.requests.length = 0;
    for (const id of ["111' OR campaign.id > '0", '999']) {
      try {
        await platform.searchTerms(account, range(), { campaignId: id });
        expect.fail('should refuse');
      } catch (error) {
        expect((error as { code?: string }).code).to.equal('campaign-not-found');
      }
    }
    const queries = fake.apiRequests().map((r) => String((r.body as { query?: string }).query));
    expect(queries.filter((q) => q.includes('campaign.id >') || q.includes('999'))).to.deep.equal([]);
  });

  it('refreshes an expired access token once, however many calls see the 401 at the same time', async () => {
    await platform.listCampaigns(account);
    fake.expireAccessTokens();
    const before = fake.tokenExchanges;
    const results = await Promise.all(Array.from({ length: 6 }, () => platform.listCampaigns(account)));
    expect(results.every((r) => r.length === 5)).to.equal(true);
    expect(fake.tokenExchanges - before).to.equal(1);
  });

  it('waits out a 429 for its retryDelay, retries a 5xx with backoff, and gives up once the run deadline would pass', async () => {
    fake.failNext(/googleAds:search$/, { kind: 'quota', retryDelay: '2s' });
    expect(await platform.listCampaigns(account)).to.have.length(5);
    expect(slept).to.deep.equal([2000]);

    slept.length = 0;
    fake.failNext(/googleAds:search$/, { kind: 'server', status: 503 }, 2);
    expect(await platform.listCampaigns(account)).to.have.length(5);
    expect(slept).to.have.length(2);

    fake.failNext(/googleAds:search$/, { kind: 'quota', retryDelay: '30s' });
    const refused = await withPlatformDeadline(Date.now() + 1000, () => platform.listCampaigns(account)).catch((e: unknown) => e as Error & { code: string });
    expect((refused as { code: string }).code).to.equal('platform-rate-limited');
    expect((refused as Error).message).to.include('Too many requests. Retry in 30s.');
  });

  it('inside a run, waits a retryDelay longer than the call cap while the run’s own deadline allows', async () => {
    // The cap outside a run is 5 s here; the run has 2 minutes left, so Google's 60 s is waited out.
    fake.failNext(/googleAds:search$/, { kind: 'quota', retryDelay: '60s' });
    expect(await withPlatformDeadline(Date.now() + 120_000, () => platform.listCampaigns(account))).to.have.length(5);
    expect(slept).to.deep.equal([60_000]);
  });

  it('gives up after 5 rate limits without retryDelay, however much of the run is left', async () => {
    fake.failNext(/googleAds:search$/, { kind: 'quota' }, 6);
    const before = fake.requests.length;
    const refused = await withPlatformDeadline(Date.now() + 3_600_000, () => platform.listCampaigns(account)).catch((e: unknown) => e as Error & { code: string });
    expect((refused as { code: string }).code).to.equal('platform-rate-limited');
    expect(fake.requests.length - before).to.equal(6);
    expect(slept).to.deep.equal([1000, 2000, 4000, 8000, 16_000]);
  });

  it('adds negatives as campaign criteria, once: applying the same change again sends nothing new', async () => {
    fake.requests.length = 0;
    const change = { kind: 'add_negative_keywords', campaign_id: '111', keywords: [{ text: 'Free', match_type: 'phrase' }, { text: 'jobs', match_type: 'phrase' }] } as const;
    const outcome = (await platform.applyChange(account, change)) as ChangeOutcome;
    expect(outcome.failures).to.deep.equal([]);
    const [mutate] = fake.mutates('campaignCriteria');
    expect(mutate!.body).to.deep.equal({
      operations: [
        { create: { campaign: 'customers/1234567890/campaigns/111', negative: true, keyword: { text: 'free', matchType: 'PHRASE' } } },
        { create: { campaign: 'customers/1234567890/campaigns/111', negative: true, keyword: { text: 'jobs', matchType: 'PHRASE' } } },
      ],
      partialFailure: true,
      validateOnly: false,
    });
    await platform.applyChange(account, change);
    expect(fake.mutates('campaignCriteria')).to.have.length(1);
    expect(await platform.listNegativeKeywords(account, '111')).to.deep.equal([
      { campaign_id: '111', text: 'free', match_type: 'phrase' },
      { campaign_id: '111', text: 'jobs', match_type: 'phrase' },
    ]);
  });

  it('sets targets on the field of the campaign’s own strategy, in micros, with its updateMask; a portfolio is refused', async () => {
    fake.requests.length = 0;
    await platform.applyChange(account, { kind: 'set_target_cpa', campaign_id: '111', target_cpa: 27.5 });
    await platform.applyChange(account, { kind: 'set_target_cpa', campaign_id: '666', target_cpa: 31 });
    await platform.applyChange(account, { kind: 'set_target_roas', campaign_id: '222', target_roas_pct: 450 });
    expect(fake.mutates('campaigns').map((r) => (r.body as { operations: unknown[] }).operations[0])).to.deep.equal([
      { update: { resourceName: 'customers/1234567890/campaigns/111', maximizeConversions: { targetCpaMicros: '27500000' } }, updateMask: 'maximizeConversions.targetCpaMicros' },
      { update: { resourceName: 'customers/1234567890/campaigns/666', targetCpa: { targetCpaMicros: '31000000' } }, updateMask: 'targetCpa.targetCpaMicros' },
      { update: { resourceName: 'customers/1234567890/campaigns/222', maximizeConversionValue: { targetRoas: 4.5 } }, updateMask: 'maximizeConversionValue.targetRoas' },
    ]);
    expect((await platform.getCampaign(account, '111'))!.bidding_strategy.target_cpa).to.equal(27.5);
    const portfolio = await platform.applyChange(account, { kind: 'set_target_cpa', campaign_id: '333', target_cpa: 20 }).catch((e: unknown) => e as Error);
    expect((portfolio as Error).message).to.include('portfolio "Portfolio tCPA"').and.include('333, 444');
    expect(fake.mutates('campaigns')).to.have.length(3);
  });

  it('rounds budgets to the currency’s minimum unit', async () => {
    fake.requests.length = 0;
    await platform.applyChange(account, { kind: 'set_campaign_budget', campaign_id: '222', daily_budget: 80.555 });
    expect((fake.mutates('campaignBudgets')[0]!.body as { operations: unknown[] }).operations).to.deep.equal([
      { update: { resourceName: 'customers/1234567890/campaignBudgets/502', amountMicros: '80560000' }, updateMask: 'amountMicros' },
    ]);
    expect((await platform.getCampaign(account, '222'))!.daily_budget).to.equal(80.56);
  });

  it('rounds to whole units in a currency without minor units (JPY)', async () => {
    const infra = svc.service.infrastructure;
    fake.seed('5555555555').currencyCode = 'JPY';
    const { ref: yen } = await connectFakeAccount(infra, fake, 'ws-gads', { customerId: '5555555555', loginCustomerId: MANAGER });
    fake.requests.length = 0;
    await platform.applyChange(yen, { kind: 'set_campaign_budget', campaign_id: '111', daily_budget: 5000.4 });
    expect((fake.mutates('campaignBudgets')[0]!.body as { operations: { update: { amountMicros: string } }[] }).operations[0]!.update.amountMicros).to.equal('5000000000');
    // The unit proposals are rounded to (src/policy/proposal-service.ts), and a budget of millions of units is an ordinary one.
    expect(await platform.moneyUnit!(yen)).to.equal(1);
    expect(await platform.moneyUnit!(account)).to.equal(0.01);
    fake.requests.length = 0;
    await platform.applyChange(yen, { kind: 'set_campaign_budget', campaign_id: '111', daily_budget: 2_500_000 });
    expect((fake.mutates('campaignBudgets')[0]!.body as { operations: { update: { amountMicros: string } }[] }).operations[0]!.update.amountMicros).to.equal('2500000000000');
  });

  it('validates with validateOnly: a refused change throws Google’s message and code and changes nothing', async () => {
    fake.maxTargetCpaMicros = 100_000_000;
    try {
      const refused = await platform.validateChange!(account, { kind: 'set_target_cpa', campaign_id: '111', target_cpa: 150 }).catch((e: unknown) => e as Error & { details: Record<string, unknown> });
      expect(refused).to.be.instanceOf(Error);
      expect(refused!.message).to.equal('Google Ads: Too high. (rangeError.TOO_HIGH)');
      expect(refused!.details.platform_errors).to.deep.equal([{ error_code: 'rangeError.TOO_HIGH', message: 'Too high.' }]);
      const sent = fake.mutates('campaigns').at(-1)!.body as { validateOnly: boolean };
      expect(sent.validateOnly).to.equal(true);
      expect((await platform.getCampaign(account, '111'))!.bidding_strategy.target_cpa).to.equal(27.5);
      await platform.validateChange!(account, { kind: 'set_target_cpa', campaign_id: '111', target_cpa: 26 });
      expect((await platform.getCampaign(account, '111'))!.bidding_strategy.target_cpa).to.equal(27.5);
    } finally {
      fake.maxTargetCpaMicros = null;
    }
  });

  it('applies with partialFailure and reports each refused operation by keyword', async () => {
    const outcome = (await platform.applyChange(account, { kind: 'pause_keywords', keyword_ids: ['1111-11112', '1111-99999'] })) as ChangeOutcome;
    expect(outcome.applied).to.deep.equal(['keyword 1111-11112']);
    expect(outcome.operations).to.deep.equal([{ subject: 'keyword 1111-11112', resource_name: 'customers/1234567890/adGroupCriteria/1111~11112' }]);
    expect(outcome.failures).to.deep.equal([{ subject: 'keyword 1111-99999', error_code: 'mutateError.RESOURCE_NOT_FOUND', message: 'The ad group criterion was not found.' }]);
    const keywords = await platform.listKeywords(account, range(), '111');
    expect(keywords.find((k) => k.id === '1111-11112')!.status).to.equal('paused');
  });

  it('a stored grant the service cannot read (another CREDENTIALS_KEY, or none) fails as account-not-connected, never quoting a key', async () => {
    const otherKey = randomBytes(32);
    const keys = [svc.config.credentialsKey!.toString('base64'), otherKey.toString('base64')];
    for (const credentialsKey of [otherKey, undefined]) {
      const unreadable = createPlatform(svc.service.infrastructure.database.db, { ...svc.config, credentialsKey }, { googleAds: { maxWaitMs: 1000 } });
      const refused = await unreadable.listCampaigns(account).then(
        () => null,
        (e: unknown) => e as Error & { code: string; kind: string },
      );
      expect(refused).to.deep.include({ code: 'account-not-connected', kind: 'illegal-state' });
      expect(refused!.message).to.include(credentialsKey ? 'not the key it was stored with' : 'CREDENTIALS_KEY is not set');
      expect(refused!.message).to.include('adsagent account reconnect');
      for (const key of keys) expect(refused!.message).not.to.include(key);
    }
  });

  it('a revoked grant fails as account-not-connected, telling how to reconnect', async () => {
    fake.revokeRefreshToken(refreshToken);
    const error = await platform.listCampaigns(account).catch((e: unknown) => e as Error & { code: string });
    expect((error as { code: string }).code).to.equal('account-not-connected');
    expect((error as Error).message).to.include('invalid_grant').and.include('adsagent account reconnect');
    expect((error as Error).message).not.to.include(refreshToken);
  });
});
