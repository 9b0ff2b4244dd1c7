import { expect } from 'chai';
import type { ChangeOutcome, PlatformAccountRef } from '../../../src/platform/ads-platform.ts';
import { AccessTokenCache } from '../../../src/platform/google-ads/access-token-cache.ts';
import { exchangeRefreshToken } from '../../../src/platform/google-ads/oauth-token-client.ts';
import { GoogleAdsPlatform } from '../../../src/platform/google-ads/google-ads-platform.ts';
import { GoogleAdsTransport } from '../../../src/platform/google-ads/google-ads-transport.ts';
import { isCleanText } from '../../../src/text/hostile-text.ts';
import { FakeGoogleAds, FAKE_CLIENT_ID, FAKE_CLIENT_SECRET, FAKE_DEVELOPER_TOKEN } from '../../support/fake-google-ads/fake-google-ads-server.ts';

/**
 * What a change's outcome says when Google's answer is not a plain yes: several errors for one
 * operation, removed criteria, a lost answer, a concurrent modification. The real adapter
 * and transport against the fake REST API.
 */
describe('Google Ads adapter: change outcomes Google answers in part, late or not at all', function () {
  this.timeout(30_000);
  const CUSTOMER = '1234567890';
  const fake = new FakeGoogleAds();
  const slept: number[] = [];
  let platform: GoogleAdsPlatform;
  const account = { accountId: 'acc-outcomes', name: 'Acme', platform: 'google-ads', sandboxSeed: null, googleAds: { customer_id: CUSTOMER, login_customer_id: null } } as unknown as PlatformAccountRef;
  const customer = () => fake.accounts.get(CUSTOMER)!;
  const failure = async (promise: Promise<unknown>) => promise.then(() => expect.fail('should throw'), (e: unknown) => e as Error & { code: string });

  before(async () => {
    await fake.start();
    const refresh = fake.issueRefreshToken();
    const config = { apiBaseUrl: fake.baseUrl, apiVersion: fake.version, oauthTokenUrl: fake.tokenUrl, clientId: FAKE_CLIENT_ID, clientSecret: FAKE_CLIENT_SECRET, developerToken: FAKE_DEVELOPER_TOKEN };
    const tokens = new AccessTokenCache(() => exchangeRefreshToken(config, refresh));
    platform = new GoogleAdsPlatform(new GoogleAdsTransport(config, tokens, { maxWaitMs: 60_000, sleep: async (ms) => void slept.push(ms) }));
  });
  after(() => fake.stop());
  beforeEach(() => {
    fake.seed(CUSTOMER);
    fake.requests.length = 0;
    fake.beforeMutate = null;
    slept.length = 0;
  });

  it('counts failed operations, not errors: one operation with two errors beside one applied is a change applied in part', async () => {
    const bad = 'a b c d e f g h i j k!';
    const outcome = (await platform.applyChange(account, {
      kind: 'add_negative_keywords',
      campaign_id: '222',
      keywords: [
        { text: bad, match_type: 'phrase' },
        { text: 'rental', match_type: 'exact' },
      ],
    })) as ChangeOutcome;
    expect(fake.mutates('campaignCriteria')).to.have.length(1);
    expect(customer().negatives.map((n) => n.text)).to.deep.equal(['rental']);
    expect(outcome.applied).to.deep.equal(['negative "rental" (exact)']);
    expect(outcome.operations).to.have.length(1);
    expect(outcome.operations![0]!.subject).to.equal('negative "rental" (exact)');
    expect(outcome.failures.map((f) => [f.subject, f.error_code])).to.deep.equal([
      [`negative "${bad}" (phrase)`, 'criterionError.KEYWORD_HAS_TOO_MANY_WORDS'],
      [`negative "${bad}" (phrase)`, 'criterionError.KEYWORD_HAS_INVALID_CHARS'],
    ]);

    // Every operation refused (one of them twice): the change is refused as a whole, with every error.
    const refused = await failure(
      platform.applyChange(account, { kind: 'add_negative_keywords', campaign_id: '222', keywords: [{ text: bad, match_type: 'phrase' }, { text: 'x y z!', match_type: 'exact' }] }),
    );
    expect(refused.code).to.equal('platform-request-refused');
    expect((refused as unknown as { errors: unknown[] }).errors).to.have.length(3);
  });

  it('does not count a removed negative as present: it is added again, and not listed', async () => {
    customer().negatives.push({ criterionId: '790001', campaignId: '222', text: 'cheap', matchType: 'EXACT', status: 'REMOVED' });
    expect(await platform.listNegativeKeywords(account, '222')).to.deep.equal([]);
    const outcome = (await platform.applyChange(account, { kind: 'add_negative_keywords', campaign_id: '222', keywords: [{ text: 'cheap', match_type: 'exact' }] })) as ChangeOutcome;
    expect(fake.mutates('campaignCriteria')).to.have.length(1);
    expect(outcome).to.deep.include({ failures: [], applied: ['negative "cheap" (exact)'] });
    expect(customer().negatives.map((n) => [n.text, n.status ?? 'ENABLED'])).to.deep.equal([
      ['cheap', 'REMOVED'],
      ['cheap', 'ENABLED'],
    ]);
    expect(await platform.listNegativeKeywords(account, '222')).to.deep.equal([{ campaign_id: '222', text: 'cheap', match_type: 'exact' }]);
  });

  it('never resends a create whose answer was lost: the platform is unavailable, and the next attempt finds the negative in place', async () => {
    fake.failNext(/campaignCriteria:mutate$/, { kind: 'server', status: 503, afterApplying: true });
    const change = { kind: 'add_negative_keywords', campaign_id: '222', keywords: [{ text: 'tent pegs', match_type: 'phrase' }] } as const;
    const lost = await failure(platform.applyChange(account, change));
    expect(lost.code).to.equal('platform-unavailable');
    expect(fake.mutates('campaignCriteria')).to.have.length(1);
    expect(customer().negatives.map((n) => n.text)).to.deep.equal(['tent pegs']);
    // The apply worker's next attempt re-plans from a fresh read: nothing to send, the negative is applied.
    const again = (await platform.applyChange(account, change)) as ChangeOutcome;
    expect(again).to.deep.include({ failures: [], applied: ['negative "tent pegs" (phrase)'] });
    expect(fake.mutates('campaignCriteria')).to.have.length(1);

    // An update is the same whenever it is sent: a lost answer is still retried.
    fake.failNext(/campaignBudgets:mutate$/, { kind: 'server', status: 503, afterApplying: true });
    const budget = (await platform.applyChange(account, { kind: 'set_campaign_budget', campaign_id: '222', daily_budget: 90 })) as ChangeOutcome;
    expect(budget.failures).to.deep.equal([]);
    expect(fake.mutates('campaignBudgets')).to.have.length(2);
    expect(customer().budgets.get('502')!.amountMicros).to.equal(90_000_000);
  });

  it('reports a negative created meanwhile (RESOURCE_ALREADY_EXISTS on its create) as applied, not refused', async () => {
    fake.beforeMutate = (service) => {
      if (service === 'campaignCriteria') customer().negatives.push({ criterionId: '790002', campaignId: '222', text: 'tent repair', matchType: 'EXACT' });
    };
    const outcome = (await platform.applyChange(account, {
      kind: 'add_negative_keywords',
      campaign_id: '222',
      keywords: [
        { text: 'tent repair', match_type: 'exact' },
        { text: 'tent hire', match_type: 'exact' },
      ],
    })) as ChangeOutcome;
    expect(outcome.failures).to.deep.equal([]);
    expect(outcome.applied).to.deep.equal(['negative "tent repair" (exact)', 'negative "tent hire" (exact)']);
    expect(outcome.operations!.map((o) => o.subject)).to.deep.equal(['negative "tent hire" (exact)']);

    // Alone in the change, too: not a refusal of the whole change.
    fake.beforeMutate = (service) => {
      if (service === 'campaignCriteria') customer().negatives.push({ criterionId: '790003', campaignId: '222', text: 'tent rent', matchType: 'EXACT' });
    };
    const alone = (await platform.applyChange(account, { kind: 'add_negative_keywords', campaign_id: '222', keywords: [{ text: 'tent rent', match_type: 'exact' }] })) as ChangeOutcome;
    expect(alone).to.deep.include({ failures: [], applied: ['negative "tent rent" (exact)'] });
  });

  it('retries databaseError.CONCURRENT_MODIFICATION (409 ABORTED or 400) with backoff, then answers platform-unavailable', async () => {
    fake.failNext(/campaignBudgets:mutate$/, { kind: 'concurrent', status: 409 });
    fake.failNext(/campaignBudgets:mutate$/, { kind: 'concurrent', status: 400 });
    const outcome = (await platform.applyChange(account, { kind: 'set_campaign_budget', campaign_id: '222', daily_budget: 85 })) as ChangeOutcome;
    expect(outcome.failures).to.deep.equal([]);
    expect(fake.mutates('campaignBudgets').map((r) => r.status)).to.deep.equal([409, 400, 200]);
    expect(slept).to.have.length(2);
    expect(customer().budgets.get('502')!.amountMicros).to.equal(85_000_000);

    // Aborted, so nothing was applied: a create is retried too.
    fake.failNext(/campaignCriteria:mutate$/, { kind: 'concurrent' });
    const negative = (await platform.applyChange(account, { kind: 'add_negative_keywords', campaign_id: '222', keywords: [{ text: 'tent sale', match_type: 'exact' }] })) as ChangeOutcome;
    expect(negative.failures).to.deep.equal([]);
    expect(fake.mutates('campaignCriteria').map((r) => r.status)).to.deep.equal([409, 200]);

    // Bounded: after 4 retries the platform is unavailable (deferred by the apply worker), never refused.
    fake.failNext(/campaignBudgets:mutate$/, { kind: 'concurrent' }, 5);
    const gaveUp = await failure(platform.applyChange(account, { kind: 'set_campaign_budget', campaign_id: '222', daily_budget: 70 }));
    expect(gaveUp.code).to.equal('platform-unavailable');
    expect(gaveUp.message).to.include('CONCURRENT_MODIFICATION');
    expect(customer().budgets.get('502')!.amountMicros).to.equal(85_000_000);
  });

  it('cuts long names without splitting an emoji, so every name stays recordable', async () => {
    const long = `${'a'.repeat(199)}\u{1F600} tail`;
    customer().campaigns.get('222')!.name = long;
    customer().portfolios.get('900')!.name = long;
    customer().adGroups.get('2221')!.name = long;
    const campaign = (await platform.getCampaign(account, '222'))!;
    expect(campaign.name).to.equal('a'.repeat(199));
    const portfolio = (await platform.getCampaign(account, '333'))!.bidding_strategy.portfolio!;
    expect(portfolio.name).to.equal('a'.repeat(199));
    const day = (back: number) => new Date(Date.now() - back * 86_400_000).toISOString().slice(0, 10);
    const keywords = await platform.listKeywords(account, { from: day(30), to: day(1) }, '222');
    expect(keywords.map((k) => k.ad_group_name)).to.deep.equal(['a'.repeat(199)]);
    expect([campaign.name, portfolio.name, ...keywords.map((k) => k.ad_group_name)].every(isCleanText)).to.equal(true);
    // Room for the whole character: it is kept.
    customer().campaigns.get('222')!.name = `${'a'.repeat(198)}\u{1F600} tail`;
    expect((await platform.getCampaign(account, '222'))!.name).to.equal(`${'a'.repeat(198)}\u{1F600}`);
  });
});
