import { expect } from 'chai';
import { FAKE_CLIENT_ID, FAKE_CLIENT_SECRET, FAKE_DEVELOPER_TOKEN, FakeGoogleAds } from '../../support/fake-google-ads/fake-google-ads-server.ts';

/** The fake itself: what it answers must be what Google answers, or the adapter tests prove nothing. */
describe('fake Google Ads REST API (test support)', () => {
  const fake = new FakeGoogleAds({ managerId: '1112223333' });
  let token = '';
  const post = async (path: string, body: unknown, headers: Record<string, string> = {}) => {
    const response = await fetch(`${fake.baseUrl}/v26/customers/1234567890/${path}`, {
      method: 'POST',
      headers: { authorization: `Bearer ${token}`, 'developer-token': FAKE_DEVELOPER_TOKEN, 'login-customer-id': '1112223333', 'content-type': 'application/json', ...headers },
      body: JSON.stringify(body),
    });
    return { status: response.status, body: (await response.json()) as any };
  };

  before(async () => {
    await fake.start();
    fake.seed();
    const refresh = fake.issueRefreshToken();
    const response = await fetch(fake.tokenUrl, {
      method: 'POST',
      body: new URLSearchParams({ grant_type: 'refresh_token', client_id: FAKE_CLIENT_ID, client_secret: FAKE_CLIENT_SECRET, refresh_token: refresh }),
    });
    token = ((await response.json()) as { access_token: string }).access_token;
  });
  after(() => fake.stop());

  it('answers GAQL with camelCase rows of the selected fields only, int64 as strings, enums as names', async () => {
    const { status, body } = await post('googleAds:search', { query: "SELECT campaign.id, campaign.status, campaign_budget.amount_micros FROM campaign WHERE campaign.id = 111" });
    expect(status).to.equal(200);
    expect(body.results).to.deep.equal([{ campaign: { id: '111', status: 'ENABLED' }, campaignBudget: { amountMicros: '50000000' } }]);
    expect(body.fieldMask).to.equal('campaign.id,campaign.status,campaignBudget.amountMicros');
  });

  it('refuses an unknown field as a GoogleAdsFailure', async () => {
    const unknown = await post('googleAds:search', { query: 'SELECT campaign.nope FROM campaign' });
    expect(unknown.status).to.equal(400);
    expect(unknown.body.error.status).to.equal('INVALID_ARGUMENT');
    expect(unknown.body.error.details[0]['@type']).to.equal('type.googleapis.com/google.ads.googleads.v26.errors.GoogleAdsFailure');
    expect(unknown.body.error.details[0].errors[0].errorCode).to.deep.equal({ queryError: 'UNRECOGNIZED_FIELD' });
  });

  it('holds change_event queries to Google’s rules: a LIMIT ≤ 10,000 and a bounded range starting within 30 days', async () => {
    const day = (offset: number) => new Date(Date.now() + offset * 86_400_000).toISOString().replace('T', ' ').slice(0, 19);
    const codeOf = async (where: string, limit = ' LIMIT 10') => {
      const answer = await post('googleAds:search', { query: `SELECT change_event.client_type FROM change_event WHERE ${where}${limit}` });
      return answer.status === 200 ? 'ok' : answer.body.error.details[0].errors[0].errorCode;
    };
    const bounded = `change_event.change_date_time >= '${day(-2)}' AND change_event.change_date_time <= '${day(1)}'`;
    expect(await codeOf(bounded)).to.equal('ok');
    expect(await codeOf(bounded, '')).to.deep.equal({ changeEventError: 'LIMIT_NOT_SPECIFIED' });
    expect(await codeOf(bounded, ' LIMIT 10001')).to.deep.equal({ changeEventError: 'INVALID_LIMIT_CLAUSE' });
    expect(await codeOf(`change_event.change_date_time >= '${day(-2)}'`)).to.deep.equal({ changeEventError: 'CHANGE_DATE_RANGE_INFINITE' });
    expect(await codeOf(`change_event.change_date_time >= '${day(-31)}' AND change_event.change_date_time <= '${day(0)}'`)).to.deep.equal({
      changeEventError: 'START_DATE_TOO_OLD',
    });
    expect(await codeOf(`change_event.change_date_time >= '${day(-1)}' AND change_event.change_date_time <= '${day(-2)}'`)).to.deep.equal({
      changeEventError: 'CHANGE_DATE_RANGE_NEGATIVE',
    });
  });

  it('wants the developer token and the manager’s login-customer-id', async () => {
    expect((await post('googleAds:search', { query: 'SELECT customer.id FROM customer' }, { 'developer-token': '' })).status).to.equal(401);
    const denied = await post('googleAds:search', { query: 'SELECT customer.id FROM customer' }, { 'login-customer-id': '9999999999' });
    expect(denied.status).to.equal(403);
    expect(denied.body.error.details[0].errors[0].errorCode).to.deep.equal({ authorizationError: 'USER_PERMISSION_DENIED' });
  });

  it('mutates atomically without partialFailure, per operation with it, and not at all with validateOnly', async () => {
    const ops = [
      { update: { resourceName: 'customers/1234567890/campaignBudgets/501', amountMicros: '60000000' }, updateMask: 'amountMicros' },
      { update: { resourceName: 'customers/1234567890/campaignBudgets/502', amountMicros: '60000001' }, updateMask: 'amountMicros' },
    ];
    const atomic = await post('campaignBudgets:mutate', { operations: ops });
    expect(atomic.status).to.equal(400);
    expect(atomic.body.error.details[0].errors[0]).to.deep.include({
      errorCode: { campaignBudgetError: 'NON_MULTIPLE_OF_MINIMUM_CURRENCY_UNIT' },
      location: { fieldPathElements: [{ fieldName: 'operations', index: 1 }] },
    });
    expect(fake.accounts.get('1234567890')!.budgets.get('501')!.amountMicros).to.equal(50_000_000);
    expect((await post('campaignBudgets:mutate', { operations: [ops[0]], validateOnly: true })).body).to.deep.equal({});
    expect(fake.accounts.get('1234567890')!.budgets.get('501')!.amountMicros).to.equal(50_000_000);
    const partial = await post('campaignBudgets:mutate', { operations: ops, partialFailure: true });
    expect(partial.status).to.equal(200);
    expect(partial.body.results).to.deep.equal([{ resourceName: 'customers/1234567890/campaignBudgets/501' }, {}]);
    expect(partial.body.partialFailureError.details[0].errors).to.have.length(1);
    expect(fake.accounts.get('1234567890')!.budgets.get('501')!.amountMicros).to.equal(60_000_000);
  });
  it('keeps a removed campaign criterion and answers it unless the query filters status, as Google does', async () => {
    const create = { create: { campaign: 'customers/1234567890/campaigns/222', negative: true, keyword: { text: 'used tents', matchType: 'EXACT' } } };
    const created = await post('campaignCriteria:mutate', { operations: [create] });
    const resourceName = created.body.results[0].resourceName as string;
    expect((await post('campaignCriteria:mutate', { operations: [{ remove: resourceName }] })).body.results).to.deep.equal([{ resourceName }]);
    const query = "SELECT campaign_criterion.keyword.text, campaign_criterion.status FROM campaign_criterion WHERE campaign.id = 222";
    expect((await post('googleAds:search', { query })).body.results).to.deep.equal([{ campaignCriterion: { keyword: { text: 'used tents' }, status: 'REMOVED' } }]);
    expect((await post('googleAds:search', { query: `${query} AND campaign_criterion.status != 'REMOVED'` })).body.results ?? []).to.deep.equal([]);
    // Created again: a new criterion beside the removed one, not RESOURCE_ALREADY_EXISTS.
    const again = await post('campaignCriteria:mutate', { operations: [create] });
    expect(again.status).to.equal(200);
    expect(again.body.results[0].resourceName).not.to.equal(resourceName);
    const duplicate = await post('campaignCriteria:mutate', { operations: [create] });
    expect(duplicate.body.error.details[0].errors[0].errorCode).to.deep.equal({ mutateError: 'RESOURCE_ALREADY_EXISTS' });
  });

  it('reports every error of one operation in partialFailureError, each at that operation’s index', async () => {
    const keyword = (text: string) => ({ create: { campaign: 'customers/1234567890/campaigns/222', negative: true, keyword: { text, matchType: 'PHRASE' } } });
    const answer = await post('campaignCriteria:mutate', { operations: [keyword('tent stakes'), keyword('a b c d e f g h i j k!')], partialFailure: true });
    expect(answer.status).to.equal(200);
    expect(answer.body.results[0].resourceName).to.match(/campaignCriteria\/222~/);
    expect(answer.body.results[1]).to.deep.equal({});
    expect(answer.body.partialFailureError.details[0].errors.map((e: any) => [e.errorCode, e.location.fieldPathElements[0].index])).to.deep.equal([
      [{ criterionError: 'KEYWORD_HAS_TOO_MANY_WORDS' }, 1],
      [{ criterionError: 'KEYWORD_HAS_INVALID_CHARS' }, 1],
    ]);
  });

  it('plays databaseError.CONCURRENT_MODIFICATION as 409 ABORTED (or 400), changing nothing', async () => {
    fake.failNext(/campaignBudgets:mutate$/, { kind: 'concurrent' });
    fake.failNext(/campaignBudgets:mutate$/, { kind: 'concurrent', status: 400 });
    const op = { update: { resourceName: 'customers/1234567890/campaignBudgets/506', amountMicros: '26000000' }, updateMask: 'amountMicros' };
    const aborted = await post('campaignBudgets:mutate', { operations: [op] });
    expect([aborted.status, aborted.body.error.status]).to.deep.equal([409, 'ABORTED']);
    expect(aborted.body.error.details[0].errors[0].errorCode).to.deep.equal({ databaseError: 'CONCURRENT_MODIFICATION' });
    expect((await post('campaignBudgets:mutate', { operations: [op] })).status).to.equal(400);
    expect(fake.accounts.get('1234567890')!.budgets.get('506')!.amountMicros).to.equal(25_000_000);
  });
});
