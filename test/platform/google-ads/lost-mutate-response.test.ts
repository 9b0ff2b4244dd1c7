import { expect } from 'chai';
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { createLogger } from '../../../src/log/logger.ts';
import { createWorkspace, issueKey } from '../../../src/operator/operator-commands.ts';
import type { AdsPlatform, PlatformAccountRef } from '../../../src/platform/ads-platform.ts';
import { createPlatform } from '../../../src/platform/create-platform.ts';
import type { ActionDraft } from '../../../src/policy/action-draft.ts';
import { ProposalService } from '../../../src/policy/proposal-service.ts';
import { targetChangeDraft } from '../../../src/policy/target-change-draft.ts';
import { approveAction } from '../../../commands/action/approve-action.ts';
import { ApplyWorker } from '../../../src/workers/apply-worker.ts';
import { ApprovalsAppliedChangeLookup } from '../../../projections/approvals/applied-change-lookup.ts';
import { FakeGoogleAds } from '../../support/fake-google-ads/fake-google-ads-server.ts';
import { googleAdsFailure } from '../../support/fake-google-ads/fake-failure.ts';
import { connectFakeAccount, googleAdsEnv } from '../../support/google-ads.ts';
import { startTestService, type TestService } from '../../support/test-service.ts';
import { api, waitForStatus } from '../../safe-apply/helpers.ts';

/**
 * A mutate Google applied whose answer never reached the service: a 5xx after applying, a
 * dropped connection, a cut 200 body, an answer slower than the client's timeout. The worker
 * (or the transport) tries again; the account must carry the change exactly once and the
 * action's events must tell the truth about it. A small proxy in front of the fake Google Ads
 * server plays the lost answers and counts the mutates it forwarded.
 */

type Loss = 'http503' | 'http500' | 'drop' | 'cut200' | 'late';
interface Seen {
  readonly service: string;
  readonly loss: Loss | 'none';
  readonly operations: number;
}

class LossyProxy {
  private server: Server | undefined;
  readonly seen: Seen[] = [];
  /** One-shot losses of the next non-validateOnly mutates of a service. */
  private readonly losses: { service: string; loss: Loss }[] = [];
  /** Persistent: create operations on negatives with this text are refused per operation (Google's partialFailure). */
  refusedNegativeTexts = new Set<string>();
  private readonly upstream: () => string;
  private readonly lateMs: number;
  constructor(upstream: () => string, lateMs: number) {
    this.upstream = upstream;
    this.lateMs = lateMs;
  }

  get url(): string {
    return `http://127.0.0.1:${(this.server!.address() as AddressInfo).port}`;
  }
  lose(service: string, loss: Loss, times = 1): void {
    for (let i = 0; i < times; i++) this.losses.push({ service, loss });
  }
  mutates(service: string): Seen[] {
    return this.seen.filter((s) => s.service === service);
  }
  reset(): void {
    this.seen.length = 0;
    this.losses.length = 0;
    this.refusedNegativeTexts.clear();
  }
  async start(): Promise<void> {
    this.server = createServer((req, res) => void this.handle(req, res).catch(() => res.socket?.destroy()));
    await new Promise<void>((resolve) => this.server!.listen(0, '127.0.0.1', resolve));
  }
  async stop(): Promise<void> {
    this.server?.closeAllConnections();
    await new Promise<void>((resolve) => this.server!.close(() => resolve()));
  }

  private async handle(req: IncomingMessage, res: ServerResponse): Promise<void> {
    const chunks: Buffer[] = [];
    for await (const chunk of req) chunks.push(chunk as Buffer);
    const raw = Buffer.concat(chunks).toString('utf8');
    const path = req.url ?? '/';
    const headers: Record<string, string> = {};
    for (const [k, v] of Object.entries(req.headers)) if (typeof v === 'string' && !['host', 'content-length', 'connection'].includes(k)) headers[k] = v;
    const forward = async (body: string) => {
      const answer = await fetch(`${this.upstream()}${path}`, { method: req.method, headers, body: req.method === 'POST' ? body : undefined });
      return { status: answer.status, text: await answer.text() };
    };
    const mutate = /\/([A-Za-z]+):mutate$/.exec(path.split('?')[0]!);
    let parsed: any = null;
    try {
      parsed = mutate ? JSON.parse(raw) : null;
    } catch {
      /* forwarded as is */
    }
    if (!mutate || !parsed || parsed.validateOnly === true) {
      const answer = await forward(raw);
      res.writeHead(answer.status, { 'content-type': 'application/json; charset=UTF-8' });
      res.end(answer.text);
      return;
    }
    const service = mutate[1]!;
    const index = this.losses.findIndex((l) => l.service === service);
    const loss = index >= 0 ? this.losses.splice(index, 1)[0]!.loss : 'none';
    this.seen.push({ service, loss, operations: Array.isArray(parsed.operations) ? parsed.operations.length : 0 });

    // Google refusing one create of several (a limit reached, a policy finding): the others are applied.
    const operations: any[] = Array.isArray(parsed.operations) ? parsed.operations : [];
    const refusedAt = operations.flatMap((op, i) => (service === 'campaignCriteria' && this.refusedNegativeTexts.has(op?.create?.keyword?.text) ? [i] : []));
    let answer: { status: number; text: string };
    if (refusedAt.length > 0 && parsed.partialFailure === true) {
      const kept = operations.filter((_, i) => !refusedAt.includes(i));
      const upstream = kept.length > 0 ? await forward(JSON.stringify({ ...parsed, operations: kept })) : { status: 200, text: JSON.stringify({ results: [] }) };
      const upstreamBody = JSON.parse(upstream.text);
      const keptResults: any[] = upstreamBody.results ?? [];
      const upstreamErrors: any[] = upstreamBody.partialFailureError?.details?.[0]?.errors ?? [];
      const keptIndexes = operations.map((_, i) => i).filter((i) => !refusedAt.includes(i));
      const errors = [
        ...refusedAt.map((i) => ({
          errorCode: { resourceCountLimitExceededError: 'ACCOUNT_LIMIT' },
          message: 'The limit on the number of negative keywords was reached.',
          location: { fieldPathElements: [{ fieldName: 'operations', index: i }] },
        })),
        ...upstreamErrors.map((e) => ({ ...e, location: { fieldPathElements: [{ fieldName: 'operations', index: keptIndexes[e.location.fieldPathElements[0].index] }] } })),
      ];
      const results = operations.map((_, i) => (refusedAt.includes(i) ? {} : (keptResults[keptIndexes.indexOf(i)] ?? {})));
      answer = {
        status: 200,
        text: JSON.stringify({
          results,
          partialFailureError: { code: 3, message: `Multiple errors in 'details'. First error: ${errors[0]!.message}`, details: [googleAdsFailure('v26', errors)] },
        }),
      };
    } else {
      answer = await forward(raw);
    }
    // The mutate reached Google and was handled; only its answer is lost now.
    switch (loss) {
      case 'none':
        res.writeHead(answer.status, { 'content-type': 'application/json; charset=UTF-8' });
        res.end(answer.text);
        return;
      case 'http503':
        res.writeHead(503, { 'content-type': 'application/json; charset=UTF-8' });
        res.end(JSON.stringify({ error: { code: 503, message: 'The service is currently unavailable.', status: 'UNAVAILABLE' } }));
        return;
      case 'http500':
        res.writeHead(500, { 'content-type': 'application/json; charset=UTF-8' });
        res.end(
          JSON.stringify({
            error: {
              code: 500,
              message: 'Internal error encountered.',
              status: 'INTERNAL',
              details: [googleAdsFailure('v26', [{ errorCode: { internalError: 'INTERNAL_ERROR' }, message: 'An internal error has occurred.' }])],
            },
          }),
        );
        return;
      case 'drop':
        res.socket?.destroy();
        return;
      case 'cut200':
        res.writeHead(200, { 'content-type': 'application/json; charset=UTF-8' });
        res.write(answer.text.slice(0, Math.max(1, Math.floor(answer.text.length / 2))));
        setTimeout(() => res.socket?.destroy(), 20);
        return;
      case 'late':
        await new Promise((r) => setTimeout(r, this.lateMs));
        if (!res.socket?.destroyed) {
          res.writeHead(answer.status, { 'content-type': 'application/json; charset=UTF-8' });
          res.end(answer.text);
        }
        return;
    }
  }
}

/** Both keywords of the fake account's first ad group, enabled, to be paused in one mutate of two operations. */
const PAUSE_TWO_KEYWORDS = {
  kind: 'pause_keywords',
  params: { keyword_ids: ['1111-11111', '1111-11112'] },
  based_on: {
    keywords: [
      { id: '1111-11111', text: 'hiking boots', status: 'enabled', cost_30d: 0, conversions_30d: 0 },
      { id: '1111-11112', text: 'waterproof hiking boots', status: 'enabled', cost_30d: 0, conversions_30d: 0 },
    ],
    account_cost_30d: 100,
  },
} as const;

describe('Google Ads: a mutate applied whose answer is lost', function () {
  this.timeout(60_000);
  const REQUEST_TIMEOUT_MS = 600;
  const fake = new FakeGoogleAds();
  const proxy = new LossyProxy(() => fake.baseUrl, REQUEST_TIMEOUT_MS * 3);
  let svc: TestService;
  let platform: AdsPlatform;
  let proposals: ProposalService;
  let worker: ApplyWorker | undefined;
  let workspaceId: string;
  let readKey: string;
  let writeKeyId: string;
  let customerSeq = 0;

  before(async () => {
    await fake.start();
    await proxy.start();
    svc = await startTestService('lost-mutate', { ROLES: 'http,projectors', ...googleAdsEnv(fake), GOOGLE_ADS_API_BASE_URL: proxy.url });
    const infra = svc.service.infrastructure;
    workspaceId = (await createWorkspace(infra, 'lost answers')).value.id;
    readKey = (await issueKey(infra, workspaceId, 'read')).value.key;
    writeKeyId = (await issueKey(infra, workspaceId, 'write')).value.id;
    platform = createPlatform(infra.database.db, svc.config, { googleAds: { requestTimeoutMs: REQUEST_TIMEOUT_MS, maxWaitMs: 20_000 } });
    proposals = new ProposalService(infra.commands, new ApprovalsAppliedChangeLookup(infra.database.db), { platform });
  });
  beforeEach(() => proxy.reset());
  afterEach(async () => {
    await worker?.stop();
    worker = undefined;
  });
  after(async () => {
    await svc?.stop();
    await proxy.stop();
    await fake.stop();
  });

  /** A fresh customer and account per scenario: no learning period or day band from another one. */
  async function newAccount(): Promise<{ accountId: string; ref: PlatformAccountRef; customerId: string }> {
    const customerId = String(2_000_000_000 + ++customerSeq);
    fake.seed(customerId);
    const { accountId, ref } = await connectFakeAccount(svc.service.infrastructure, fake, workspaceId, { customerId, name: `lost ${customerSeq}` });
    return { accountId, ref, customerId };
  }

  async function proposeAndApprove(accountId: string, draft: ActionDraft, summary: string): Promise<string> {
    const action = await proposals.propose({
      workspaceId,
      accountId,
      runId: null,
      draft,
      summary,
      reason: 'lost-answer test',
      autoApply: false,
      meta: { actor: { kind: 'api_key', id: writeKeyId }, correlationId: 'lost-mutate' },
    });
    expect(action.disposition, JSON.stringify(action)).to.equal('queued');
    await approveAction(svc.service.infrastructure.commands, {
      workspaceId,
      accountId,
      actionId: action.id,
      note: 'go',
      meta: { actor: { kind: 'operator', id: 'approver' }, correlationId: 'lost-mutate' },
    });
    return action.id;
  }

  async function startWorker(): Promise<void> {
    worker = new ApplyWorker({ infrastructure: svc.service.infrastructure, platform, logger: createLogger('silent'), retryBaseMs: 100, ackWaitMs: 8000 });
    await worker.start();
  }

  async function historyOf(accountId: string, actionId: string): Promise<{ type: string; data: any }[]> {
    const page = await api(svc, 'GET', `/api/v1/accounts/${accountId}/history?limit=500`, { key: readKey });
    expect(page.status, page.text).to.equal(200);
    return (page.body.data as { type: string; aggregate: { id: string }; data: any }[]).filter((e) => e.aggregate.id === actionId);
  }

  // ---------------------------------------------------------------- budget (update, resent by the transport)
  for (const loss of ['http503', 'http500', 'drop', 'cut200', 'late'] as const) {
    it(`budget: ${loss} after Google applied it -> budget set once to the proposed value, one ActionApplied`, async () => {
      const { accountId, customerId } = await newAccount();
      const id = await proposeAndApprove(
        accountId,
        { kind: 'set_campaign_budget', params: { campaign_id: '111', daily_budget: 55 }, based_on: { campaign_status: 'enabled', daily_budget: 50 } },
        'Change the daily budget of "Hiking boots - Search" from 50 to 55',
      );
      proxy.lose('campaignBudgets', loss);
      await startWorker();
      const listed = await waitForStatus(svc, readKey, accountId, id, 'applied', 20_000);
      expect(listed.status_reason ?? null).to.equal(null);
      expect(proxy.mutates('campaignBudgets').map((s) => s.loss)).to.deep.equal([loss, 'none']);
      expect(fake.accounts.get(customerId)!.budgets.get('501')!.amountMicros).to.equal(55_000_000);
      const events = (await historyOf(accountId, id)).map((e) => e.type).filter((t) => t !== 'ActionApplyHeartbeat');
      expect(events).to.deep.equal(['ActionProposed', 'ActionApproved', 'ActionApplyStarted', 'ActionApplied']);
    });
  }

  it('budget: every send of 5 lost (transport gives up) -> next attempt finds it live, records ActionApplied without sending again', async () => {
    const { accountId, customerId } = await newAccount();
    const id = await proposeAndApprove(
      accountId,
      { kind: 'set_campaign_budget', params: { campaign_id: '111', daily_budget: 55 }, based_on: { campaign_status: 'enabled', daily_budget: 50 } },
      'Change the daily budget of "Hiking boots - Search" from 50 to 55',
    );
    proxy.lose('campaignBudgets', 'http503', 5);
    await startWorker();
    await waitForStatus(svc, readKey, accountId, id, 'applied', 30_000);
    expect(proxy.mutates('campaignBudgets').map((s) => s.loss)).to.deep.equal(['http503', 'http503', 'http503', 'http503', 'http503']);
    expect(fake.accounts.get(customerId)!.budgets.get('501')!.amountMicros).to.equal(55_000_000);
    const events = (await historyOf(accountId, id)).filter((e) => e.type !== 'ActionApplyHeartbeat');
    expect(events.map((e) => e.type)).to.deep.equal(['ActionProposed', 'ActionApproved', 'ActionApplyStarted', 'ActionApplyFailed', 'ActionApplyStarted', 'ActionApplied']);
    expect(events[3]!.data.will_retry).to.equal(true);
  });

  // ---------------------------------------------------------------- targets (update)
  it('target CPA: 503 after applying -> set once, applied', async () => {
    const { accountId, ref, customerId } = await newAccount();
    const change = targetChangeDraft((await platform.getCampaign(ref, '111'))!, { field: 'target_cpa', value: 26 });
    if (!change.ok) throw new Error('no target CPA');
    const id = await proposeAndApprove(accountId, change.draft, change.summary);
    proxy.lose('campaigns', 'http503');
    await startWorker();
    await waitForStatus(svc, readKey, accountId, id, 'applied', 20_000);
    expect(proxy.mutates('campaigns').map((s) => s.loss)).to.deep.equal(['http503', 'none']);
    expect(fake.accounts.get(customerId)!.campaigns.get('111')!.maximizeConversions!.targetCpaMicros).to.equal(26_000_000);
    expect((await historyOf(accountId, id)).map((e) => e.type)).to.deep.equal(['ActionProposed', 'ActionApproved', 'ActionApplyStarted', 'ActionApplied']);
  });

  it('target ROAS: connection dropped after applying -> set once, applied', async () => {
    const { accountId, ref, customerId } = await newAccount();
    const change = targetChangeDraft((await platform.getCampaign(ref, '222'))!, { field: 'target_roas_pct', value: 420 });
    if (!change.ok) throw new Error('no target ROAS');
    const id = await proposeAndApprove(accountId, change.draft, change.summary);
    proxy.lose('campaigns', 'drop');
    await startWorker();
    await waitForStatus(svc, readKey, accountId, id, 'applied', 20_000);
    expect(proxy.mutates('campaigns').map((s) => s.loss)).to.deep.equal(['drop', 'none']);
    expect(fake.accounts.get(customerId)!.campaigns.get('222')!.maximizeConversionValue!.targetRoas).to.equal(4.2);
  });

  // ---------------------------------------------------------------- pause keywords (update, several operations)
  it('pause keywords: late answer (past the client timeout) -> both paused, applied', async () => {
    const { accountId, customerId } = await newAccount();
    const id = await proposeAndApprove(accountId, PAUSE_TWO_KEYWORDS, 'Pause 2 keywords');
    proxy.lose('adGroupCriteria', 'late');
    await startWorker();
    await waitForStatus(svc, readKey, accountId, id, 'applied', 20_000);
    expect(proxy.mutates('adGroupCriteria').map((s) => s.loss)).to.deep.equal(['late', 'none']);
    const kw = fake.accounts.get(customerId)!.keywords;
    expect([kw.get('11111')!.status, kw.get('11112')!.status]).to.deep.equal(['PAUSED', 'PAUSED']);
  });

  // ---------------------------------------------------------------- negatives (create: never resent by the transport)
  const negativesDraft = (texts: string[]): ActionDraft => ({
    kind: 'add_negative_keywords',
    params: { campaign_id: '222', keywords: texts.map((text) => ({ text, match_type: 'exact' as const })) },
    based_on: { campaign_status: 'enabled', matched_cost_30d: 10, matched_conversions_30d: 0, converting_terms_30d: 0, account_cost_30d: 500, blocked_keywords: [] },
  });

  for (const loss of ['http503', 'http500', 'drop', 'cut200', 'late'] as const) {
    it(`negatives x2: ${loss} after Google created them -> each created once, no duplicate error, applied`, async () => {
      const { accountId, customerId } = await newAccount();
      const id = await proposeAndApprove(accountId, negativesDraft(['tent rental', 'diy tent plans']), 'Add 2 negatives');
      proxy.lose('campaignCriteria', loss);
      await startWorker();
      const listed = await waitForStatus(svc, readKey, accountId, id, 'applied', 20_000);
      expect(listed.status_reason ?? null).to.equal(null);
      expect(proxy.mutates('campaignCriteria').map((s) => s.loss)).to.deep.equal([loss]);
      const negatives = fake.accounts.get(customerId)!.negatives.filter((n) => n.status !== 'REMOVED');
      expect(negatives.map((n) => `${n.text}/${n.matchType}`).sort()).to.deep.equal(['diy tent plans/EXACT', 'tent rental/EXACT']);
      const events = (await historyOf(accountId, id)).filter((e) => e.type !== 'ActionApplyHeartbeat');
      expect(events.map((e) => e.type)).to.deep.equal(['ActionProposed', 'ActionApproved', 'ActionApplyStarted', 'ActionApplyFailed', 'ActionApplyStarted', 'ActionApplied']);
      expect(events[3]!.data.will_retry).to.equal(true);
    });
  }

  // ---------------------------------------------------------------- partial failure
  it('negatives x2, one refused by Google (partialFailure), answer delivered: applied in part (control)', async () => {
    const { accountId, customerId } = await newAccount();
    const id = await proposeAndApprove(accountId, negativesDraft(['tent rental', 'diy tent plans']), 'Add 2 negatives');
    proxy.refusedNegativeTexts.add('diy tent plans');
    await startWorker();
    const listed = await waitForStatus(svc, readKey, accountId, id, 'applied', 20_000);
    expect(listed.status_reason).to.include('applied negative "tent rental" (exact); refused negative "diy tent plans" (exact)');
    expect(proxy.mutates('campaignCriteria')).to.have.length(1);
    expect(fake.accounts.get(customerId)!.negatives.map((n) => n.text)).to.deep.equal(['tent rental']);
    const applied = (await historyOf(accountId, id)).find((e) => e.type === 'ActionApplied')!;
    expect(applied.data.partial_failures.map((f: any) => f.subject)).to.deep.equal(['negative "diy tent plans" (exact)']);
  });

  it('negatives x2, one refused by Google (partialFailure) AND the answer lost, then a person approves again: the live negative is recorded as applied', async () => {
    const { accountId, customerId } = await newAccount();
    const id = await proposeAndApprove(accountId, negativesDraft(['tent rental', 'diy tent plans']), 'Add 2 negatives');
    proxy.refusedNegativeTexts.add('diy tent plans');
    proxy.lose('campaignCriteria', 'http503');
    await startWorker();
    const settle = async (after: number) => {
      const deadline = Date.now() + 15_000;
      for (;;) {
        const events = await historyOf(accountId, id);
        const last = events.at(-1)?.type;
        if (events.length > after && (last === 'ActionApplied' || last === 'ActionReturnedToQueue')) return events;
        if (Date.now() > deadline) throw new Error(`not settled: ${JSON.stringify(events.map((e) => e.type))}`);
        await new Promise((r) => setTimeout(r, 100));
      }
    };
    const round1 = await settle(0);
    const status1 = (await api(svc, 'GET', `/api/v1/accounts/${accountId}/approvals?limit=200`, { key: readKey })).body.data.find((a: any) => a.id === id);
    // The human retry: a returned action is approved again.
    let round2 = round1;
    let status2 = status1;
    if (status1.status === 'returned') {
      await approveAction(svc.service.infrastructure.commands, { workspaceId, accountId, actionId: id, note: 'again', meta: { actor: { kind: 'operator', id: 'approver-2' }, correlationId: 'lost-mutate' } });
      round2 = await settle(round1.length + 1);
      status2 = (await api(svc, 'GET', `/api/v1/accounts/${accountId}/approvals?limit=200`, { key: readKey })).body.data.find((a: any) => a.id === id);
    }
    // The account: the one negative Google accepted is live, exactly once; nothing else.
    expect(fake.accounts.get(customerId)!.negatives.map((n) => n.text)).to.deep.equal(['tent rental']);
    expect(proxy.mutates('campaignCriteria')[0]).to.deep.equal({ service: 'campaignCriteria', loss: 'http503', operations: 2 });
    expect(proxy.mutates('campaignCriteria').slice(1).every((s) => s.loss === 'none' && s.operations === 1)).to.equal(true);
    const story = (events: { type: string }[]) => events.map((e) => e.type).filter((t) => t !== 'ActionApplyHeartbeat');
    // What the control (answer delivered) says: applied, in part. Lost answer or not, the account is the same.
    expect(
      { first: status1.status, afterHumanRetry: status2.status },
      `reason: ${status2.status_reason}; events: ${story(round2).join(', ')}`,
    ).to.deep.equal({ first: 'applied', afterHumanRetry: 'applied' });
  });

  it('pause keywords x2, one refused (partialFailure), every send of the first attempt lost: applied in part, the paused one once', async () => {
    const { accountId, customerId } = await newAccount();
    const id = await proposeAndApprove(accountId, PAUSE_TWO_KEYWORDS, 'Pause 2 keywords');
    fake.refusedResources.set(`customers/${customerId}/adGroupCriteria/1111~11112`, { errorCode: { adGroupCriterionError: 'CANNOT_MODIFY' }, message: 'The criterion cannot be modified.' });
    try {
      proxy.lose('adGroupCriteria', 'drop', 5);
      await startWorker();
      const listed = await waitForStatus(svc, readKey, accountId, id, 'applied', 20_000);
      expect(listed.status_reason).to.include('applied keyword 1111-11111; refused keyword 1111-11112');
      expect(proxy.mutates('adGroupCriteria').map((s) => s.loss)).to.deep.equal(['drop', 'drop', 'drop', 'drop', 'drop', 'none']);
      const kw = fake.accounts.get(customerId)!.keywords;
      expect([kw.get('11111')!.status, kw.get('11112')!.status]).to.deep.equal(['PAUSED', 'ENABLED']);
    } finally {
      fake.refusedResources.clear();
    }
  });
});
