import { spawn, type ChildProcess } from 'node:child_process';
import { expect } from 'chai';
import { createWorkspace, issueKey } from '../../src/operator/operator-commands.ts';
import { negativeBlocks } from '../../src/platform/keyword-match.ts';
import { serviceEnv } from '../support/cli.ts';
import { eventually } from '../support/eventually.ts';
import { CONVERTING_TERMS, WASTED_TERMS } from '../support/fake-google-ads/fake-account.ts';
import { FAKE_CLIENT_SECRET, FAKE_DEVELOPER_TOKEN, FakeGoogleAds } from '../support/fake-google-ads/fake-google-ads-server.ts';
import { connectFakeAccount, googleAdsEnv } from '../support/google-ads.ts';
import { startTestService, type TestService } from '../support/test-service.ts';

/**
 * A Google Ads account end to end: the service runs as its own process (HTTP, agent worker
 * and apply worker, logging at trace level) against the local fake of the Google Ads REST
 * API and OAuth endpoint; this process only projects and drives it over HTTP.
 */
describe('a Google Ads account through the HTTP API (service process against the fake Google Ads API)', function () {
  this.timeout(120_000);
  const fake = new FakeGoogleAds({ managerId: '1112223333' });
  let svc: TestService;
  let child: ChildProcess;
  let baseUrl = '';
  let logs = '';
  const responses: string[] = [];
  let accountId: string;
  let refreshToken: string;
  let writeKey: string;
  let readKey: string;
  const customer = () => fake.accounts.get('1234567890')!;

  const request = async (method: string, path: string, key: string, body?: unknown) => {
    const response = await fetch(`${baseUrl}${path}`, {
      method,
      headers: { authorization: `Bearer ${key}`, ...(body !== undefined ? { 'content-type': 'application/json' } : {}) },
      body: body !== undefined ? JSON.stringify(body) : undefined,
    });
    const text = await response.text();
    responses.push(text);
    return { status: response.status, body: text ? JSON.parse(text) : null };
  };
  const runToEnd = async (brief: string) => {
    const started = await request('POST', '/api/v1/runs', writeKey, { brief, project_id: accountId, auto_apply: false });
    expect(started.status, JSON.stringify(started.body)).to.equal(202);
    let run: any;
    await eventually(async () => {
      run = (await request('GET', `/api/v1/runs/${started.body.id}`, writeKey)).body;
      if (!['succeeded', 'failed', 'canceled'].includes(run.status)) throw new Error(`run is ${run.status}`);
    }, 60_000, 100);
    return run;
  };
  const approvals = async () => (await request('GET', `/api/v1/accounts/${accountId}/approvals?limit=100`, readKey)).body.data as any[];
  /** Approves an action and waits until the approvals view shows it in `status`; returns it as shown. */
  const approveAndAwait = async (actionId: string, status: string, timeoutMs = 30_000): Promise<any> => {
    expect((await request('POST', `/api/v1/accounts/${accountId}/approvals/${actionId}/approve`, writeKey, {})).status).to.equal(200);
    let shown: any;
    await eventually(async () => {
      shown = (await approvals()).find((a) => a.id === actionId);
      expect(shown.status).to.equal(status);
    }, timeoutMs, 250);
    return shown;
  };
  const applied = (service: string) => fake.mutates(service as never).filter((r) => (r.body as { validateOnly?: boolean }).validateOnly !== true);

  before(async () => {
    await fake.start();
    fake.seed();
    const env = googleAdsEnv(fake);
    svc = await startTestService('gadsapi', { ROLES: 'projectors', ...env });
    const infra = svc.service.infrastructure;
    const workspaceId = (await createWorkspace(infra, 'Agency')).value.id;
    ({ accountId, refreshToken } = await connectFakeAccount(infra, fake, workspaceId, { loginCustomerId: '111-222-3333' }));
    writeKey = (await issueKey(infra, workspaceId, 'write')).value.key;
    readKey = (await issueKey(infra, workspaceId, 'read')).value.key;
    child = spawn(process.execPath, ['src/main.ts'], {
      env: { ...process.env, ...serviceEnv(svc.config), ...env, ROLES: 'http,agent-worker,apply-worker', PORT: '0', LOG_LEVEL: 'trace', GOOGLE_ADS_CHANGE_IMPORT_INTERVAL_MS: '300',
        // Two failed handlings park a message: a platform error thrown to the pull loop shows at once.
        WORKER_MAX_DELIVERIES: '2',
      },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    child.stdout!.on('data', (chunk) => (logs += chunk));
    child.stderr!.on('data', (chunk) => (logs += chunk));
    await eventually(() => {
      const url = /listening on (http:\/\/\S+)/.exec(logs)?.[1];
      if (!url) throw new Error(`service not up yet: ${logs.slice(-500)}`);
      baseUrl = url;
    }, 60_000, 100);
  });
  after(async () => {
    child?.kill('SIGTERM');
    await new Promise((resolve) => (child && child.exitCode === null ? child.once('exit', resolve) : resolve(null)));
    await svc?.stop();
    await fake.stop();
  });

  it('lists the account’s campaigns from Google Ads, removed ones left out', async () => {
    const campaigns = await request('GET', `/api/v1/accounts/${accountId}/campaigns`, readKey);
    expect(campaigns.status).to.equal(200);
    expect(campaigns.body.data.map((c: { id: string }) => c.id)).to.deep.equal(['111', '222', '333', '444', '666']);
    expect(campaigns.body.data[0]).to.deep.include({ id: '111', daily_budget: 50 });
  });

  it('a waste brief proposes negatives for the wasted search terms, none blocking a converting term, each dry-run first', async () => {
    const run = await runToEnd('Find wasted spend in my search terms and propose negative keywords');
    expect(run.status, JSON.stringify(run.error)).to.equal('succeeded');
    const proposed = (await approvals()).filter((a) => a.kind === 'add_negative_keywords');
    expect(proposed.length).to.be.within(1, 3);
    const blocked = new Set<string>();
    for (const action of proposed) {
      expect(action.status).to.equal('queued');
      for (const keyword of action.params.keywords as { text: string; match_type: 'exact' | 'phrase' }[]) {
        expect(CONVERTING_TERMS.filter((t) => negativeBlocks(keyword, t)), `"${keyword.text}" blocks a converting term`).to.deep.equal([]);
        for (const term of WASTED_TERMS) if (negativeBlocks(keyword, term)) blocked.add(term);
      }
    }
    expect(blocked.size).to.be.greaterThan(3);
    const dryRuns = fake.mutates('campaignCriteria').filter((r) => (r.body as { validateOnly?: boolean }).validateOnly === true);
    expect(dryRuns).to.have.length(proposed.length);
    expect(applied('campaignCriteria')).to.deep.equal([]);
  });

  it('an approved negative reaches Google Ads as a campaignCriterion create on the right campaign', async () => {
    const action = (await approvals()).find((a) => a.kind === 'add_negative_keywords' && a.params.campaign_id === '111')!;
    await approveAndAwait(action.id, 'applied');
    const [sent] = applied('campaignCriteria');
    const operations = (sent!.body as { operations: { create: Record<string, unknown> }[]; partialFailure: boolean }).operations;
    expect((sent!.body as { partialFailure: boolean }).partialFailure).to.equal(true);
    expect(operations.map((o) => o.create)).to.deep.equal(
      (action.params.keywords as { text: string; match_type: string }[]).map((k) => ({
        campaign: 'customers/1234567890/campaigns/111',
        negative: true,
        keyword: { text: k.text, matchType: k.match_type.toUpperCase() },
      })),
    );
    expect(customer().negatives.map((n) => n.campaignId)).to.satisfy((ids: string[]) => ids.length > 0 && ids.every((id) => id === '111'));
  });

  it('an approved target change reaches Google Ads as a campaign update in micros with its updateMask', async () => {
    const proposed = await request('POST', `/api/v1/accounts/${accountId}/campaigns/111/target`, writeKey, { target_cpa: 27.5, reason: 'CPA has room' });
    expect(proposed.status, JSON.stringify(proposed.body)).to.equal(200);
    expect(proposed.body.disposition).to.equal('queued');
    await approveAndAwait(proposed.body.id, 'applied');
    expect(applied('campaigns').map((r) => r.body)).to.deep.equal([
      {
        operations: [{ update: { resourceName: 'customers/1234567890/campaigns/111', maximizeConversions: { targetCpaMicros: '27500000' } }, updateMask: 'maximizeConversions.targetCpaMicros' }],
        partialFailure: true,
        validateOnly: false,
      },
    ]);
  });

  it('a target Google Ads refuses in validateOnly is blocked with its message and never reaches the approval queue', async () => {
    fake.maxTargetCpaMicros = 40_000_000;
    try {
      const proposed = await request('POST', `/api/v1/accounts/${accountId}/campaigns/666/target`, writeKey, { target_cpa: 45, reason: 'try' });
      expect(proposed.status).to.equal(200);
      expect(proposed.body).to.deep.include({ disposition: 'blocked', risk_tier: 'blocked' });
      expect(proposed.body.policy_reasons.join(' ')).to.include('Google Ads: Too high. (rangeError.TOO_HIGH)');
      const queued = (await request('GET', `/api/v1/accounts/${accountId}/approvals?status=queued&limit=100`, readKey)).body.data as { id: string }[];
      expect(queued.map((a) => a.id)).not.to.include(proposed.body.id);
      expect(applied('campaigns').filter((r) => JSON.stringify(r.body).includes('campaigns/666'))).to.deep.equal([]);
    } finally {
      fake.maxTargetCpaMicros = null;
    }
  });

  it('a target changed in Google Ads after the proposal sends the approved action back to the queue, naming the new value', async () => {
    const proposed = await request('POST', `/api/v1/accounts/${accountId}/campaigns/666/target`, writeKey, { target_cpa: 28, reason: 'tighten' });
    expect(proposed.body.disposition).to.equal('queued');
    // Someone raises the target in the Google Ads web UI meanwhile.
    customer().campaigns.get('666')!.targetCpa = { targetCpaMicros: 35_000_000 };
    fake.recordOutsideChange('1234567890', {
      changeResourceType: 'CAMPAIGN',
      changeResourceName: 'customers/1234567890/campaigns/666',
      clientType: 'GOOGLE_ADS_WEB_CLIENT',
      userEmail: 'marketer@example.com',
      resourceChangeOperation: 'UPDATE',
      changedFields: 'targetCpa.targetCpaMicros',
      oldResource: { campaign: { targetCpa: { targetCpaMicros: '30000000' } } },
      newResource: { campaign: { targetCpa: { targetCpaMicros: '35000000' } } },
      campaign: 'customers/1234567890/campaigns/666',
    });
    const action = await approveAndAwait(proposed.body.id, 'returned');
    expect(action.status_reason).to.include('now 35');
    expect(customer().campaigns.get('666')!.targetCpa!.targetCpaMicros).to.equal(35_000_000);
  });

  it('imports the changes Google Ads reports (change_event) into the account history, each once', async () => {
    const observed = async () =>
      ((await request('GET', `/api/v1/accounts/${accountId}/history?limit=500`, readKey)).body.data as { type: string; data: any }[]).filter((e) => e.type === 'PlatformChangeObserved');
    let changes: { type: string; data: any }[] = [];
    await eventually(async () => {
      changes = await observed();
      expect(changes.map((e) => e.data.client_type)).to.include('GOOGLE_ADS_WEB_CLIENT');
    }, 30_000);
    const outside = changes.find((e) => e.data.client_type === 'GOOGLE_ADS_WEB_CLIENT')!;
    expect(outside.data).to.deep.include({
      resource_type: 'CAMPAIGN',
      resource_name: 'customers/1234567890/campaigns/666',
      operation: 'UPDATE',
      user_email: 'marketer@example.com',
      campaign_id: '666',
      changes: [{ field: 'targetCpa.targetCpaMicros', old: '30000000', new: '35000000' }],
      more_changes: 0,
    });
    // The service's own approved change, as Google reports it, is there too.
    expect(changes.filter((e) => e.data.client_type === 'GOOGLE_ADS_API').map((e) => e.data.changes[0].field)).to.include('maximizeConversions.targetCpaMicros');
    const count = changes.length;
    await new Promise((resolve) => setTimeout(resolve, 1500));
    const again = await observed();
    expect(again).to.have.length(count);
    expect(new Set(again.map((e) => e.data.change_id)).size).to.equal(count);
  });

  it('waits out a 429 for its retryDelay and refreshes an expired access token', async () => {
    // Only the campaign listing: the change importer searches in the background too.
    fake.failNext(/googleAds:search$/, { kind: 'quota', retryDelay: '1s' }, 1, (body) => String(body.query).includes('FROM campaign WHERE'));
    const started = Date.now();
    expect((await request('GET', `/api/v1/accounts/${accountId}/campaigns`, readKey)).status).to.equal(200);
    expect(Date.now() - started).to.be.at.least(1000);

    fake.expireAccessTokens();
    const exchanges = fake.tokenExchanges;
    expect((await request('GET', `/api/v1/accounts/${accountId}/campaigns`, readKey)).status).to.equal(200);
    expect(fake.tokenExchanges - exchanges).to.equal(1);

    const metrics = await (await fetch(`${baseUrl}/metrics`)).text();
    for (const status of ['200', '401', '429']) {
      expect(metrics).to.match(new RegExp(`google_ads_request_duration_seconds_count\\{method="search",status="${status}"\\} [1-9]`));
    }
    expect(metrics).to.match(/google_ads_request_duration_seconds_count\{method="mutate:campaigns",status="200"\} [1-9]/);
  });

  it('a rate limit longer than the run has left fails the tool call at once with Google’s message, and the run goes on', async () => {
    // RUN_TIMEOUT_MS is 10 minutes: a 15-minute retryDelay cannot be waited out inside the run.
    fake.failNext(/googleAds:search$/, { kind: 'quota', retryDelay: '900s' }, 1, (body) => String(body.query).includes('FROM search_term_view'));
    const started = Date.now();
    const run = await runToEnd('Show me my search terms');
    expect(Date.now() - started).to.be.below(30_000);
    expect(run.status).to.equal('succeeded');
    const history = (await request('GET', `/api/v1/accounts/${accountId}/history?run_id=${run.id}&limit=500`, readKey)).body.data as { type: string; data: any }[];
    const failed = history.filter((e) => e.type === 'ToolCalled' && e.data.ok === false).map((e) => e.data.output.error);
    expect(failed).to.include('Google Ads: Too many requests. Retry in 900s. (retry after 900 s)');
  });

  it('a GoogleAdsFailure reaches the tool result and the problem details with Google’s message and error code', async () => {
    const refusal = { kind: 'refused', errorCode: { queryError: 'PROHIBITED_METRIC_IN_SELECT_OR_WHERE_CLAUSE' }, message: 'A metric is not allowed here.' } as const;
    fake.failNext(/googleAds:search$/, refusal, 1, (body) => String(body.query).includes('FROM campaign WHERE'));
    const read = await request('GET', `/api/v1/accounts/${accountId}/campaigns`, readKey);
    expect(read.status).to.equal(502);
    expect(read.body).to.deep.include({
      detail: 'Google Ads: A metric is not allowed here. (queryError.PROHIBITED_METRIC_IN_SELECT_OR_WHERE_CLAUSE)',
      platform_errors: [{ error_code: 'queryError.PROHIBITED_METRIC_IN_SELECT_OR_WHERE_CLAUSE', message: 'A metric is not allowed here.' }],
    });
    expect(read.body.type).to.match(/platform-request-refused$/);

    fake.failNext(/googleAds:search$/, refusal, 1, (body) => String(body.query).includes('FROM search_term_view'));
    const run = await runToEnd('Show me my search terms');
    const history = (await request('GET', `/api/v1/accounts/${accountId}/history?run_id=${run.id}&limit=500`, readKey)).body.data as { type: string; data: any }[];
    const failed = history.filter((e) => e.type === 'ToolCalled' && e.data.ok === false);
    expect(failed.map((e) => e.data.output.error)).to.include('Google Ads: A metric is not allowed here. (queryError.PROHIBITED_METRIC_IN_SELECT_OR_WHERE_CLAUSE)');
  });

  it('a change Google Ads refuses at apply time fails once, with Google’s message and code, and goes back to the queue', async () => {
    const proposed = await request('POST', `/api/v1/accounts/${accountId}/campaigns/666/target`, writeKey, { target_cpa: 33, reason: 'tighten' });
    expect(proposed.body.disposition, JSON.stringify(proposed.body)).to.equal('queued');
    const refusal = { kind: 'refused', errorCode: { biddingError: 'BIDDING_STRATEGY_NOT_SUPPORTED' }, message: 'The bidding strategy is not supported.' } as const;
    fake.failNext(/campaigns:mutate$/, refusal, 1, (body) => body.validateOnly !== true);
    const before = applied('campaigns').length;
    const action = await approveAndAwait(proposed.body.id, 'returned');
    expect(action.status_reason).to.equal('the platform refused the change: Google Ads: The bidding strategy is not supported. (biddingError.BIDDING_STRATEGY_NOT_SUPPORTED)');
    const history = (await request('GET', `/api/v1/accounts/${accountId}/history?limit=500`, readKey)).body.data as { type: string; aggregate_id?: string; data: any }[];
    const failures = history.filter((e) => e.type === 'ActionApplyFailed' && JSON.stringify(e).includes(proposed.body.id));
    expect(failures.map((e) => e.data.will_retry)).to.deep.equal([false]);
    expect(applied('campaigns')).to.have.length(before + 1);
  });

  it('a pause Google Ads applies in part shows as applied, naming the keyword it refused and Google’s reason', async () => {
    // Two keywords that spend and never convert, for the agent to propose pausing.
    const account = customer();
    for (const [criterionId, text, term] of [['11113', 'cheap boots', 'cheap boots online'], ['11114', 'boots outlet', 'boots outlet store']] as const) {
      account.keywords.set(criterionId, { criterionId, adGroupId: '1111', text, matchType: 'BROAD', status: 'ENABLED' });
      for (let back = 1; back <= 30; back++) {
        const date = new Date(Date.now() - back * 86_400_000).toISOString().slice(0, 10);
        account.searchTerms.push({ date, searchTerm: term, adGroupId: '1111', criterionId, impressions: 40, clicks: 4, costMicros: 6_000_000, conversions: 0, conversionsValue: 0 });
      }
    }
    const run = await runToEnd('Pause my poorly performing keywords');
    expect(run.status, JSON.stringify(run.error)).to.equal('succeeded');
    const action = (await approvals()).find((a) => a.kind === 'pause_keywords' && a.run_id === run.id);
    expect(action, JSON.stringify(await approvals())).to.not.equal(undefined);
    expect(action.status).to.equal('queued');
    expect([...action.params.keyword_ids].sort()).to.deep.equal(['1111-11113', '1111-11114']);
    fake.refusedResources.set('customers/1234567890/adGroupCriteria/1111~11114', {
      errorCode: { adGroupCriterionError: 'CANNOT_MODIFY_CRITERION' },
      message: 'The ad group criterion cannot be changed.',
    });
    try {
      const shown = await approveAndAwait(action.id, 'applied');
      expect(shown.status_reason).to.equal(
        'applied keyword 1111-11113; refused keyword 1111-11114: The ad group criterion cannot be changed. (adGroupCriterionError.CANNOT_MODIFY_CRITERION)',
      );
      expect(account.keywords.get('11113')!.status).to.equal('PAUSED');
      expect(account.keywords.get('11114')!.status).to.equal('ENABLED');
      const history = (await request('GET', `/api/v1/accounts/${accountId}/history?limit=500`, readKey)).body.data as { type: string; data: any }[];
      const appliedEvent = history.find((e) => e.type === 'ActionApplied' && JSON.stringify(e).includes(action.id))!;
      expect(appliedEvent.data.applied_operations).to.deep.equal([{ subject: 'keyword 1111-11113', resource_name: 'customers/1234567890/adGroupCriteria/1111~11113' }]);
      expect(appliedEvent.data.partial_failures).to.deep.equal([
        { subject: 'keyword 1111-11114', error_code: 'adGroupCriterionError.CANNOT_MODIFY_CRITERION', message: 'The ad group criterion cannot be changed.' },
      ]);
    } finally {
      fake.refusedResources.clear();
    }
  });

  it('Google Ads down during the apply-time re-check defers the approved action until it is back, never parking it', async () => {
    const proposed = await request('POST', `/api/v1/accounts/${accountId}/campaigns/222/target`, writeKey, { target_roas_pct: 420, reason: 'room' });
    expect(proposed.body.disposition, JSON.stringify(proposed.body)).to.equal('queued');
    // Two re-checks' worth of 503s (each call retries 4 times): without the deferral the message would be parked.
    fake.failNext(/googleAds:search$/, { kind: 'server', status: 503 }, 10, (body) => String(body.query).includes("FROM campaign WHERE campaign.status != 'REMOVED'"));
    const parkedBefore = (logs.match(/parked a poison message/g) ?? []).length;
    await approveAndAwait(proposed.body.id, 'applied', 60_000);
    expect(customer().campaigns.get('222')!.maximizeConversionValue!.targetRoas).to.equal(4.2);
    expect((logs.match(/the action comes back later/g) ?? []).length).to.equal(2);
    expect((logs.match(/parked a poison message/g) ?? []).length).to.equal(parkedBefore);
  });

  it('a re-check Google Ads refuses as a request returns the approved action to the queue with Google’s message, not tried again', async () => {
    const proposed = await request('POST', `/api/v1/accounts/${accountId}/campaigns/222/target`, writeKey, { target_roas_pct: 430, reason: 'room' });
    expect(proposed.body.disposition, JSON.stringify(proposed.body)).to.equal('queued');
    // One refusal: left to the pull loop, the message would come again, pass the re-check and apply.
    fake.failNext(/googleAds:search$/, { kind: 'refused', errorCode: { queryError: 'PROHIBITED_RESOURCE_TYPE_IN_SELECT_CLAUSE' }, message: 'The query was refused.' }, 1, (body) =>
      String(body.query).includes("FROM campaign WHERE campaign.status != 'REMOVED'"),
    );
    const action = await approveAndAwait(proposed.body.id, 'returned');
    expect(action.status_reason).to.equal(
      'the platform refused the apply-time re-check: Google Ads: The query was refused. (queryError.PROHIBITED_RESOURCE_TYPE_IN_SELECT_CLAUSE)',
    );
    expect(customer().campaigns.get('222')!.maximizeConversionValue!.targetRoas).to.not.equal(4.3);
  });

  it('a grant revoked before the apply-time re-check returns the approved action to the queue, saying to reconnect', async () => {
    const proposed = await request('POST', `/api/v1/accounts/${accountId}/campaigns/666/target`, writeKey, { target_cpa: 34, reason: 'tighten' });
    expect(proposed.body.disposition, JSON.stringify(proposed.body)).to.equal('queued');
    fake.revokeRefreshToken(refreshToken);
    fake.expireAccessTokens();
    const action = await approveAndAwait(proposed.body.id, 'returned');
    expect(action.status_reason).to.include('the account is not connected');
    expect(action.status_reason).to.include('reconnect');
  });

  it('a revoked grant fails the run with account_not_connected, and reads with 409 account-not-connected', async () => {
    fake.revokeRefreshToken(refreshToken);
    fake.expireAccessTokens();
    const run = await runToEnd('How did my campaigns do?');
    expect(run.status).to.equal('failed');
    expect(run.error.code).to.equal('account_not_connected');
    expect(run.error.message).to.include('reconnect');
    const read = await request('GET', `/api/v1/accounts/${accountId}/campaigns`, readKey);
    expect(read.status).to.equal(409);
    expect(read.body.type).to.match(/account-not-connected$/);
  });

  it('no secret (refresh token, access tokens, client secret, developer token) appears in any event, API response or log line', async () => {
    const { store } = svc.service.infrastructure;
    let events = '';
    for (let seq = 1; seq <= (await store.lastSequence()); seq++) {
      const raw = await store.rawAt(seq);
      if (raw) events += Buffer.from(raw.data).toString('utf8');
    }
    expect(events).to.include('1234567890');
    expect(logs.length).to.be.greaterThan(1000);
    // Several were issued: the first, one after the forced expiry, and more as the service ran.
    expect(fake.issuedAccessTokens.length).to.be.at.least(2);
    const secrets: [string, string][] = [
      ['refresh token', refreshToken],
      ['client secret', FAKE_CLIENT_SECRET],
      ['developer token', FAKE_DEVELOPER_TOKEN],
      ...fake.issuedAccessTokens.map((token, i): [string, string] => [`access token #${i + 1}`, token]),
    ];
    for (const [where, text] of [['events', events], ['responses', responses.join('\n')], ['logs', logs]] as const) {
      for (const [name, secret] of secrets) expect(text.includes(secret), `${name} in ${where}`).to.equal(false);
    }
  });
});
