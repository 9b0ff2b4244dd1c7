import { expect } from 'chai';
import type { AdsPlatform, PlatformAccountRef } from '../../src/platform/ads-platform.ts';
import { createPlatform } from '../../src/platform/create-platform.ts';
import { conversionCount } from '../../src/platform/sandbox/sandbox-metrics.ts';
import { classifyAction } from '../../src/policy/classify-action.ts';
import { negativeKeywordBasis } from '../../src/policy/negative-keyword-basis.ts';
import { changeAlreadyLive, recheckAction } from '../../src/workers/apply-recheck.ts';
import type { ActionState } from '../../commands/action/action-state.ts';
import { workspaceDecider } from '../../commands/workspace/workspace-decider.ts';
import { FakeGoogleAds } from '../support/fake-google-ads/fake-google-ads-server.ts';
import type { FakeAccount } from '../support/fake-google-ads/fake-account.ts';
import { connectFakeAccount, googleAdsEnv } from '../support/google-ads.ts';
import { startTestService, type TestService } from '../support/test-service.ts';

const CUSTOMER = '4445556666';
const HIKING_CAMPAIGN = '111';
const HIKING_AD_GROUP = '1111';
const HIKING_KEYWORD = '11111';

/**
 * What Google Ads reports that the safe-apply policy must not read as "safe": conversions
 * that cancel out across search terms, a fraction of a conversion, and a keyword status the
 * service does not know. Through the real adapter against the fake REST API.
 */
describe('safe-apply: converting terms and keyword statuses as Google Ads reports them', function () {
  this.timeout(60_000);
  const fake = new FakeGoogleAds();
  let svc: TestService;
  let platform: AdsPlatform;
  let account: PlatformAccountRef;
  let fakeAccount: FakeAccount;
  const range = () => {
    const day = (back: number) => new Date(Date.now() - back * 86_400_000).toISOString().slice(0, 10);
    return { from: day(30), to: day(1) };
  };
  const addTermDay = (searchTerm: string, conversions: number, daysBack = 1) =>
    fakeAccount.searchTerms.push({
      date: new Date(Date.now() - daysBack * 86_400_000).toISOString().slice(0, 10),
      searchTerm,
      adGroupId: HIKING_AD_GROUP,
      criterionId: HIKING_KEYWORD,
      impressions: 40,
      clicks: 2,
      costMicros: 3_000_000,
      conversions,
      conversionsValue: 0,
    });
  const negativesOn = async (text: string) => {
    const campaign = (await platform.getCampaign(account, HIKING_CAMPAIGN))!;
    const keywords = [{ text, match_type: 'phrase' as const }];
    const basis = await negativeKeywordBasis(platform, account, campaign, keywords, range());
    return { basis, classified: classifyAction({ kind: 'add_negative_keywords', params: { campaign_id: HIKING_CAMPAIGN, keywords }, based_on: basis }) };
  };

  before(async () => {
    await fake.start();
    svc = await startTestService('convreadings', { ROLES: 'projectors', ...googleAdsEnv(fake) });
    const infra = svc.service.infrastructure;
    await infra.commands.handle(workspaceDecider, { type: 'CreateWorkspace', workspaceId: 'ws-conv', name: 'conv', meta: { actor: { kind: 'operator', id: 't' }, correlationId: 'c' } });
    ({ ref: account } = await connectFakeAccount(infra, fake, 'ws-conv', { customerId: CUSTOMER }));
    fakeAccount = fake.accounts.get(CUSTOMER)!;
    platform = createPlatform(infra.database.db, svc.config);
  });
  after(async () => {
    await svc?.stop();
    await fake.stop();
  });

  it('a conversion on one matched term and a retraction on another are not "no conversions": review, both terms counted', async () => {
    addTermDay('qzv gaiters sale', 1);
    addTermDay('qzv gaiters cheap', -1);
    const { basis, classified } = await negativesOn('qzv gaiters');
    expect(basis.matched_conversions_30d).to.equal(0);
    expect(basis.converting_terms_30d).to.equal(2);
    expect(classified.risk_tier).to.equal('review');
    expect(classified.policy_reasons.join(' ')).to.include('2 matching search term(s) had conversions in 30 days (net 0)');
  });

  it('a fraction of a conversion (data-driven attribution) is not rounded to 0: the term converts', async () => {
    addTermDay('qzv insoles', 0.004);
    const terms = await platform.searchTermTotals(account, range(), HIKING_CAMPAIGN);
    expect(terms.find((t) => t.search_term === 'qzv insoles')?.conversions).to.equal(0.004);
    const { basis, classified } = await negativesOn('qzv insoles');
    expect(basis.matched_conversions_30d).to.equal(0.004);
    expect(basis.converting_terms_30d).to.equal(1);
    expect(classified.risk_tier).to.equal('review');
  });

  it('float residue of a sum is 0, not a fraction: conversions all retracted within the window leave the term not converting', async () => {
    expect(conversionCount(0.1 + 0.2 - 0.3)).to.equal(0);
    expect(conversionCount(0.7 + 0.1 - 0.8)).to.equal(0);
    expect(conversionCount(-0.004)).to.equal(-0.004);
    expect(conversionCount(2.344)).to.equal(2.34);
    addTermDay('qzv socks wool', 0.1, 1);
    addTermDay('qzv socks wool', 0.2, 2);
    addTermDay('qzv socks wool', -0.3, 3);
    const { basis, classified } = await negativesOn('qzv socks');
    expect(basis).to.deep.include({ matched_conversions_30d: 0, converting_terms_30d: 0 });
    expect(classified.risk_tier).to.equal('safe');
  });

  it('a term that converted in one ad group and had a retraction in another converts, though its sum is 0', async () => {
    fakeAccount.adGroups.set('1119', { id: '1119', campaignId: HIKING_CAMPAIGN, name: 'Boots, more' });
    addTermDay('qzv spikes', 1);
    fakeAccount.searchTerms.push({ ...fakeAccount.searchTerms.at(-1)!, adGroupId: '1119', conversions: -1 });
    const terms = await platform.searchTermTotals(account, range(), HIKING_CAMPAIGN);
    expect(terms.find((t) => t.search_term === 'qzv spikes')).to.deep.include({ conversions: 0, converting: true });
    const { basis, classified } = await negativesOn('qzv spikes');
    expect(basis).to.deep.include({ matched_conversions_30d: 0, converting_terms_30d: 1 });
    expect(classified.risk_tier).to.equal('review');
    expect(classified.policy_reasons.join(' ')).to.include('1 matching search term(s) had conversions in 30 days (net 0)');
  });

  it('a term without conversions stays safe to negate (the check is not simply always review)', async () => {
    addTermDay('qzv laces free', 0);
    const { basis, classified } = await negativesOn('qzv laces');
    expect(basis).to.deep.include({ matched_conversions_30d: 0, converting_terms_30d: 0, blocked_keywords: [] });
    expect(classified.risk_tier).to.equal('safe');
  });

  it('a keyword whose status Google gives as UNKNOWN is `unknown`: never taken as paused, and counted among the keywords a negative blocks', async () => {
    const keyword = fakeAccount.keywords.get('11112')!; // "waterproof hiking boots", in campaign 111
    const statusBefore = keyword.status;
    try {
      keyword.status = 'UNKNOWN';
      const listed = (await platform.listKeywords(account, range(), HIKING_CAMPAIGN)).find((k) => k.id === `${HIKING_AD_GROUP}-11112`);
      expect(listed?.status).to.equal('unknown');

      // A takeover of a pause whose worker died: the keyword is not shown paused, so the pause is not recorded as live.
      const pause = { kind: 'pause_keywords', params: { keyword_ids: [`${HIKING_AD_GROUP}-11112`] } } as unknown as ActionState;
      expect(await changeAlreadyLive(platform, account, pause)).to.equal(false);

      const { basis, classified } = await negativesOn('waterproof');
      expect(basis.blocked_keywords).to.deep.equal(['waterproof hiking boots']);
      expect(classified.risk_tier).to.equal('review');

      // Paused for real: now the takeover sees the pause live, and the negative blocks nothing serving.
      keyword.status = 'PAUSED';
      expect(await changeAlreadyLive(platform, account, pause)).to.equal(true);
      expect((await negativesOn('waterproof')).basis.blocked_keywords).to.deep.equal([]);
    } finally {
      keyword.status = statusBefore;
    }
  });

  it('a campaign whose status Google gives as UNKNOWN is `unknown`, never `paused`, and an auto-applied change to it is returned at the re-check', async () => {
    const campaign = fakeAccount.campaigns.get(HIKING_CAMPAIGN)!;
    const statusBefore = campaign.status;
    const budget = { kind: 'set_campaign_budget', params: { campaign_id: HIKING_CAMPAIGN, daily_budget: 55 }, basedOn: { campaign_status: 'enabled', daily_budget: 50, shared_budget: null } } as unknown as ActionState;
    try {
      campaign.status = 'UNKNOWN';
      expect((await platform.getCampaign(account, HIKING_CAMPAIGN))?.status).to.equal('unknown');
      expect((await platform.listCampaigns(account)).find((c) => c.id === HIKING_CAMPAIGN)?.status).to.equal('unknown');
      const recheck = await recheckAction(platform, account, budget);
      expect(recheck).to.deep.equal({ ok: false, reason: `campaign ${HIKING_CAMPAIGN} is in a status this service does not know, not shown as active` });

      campaign.status = 'PAUSED';
      expect((await platform.getCampaign(account, HIKING_CAMPAIGN))?.status).to.equal('paused');
      expect(await recheckAction(platform, account, budget)).to.deep.equal({ ok: false, reason: `campaign ${HIKING_CAMPAIGN} is paused, not active` });

      campaign.status = 'ENABLED';
      expect((await recheckAction(platform, account, budget)).ok, 'the same change on the campaign enabled').to.equal(true);
    } finally {
      campaign.status = statusBefore;
    }
  });
});
