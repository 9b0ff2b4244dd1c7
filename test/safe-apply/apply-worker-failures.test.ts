import { expect } from 'chai';
import { createLogger } from '../../src/log/logger.ts';
import type { AdsPlatform, PlatformAccountRef, PlatformChange } from '../../src/platform/ads-platform.ts';
import { createPlatform } from '../../src/platform/create-platform.ts';
import { ApplyClaimHeldError, ApplyClaimLostError } from '../../commands/action/action-lifecycle.ts';
import { ApplyWorker } from '../../src/workers/apply-worker.ts';
import { startTestService, type TestService, type TestTenant } from '../support/test-service.ts';
import { api, campaignById, campaignsByStrategy, cents, platformAccount, proposeTarget, waitForStatus } from './helpers.ts';
import { actionDecider } from '../../commands/action/action-decider.ts';
import { EventStoreUnavailableError } from '../../src/event-store/errors.ts';
import { GoogleAdsQuotaExhaustedError } from '../../src/platform/google-ads/google-ads-errors.ts';
import { CampaignNotFoundError } from '../../src/platform/platform-errors.ts';
import { newEvent } from '../../commands/shared/new-event.ts';
import { streams } from '../../src/event-store/subjects.ts';
import { ProposalService } from '../../src/policy/proposal-service.ts';
import { ApprovalsAppliedChangeLookup } from '../../projections/approvals/applied-change-lookup.ts';

/**
 * The real sandbox platform behind a decorator that makes applyChange fail a set number of
 * times (a platform outage) and counts the calls that reached the platform.
 */
class FlakyPlatform implements AdsPlatform {
  applied = 0;
  private readonly inner: AdsPlatform;
  private failuresLeft: number;

  constructor(
    inner: AdsPlatform,
    failuresLeft: number,
  ) {
    this.inner = inner;
    this.failuresLeft = failuresLeft;
  }
  accountSummary = (a: PlatformAccountRef) => this.inner.accountSummary(a);
  listCampaigns = (a: PlatformAccountRef) => this.inner.listCampaigns(a);
  getCampaign = (a: PlatformAccountRef, id: string) => this.inner.getCampaign(a, id);
  campaignPerformance: AdsPlatform['campaignPerformance'] = (...args) => this.inner.campaignPerformance(...args);
  listKeywords: AdsPlatform['listKeywords'] = (...args) => this.inner.listKeywords(...args);
  searchTerms: AdsPlatform['searchTerms'] = (...args) => this.inner.searchTerms(...args);
  searchTermTotals: AdsPlatform['searchTermTotals'] = (...args) => this.inner.searchTermTotals(...args);
  listNegativeKeywords: AdsPlatform['listNegativeKeywords'] = (...args) => this.inner.listNegativeKeywords(...args);
  async applyChange(account: PlatformAccountRef, change: PlatformChange): Promise<void> {
    if (this.failuresLeft > 0) {
      this.failuresLeft--;
      throw new Error('platform unavailable (503)');
    }
    this.applied++;
    await this.inner.applyChange(account, change);
  }
}

/** The sandbox behind a platform call that takes `delayMs` (a slow platform), counting the calls. */
class SlowPlatform extends FlakyPlatform {
  private readonly delayMs: number;

  constructor(
    inner: AdsPlatform,
    delayMs: number,
  ) {
    super(inner, 0);
    this.delayMs = delayMs;
  
  }
  override async applyChange(account: PlatformAccountRef, change: PlatformChange): Promise<void> {
    await new Promise((resolve) => setTimeout(resolve, this.delayMs));
    await super.applyChange(account, change);
  }
}

/** The sandbox behind campaign reads that the platform rate-limits `times` times (1 s each), counting the calls. */
class RateLimitedReadsPlatform extends FlakyPlatform {
  refusedReads = 0;
  private readsLeft: number;

  constructor(inner: AdsPlatform, times: number) {
    super(inner, 0);
    this.readsLeft = times;
    const read = this.getCampaign;
    this.getCampaign = (a: PlatformAccountRef, id: string) => {
      if (this.readsLeft > 0) {
        this.readsLeft--;
        this.refusedReads++;
        return Promise.reject(new GoogleAdsQuotaExhaustedError('Too many requests.', 1000));
      }
      return read(a, id);
    };
  }
}

/** The sandbox whose first campaign read takes `delayMs`; counts the reads under way at once. */
class SlowFirstReadPlatform extends FlakyPlatform {
  readsAtOnce = 0;
  mostReadsAtOnce = 0;

  constructor(inner: AdsPlatform, delayMs: number) {
    super(inner, 0);
    const read = this.getCampaign;
    let first = true;
    this.getCampaign = async (a: PlatformAccountRef, id: string) => {
      this.readsAtOnce++;
      this.mostReadsAtOnce = Math.max(this.mostReadsAtOnce, this.readsAtOnce);
      try {
        if (first) {
          first = false;
          await new Promise((resolve) => setTimeout(resolve, delayMs));
        }
        return await read(a, id);
      } finally {
        this.readsAtOnce--;
      }
    };
  }
}

/** The sandbox with one campaign removed: it is not found, and its negatives cannot be read (as the Google Ads adapter answers). */
class RemovedCampaignPlatform extends FlakyPlatform {
  constructor(inner: AdsPlatform, removedId: string) {
    super(inner, 0);
    const get = this.getCampaign;
    const negatives = this.listNegativeKeywords;
    this.getCampaign = (a: PlatformAccountRef, id: string) => (id === removedId ? Promise.resolve(null) : get(a, id));
    this.listNegativeKeywords = (...args) => (args[1] === removedId ? Promise.reject(new CampaignNotFoundError(removedId)) : negatives(...args));
  }
}

describe('apply worker: platform failures and competing workers', function () {
  this.timeout(90_000);
  let svc: TestService;
  let tenant: TestTenant;
  const workers: ApplyWorker[] = [];

  before(async () => {
    // No apply worker in the service: each test brings its own.
    svc = await startTestService('applyfailures', { ROLES: 'http,projectors' });
    tenant = await svc.tenant();
  });
  afterEach(async () => {
    await Promise.all(workers.splice(0).map((w) => w.stop()));
  });
  after(async () => svc?.stop());

  const startWorker = async (platform: AdsPlatform, claimLeaseMs?: number, maxDeliveries?: number, ackWaitMs?: number) => {
    const worker = new ApplyWorker({ infrastructure: svc.service.infrastructure, platform, logger: createLogger('silent'), retryBaseMs: 20, claimLeaseMs, maxDeliveries, ackWaitMs });
    await worker.start();
    workers.push(worker);
    return worker;
  };
  const historyOf = async (accountId: string, actionId: string) => {
    const page = await api(svc, 'GET', `/api/v1/accounts/${accountId}/history?limit=500`, { key: tenant.keys.read });
    return (page.body.data as { type: string; aggregate: { id: string }; data: any }[]).filter((e) => e.aggregate.id === actionId);
  };

  it('records each failed platform call, retries with backoff, and applies once the platform is back', async () => {
    const { cpa } = await campaignsByStrategy(svc, tenant.keys.read, tenant.accounts.sandbox);
    const target = cents(cpa.bidding_strategy.target_cpa! * 1.05);
    const action = await proposeTarget(svc, tenant.keys.write, tenant.accounts.sandbox, cpa.id, { target_cpa: target, auto_apply: true });
    expect(action.disposition).to.equal('auto_applied');
    const platform = new FlakyPlatform(createPlatform(svc.service.infrastructure.database.db), 2);
    await startWorker(platform);
    await waitForStatus(svc, tenant.keys.read, tenant.accounts.sandbox, action.id, 'applied');
    const events = await historyOf(tenant.accounts.sandbox, action.id);
    expect(events.map((e) => e.type)).to.deep.equal([
      'ActionProposed',
      'ActionApplyStarted',
      'ActionApplyFailed',
      'ActionApplyStarted',
      'ActionApplyFailed',
      'ActionApplyStarted',
      'ActionApplied',
    ]);
    expect(events.filter((e) => e.type === 'ActionApplyFailed').map((e) => [e.data.attempt, e.data.will_retry])).to.deep.equal([
      [1, true],
      [2, true],
    ]);
    expect(platform.applied).to.equal(1);
    expect((await campaignById(svc, tenant.keys.read, tenant.accounts.sandbox, cpa.id)).bidding_strategy.target_cpa).to.equal(target);
  });

  it('returns the action to the queue after 5 failed attempts, never losing it', async () => {
    // An enabled campaign (the ROAS one may be the account's paused campaign), with a change that needs approval.
    const { roas, portfolio } = await campaignsByStrategy(svc, tenant.keys.read, tenant.accounts.sandbox);
    const useRoas = roas.status === 'enabled';
    const campaign = useRoas ? roas : portfolio;
    const current = () => campaignById(svc, tenant.keys.read, tenant.accounts.sandbox, campaign.id).then((c) => (useRoas ? c.bidding_strategy.target_roas_pct : c.bidding_strategy.target_cpa));
    const before = await current();
    const body = useRoas ? { target_roas_pct: Math.round(before! * 1.3) } : { target_cpa: cents(before! * 1.3) };
    const action = await proposeTarget(svc, tenant.keys.write, tenant.accounts.sandbox, campaign.id, { ...body, reason: 'grow' });
    expect(action.disposition).to.equal('queued');
    const approved = await api(svc, 'POST', `/api/v1/accounts/${tenant.accounts.sandbox}/approvals/${action.id}/approve`, { key: tenant.keys.write });
    expect(approved.status).to.equal(200);
    await startWorker(new FlakyPlatform(createPlatform(svc.service.infrastructure.database.db), 1000));
    const returned = await waitForStatus(svc, tenant.keys.read, tenant.accounts.sandbox, action.id, 'returned', 30_000);
    expect(returned.status_reason).to.include('the platform kept failing');
    const failed = (await historyOf(tenant.accounts.sandbox, action.id)).filter((e) => e.type === 'ActionApplyFailed');
    expect(failed.map((e) => e.data.will_retry)).to.deep.equal([true, true, true, true, false]);
    expect(await current()).to.equal(before);
    // Back in the queue, it can be approved again.
    const again = await api(svc, 'POST', `/api/v1/accounts/${tenant.accounts.sandbox}/approvals/${action.id}/approve`, { key: tenant.keys.write });
    expect(again.status).to.equal(200);
  });

  it('a failure whose acknowledgement was lost (the event stored) is still retried, and the change goes live once', async () => {
    const { cpa } = await campaignsByStrategy(svc, tenant.keys.read, tenant.accounts.sandbox);
    const before = (await campaignById(svc, tenant.keys.read, tenant.accounts.sandbox, cpa.id)).bidding_strategy.target_cpa!;
    const target = cents(before * 1.3);
    const action = await proposeTarget(svc, tenant.keys.write, tenant.accounts.sandbox, cpa.id, { target_cpa: target, reason: 'lost ack' });
    expect((await api(svc, 'POST', `/api/v1/accounts/${tenant.accounts.sandbox}/approvals/${action.id}/approve`, { key: tenant.keys.write })).status).to.equal(200);
    // NATS stores the first ActionApplyFailed but its publish acknowledgement is lost (a leader change).
    const store = svc.service.infrastructure.store;
    const append = store.append.bind(store);
    let lost = 0;
    store.append = (async (subject, events, expected) => {
      const stored = await append(subject, events, expected);
      if (lost === 0 && events[0]?.type === 'ActionApplyFailed') {
        lost++;
        throw new EventStoreUnavailableError('publish timed out (the message was stored)');
      }
      return stored;
    }) as typeof store.append;
    try {
      const platform = new FlakyPlatform(createPlatform(svc.service.infrastructure.database.db), 1);
      await startWorker(platform);
      await waitForStatus(svc, tenant.keys.read, tenant.accounts.sandbox, action.id, 'applied', 20_000);
      expect(lost).to.equal(1);
      expect(platform.applied).to.equal(1);
      const events = await historyOf(tenant.accounts.sandbox, action.id);
      expect(events.map((e) => e.type)).to.deep.equal(['ActionProposed', 'ActionApproved', 'ActionApplyStarted', 'ActionApplyFailed', 'ActionApplyStarted', 'ActionApplied']);
      expect((await campaignById(svc, tenant.keys.read, tenant.accounts.sandbox, cpa.id)).bidding_strategy.target_cpa).to.equal(target);
    } finally {
      store.append = append;
    }
  });

  it('applies each action exactly once with three apply workers competing', async () => {
    const { cpa } = await campaignsByStrategy(svc, tenant.keys.read, tenant.accounts.sandbox2);
    const budgets = await api(svc, 'GET', `/api/v1/accounts/${tenant.accounts.sandbox2}/campaigns`, { key: tenant.keys.read });
    const enabled = (budgets.body.data as { id: string; status: string }[]).filter((c) => c.status === 'enabled');
    expect(enabled.length).to.be.greaterThan(0);
    const shared = new FlakyPlatform(createPlatform(svc.service.infrastructure.database.db), 0);
    // Queue 8 approved actions (alternate target proposals on one campaign: each based on the unchanged current target).
    const actions = [];
    for (let i = 0; i < 8; i++) {
      const action = await proposeTarget(svc, tenant.keys.write, tenant.accounts.sandbox2, cpa.id, { target_cpa: cents(cpa.bidding_strategy.target_cpa! * (1.02 + i / 1000)) });
      const approved = await api(svc, 'POST', `/api/v1/accounts/${tenant.accounts.sandbox2}/approvals/${action.id}/approve`, { key: tenant.keys.write });
      expect(approved.status).to.equal(200);
      actions.push(action);
    }
    await Promise.all([startWorker(shared), startWorker(shared), startWorker(shared)]);
    const finals = await Promise.all(
      actions.map(async (a) => {
        let status = '';
        for (const wanted of ['applied', 'returned']) {
          try {
            status = (await waitForStatus(svc, tenant.keys.read, tenant.accounts.sandbox2, a.id, wanted, 8_000)).status;
            break;
          } catch {
            /* try the other final status */
          }
        }
        return status;
      }),
    );
    // The first applied change moves the target: the others' re-check sees a changed value and returns them.
    expect(finals.filter((s) => s === 'applied').length).to.be.greaterThan(0);
    expect(finals.every((s) => s === 'applied' || s === 'returned')).to.equal(true);
    for (const action of actions) {
      const applied = (await historyOf(tenant.accounts.sandbox2, action.id)).filter((e) => e.type === 'ActionApplied');
      expect(applied.length).to.be.at.most(1);
    }
    expect(shared.applied).to.equal(finals.filter((s) => s === 'applied').length);
  });

  describe('claims (docs/policy.md, "Apply worker")', () => {
    // Each test on a tenant of its own: an applied target change puts a campaign in its learning period.
    let tenant: TestTenant;
    beforeEach(async () => {
      tenant = await svc.tenant('claims');
    });
    const onAction = (actionId: string) => ({
      workspaceId: tenant.workspaceId,
      accountId: tenant.accounts.sandbox,
      actionId,
      meta: { actor: { kind: 'worker' as const, id: 'test' }, correlationId: actionId },
    });
    const historyOf = async (accountId: string, actionId: string) => {
      const page = await api(svc, 'GET', `/api/v1/accounts/${accountId}/history?limit=500`, { key: tenant.keys.read });
      return (page.body.data as { type: string; aggregate: { id: string }; data: any }[]).filter((e) => e.aggregate.id === actionId);
    };
    const autoApplied = async (factor: number) => {
      const { cpa } = await campaignsByStrategy(svc, tenant.keys.read, tenant.accounts.sandbox);
      const target = cents(cpa.bidding_strategy.target_cpa! * factor);
      const action = await proposeTarget(svc, tenant.keys.write, tenant.accounts.sandbox, cpa.id, { target_cpa: target, auto_apply: true });
      expect(action.disposition, JSON.stringify(action)).to.equal('auto_applied');
      return { action, cpa, target };
    };

    it('an action in applying cannot be claimed again: of 10 concurrent claims exactly 1 wins', async () => {
      const { action } = await autoApplied(1.01);
      const { commands } = svc.service.infrastructure;
      const outcomes = await Promise.allSettled(
        Array.from({ length: 10 }, (_, i) => commands.handle(actionDecider, {
      type: 'StartApply',
      ...onAction(action.id), workerId: `racer-${i}`, claimId: `claim-${i}`, leaseMs: 30_000 })),
      );
      expect(outcomes.filter((o) => o.status === 'fulfilled')).to.have.length(1);
      const refusals = outcomes.filter((o): o is PromiseRejectedResult => o.status === 'rejected');
      expect(refusals).to.have.length(9);
      for (const refusal of refusals) expect(refusal.reason).to.be.instanceOf(ApplyClaimHeldError);
      const started = (await historyOf(tenant.accounts.sandbox, action.id)).filter((e) => e.type === 'ActionApplyStarted');
      expect(started).to.have.length(1);
    });

    it('crash: a worker died holding the claim; after its lease another worker applies it once, and the dead claim cannot finish', async () => {
      const { action, cpa, target } = await autoApplied(1.02);
      const { commands } = svc.service.infrastructure;
      // The "dead" worker: claimed with a 1.5 s lease, then never heartbeats nor finishes.
      await commands.handle(actionDecider, { type: 'StartApply', ...onAction(action.id), workerId: 'dead-worker', claimId: 'dead-claim', leaseMs: 1500 });
      const platform = new FlakyPlatform(createPlatform(svc.service.infrastructure.database.db), 0);
      const startedAt = Date.now();
      await startWorker(platform, 1500);
      await waitForStatus(svc, tenant.keys.read, tenant.accounts.sandbox, action.id, 'applied', 20_000);
      expect(Date.now() - startedAt, 'the live claim was respected until its lease ran out').to.be.at.least(1000);
      const events = await historyOf(tenant.accounts.sandbox, action.id);
      expect(events.map((e) => e.type)).to.deep.equal(['ActionProposed', 'ActionApplyStarted', 'ActionApplyStarted', 'ActionApplied']);
      expect(events[1]!.data).to.include({ worker_id: 'dead-worker', attempt: 1, claim_id: 'dead-claim' });
      expect(events[2]!.data.attempt).to.equal(2);
      expect(events[2]!.data.claim_id).to.not.equal('dead-claim');
      expect(platform.applied).to.equal(1);
      expect((await campaignById(svc, tenant.keys.read, tenant.accounts.sandbox, cpa.id)).bidding_strategy.target_cpa).to.equal(target);

      // The dead worker wakes up and tries to record its attempt: refused, nothing appended.
      let refused: unknown;
      try {
        await commands.handle(actionDecider, { type: 'FinishApply', ...onAction(action.id), workerId: 'dead-worker', claimId: 'dead-claim', result: { kind: 'failed', error: 'late', willRetry: true } });
      } catch (error) {
        refused = error;
      }
      expect(refused).to.be.instanceOf(ApplyClaimLostError);
      expect(await historyOf(tenant.accounts.sandbox, action.id)).to.have.length(4);
    });

    it('crash, then the kill switch: a change the dead worker made live is recorded applied (nothing sent again); one it never made is returned', async () => {
      const own = await svc.tenant('claims-killswitch');
      const account = own.accounts.sandbox;
      const { commands } = svc.service.infrastructure;
      const { cpa } = await campaignsByStrategy(svc, own.keys.read, account);
      const ref = await platformAccount(svc, own.workspaceId, account);
      const start = cpa.bidding_strategy.target_cpa!;
      const propose = async (factor: number) => {
        const action = await proposeTarget(svc, own.keys.write, account, cpa.id, { target_cpa: cents(start * factor), auto_apply: true });
        expect(action.disposition, JSON.stringify(action)).to.equal('auto_applied');
        return action;
      };
      const claimedByDeadWorker = (actionId: string) =>
        commands.handle(actionDecider, {
          type: 'StartApply', workspaceId: own.workspaceId, accountId: account, actionId, workerId: 'dead-worker', claimId: `dead-${actionId}`, leaseMs: 1000,
          meta: { actor: { kind: 'worker', id: 'dead-worker' }, correlationId: actionId },
        });
      // Two dead workers: the first made its change live before it died, the second never did.
      const wentLive = await propose(1.03);
      const neverLive = await propose(1.05);
      await claimedByDeadWorker(wentLive.id);
      await claimedByDeadWorker(neverLive.id);
      await createPlatform(svc.service.infrastructure.database.db).applyChange(ref, { kind: 'set_target_cpa', campaign_id: cpa.id, target_cpa: cents(start * 1.03) });
      expect((await api(svc, 'POST', '/api/v1/workspace/kill-switch/engage', { key: own.keys.admin, body: { reason: 'incident' } })).status).to.equal(200);
      try {
        const platform = new FlakyPlatform(createPlatform(svc.service.infrastructure.database.db), 0);
        await startWorker(platform, 1000);
        await waitForStatus(svc, own.keys.read, account, wentLive.id, 'applied', 20_000);
        const returned = await waitForStatus(svc, own.keys.read, account, neverLive.id, 'returned', 20_000);
        expect(returned.status_reason).to.include('kill switch is engaged');
        expect(platform.applied, 'nothing is sent while the kill switch is engaged').to.equal(0);
        expect((await campaignById(svc, own.keys.read, account, cpa.id)).bidding_strategy.target_cpa).to.equal(cents(start * 1.03));
        const history = async (id: string) =>
          ((await api(svc, 'GET', `/api/v1/accounts/${account}/history?limit=500`, { key: own.keys.read })).body.data as { type: string; aggregate: { id: string } }[])
            .filter((e) => e.aggregate.id === id)
            .map((e) => e.type);
        expect(await history(wentLive.id)).to.deep.equal(['ActionProposed', 'ActionApplyStarted', 'ActionApplyStarted', 'ActionApplied']);
        expect(await history(neverLive.id)).to.deep.equal(['ActionProposed', 'ActionApplyStarted', 'ActionReturnedToQueue']);
      } finally {
        await api(svc, 'POST', '/api/v1/workspace/kill-switch/release', { key: own.keys.admin });
      }
    });

    it('crash, then the kill switch while the platform rate-limits the look: the look comes back later, and the live change is recorded applied, never parked', async () => {
      const own = await svc.tenant('claims-killswitch-limited');
      const account = own.accounts.sandbox;
      const { commands } = svc.service.infrastructure;
      const { cpa } = await campaignsByStrategy(svc, own.keys.read, account);
      const ref = await platformAccount(svc, own.workspaceId, account);
      const target = cents(cpa.bidding_strategy.target_cpa! * 1.04);
      const action = await proposeTarget(svc, own.keys.write, account, cpa.id, { target_cpa: target, auto_apply: true });
      expect(action.disposition, JSON.stringify(action)).to.equal('auto_applied');
      await commands.handle(actionDecider, {
        type: 'StartApply', workspaceId: own.workspaceId, accountId: account, actionId: action.id, workerId: 'dead-worker', claimId: `dead-${action.id}`, leaseMs: 1000,
        meta: { actor: { kind: 'worker', id: 'dead-worker' }, correlationId: action.id },
      });
      await createPlatform(svc.service.infrastructure.database.db).applyChange(ref, { kind: 'set_target_cpa', campaign_id: cpa.id, target_cpa: target });
      expect((await api(svc, 'POST', '/api/v1/workspace/kill-switch/engage', { key: own.keys.admin, body: { reason: 'incident' } })).status).to.equal(200);
      try {
        // Three refused looks against two deliveries: a look whose failure the pull loop counted would park the message.
        const platform = new RateLimitedReadsPlatform(createPlatform(svc.service.infrastructure.database.db), 3);
        await startWorker(platform, 1000, 2);
        await waitForStatus(svc, own.keys.read, account, action.id, 'applied', 30_000);
        expect(platform.refusedReads).to.equal(3);
        expect(platform.applied, 'nothing is sent while the kill switch is engaged').to.equal(0);
      } finally {
        await api(svc, 'POST', '/api/v1/workspace/kill-switch/release', { key: own.keys.admin });
      }
    });

    it('crash, then the campaign removed: the takeover returns the negative keywords with the reason, never parks them in applying', async () => {
      const own = await svc.tenant('claims-removed-campaign');
      const account = own.accounts.sandbox;
      const infra = svc.service.infrastructure;
      const { cpa } = await campaignsByStrategy(svc, own.keys.read, account);
      const proposals = new ProposalService(infra.commands, new ApprovalsAppliedChangeLookup(infra.database.db));
      const action = await proposals.propose({
        workspaceId: own.workspaceId,
        accountId: account,
        runId: null,
        draft: {
          kind: 'add_negative_keywords',
          params: { campaign_id: cpa.id, keywords: [{ text: 'zzqx removed', match_type: 'phrase' }] },
          based_on: { campaign_status: 'enabled', matched_cost_30d: 1, matched_conversions_30d: 0, account_cost_30d: 10_000, blocked_keywords: [] },
        },
        summary: 'test negatives',
        reason: 'test',
        autoApply: true,
        meta: { actor: { kind: 'api_key', id: own.keyIds.write }, correlationId: 'removed-campaign' },
      });
      expect(action.disposition, JSON.stringify(action)).to.equal('auto_applied');
      await infra.commands.handle(actionDecider, {
        type: 'StartApply', workspaceId: own.workspaceId, accountId: account, actionId: action.id, workerId: 'dead-worker', claimId: `dead-${action.id}`, leaseMs: 1000,
        meta: { actor: { kind: 'worker', id: 'dead-worker' }, correlationId: action.id },
      });
      // The campaign is removed while the claim runs out: reading its negatives is refused, and it is gone from the list.
      const platform = new RemovedCampaignPlatform(createPlatform(infra.database.db), cpa.id);
      await startWorker(platform, 1000, 2);
      const returned = await waitForStatus(svc, own.keys.read, account, action.id, 'returned', 20_000);
      expect(returned.status_reason).to.include(`campaign ${cpa.id} no longer exists`);
      expect(platform.applied).to.equal(0);
    });

    it('crash between a final failure and its return: the next worker records the return, never another attempt', async () => {
      const { action } = await autoApplied(1.02);
      const infra = svc.service.infrastructure;
      const onAction = { workspaceId: tenant.workspaceId, accountId: tenant.accounts.sandbox, actionId: action.id };
      await infra.commands.handle(actionDecider, {
        type: 'StartApply', ...onAction, workerId: 'dead-worker', claimId: `dead-${action.id}`, leaseMs: 1000,
        meta: { actor: { kind: 'worker', id: 'dead-worker' }, correlationId: action.id },
      });
      // Google refused the change for good; the worker stored the failure and died before the return.
      const subject = infra.subjects.forAggregate(streams.action(tenant.workspaceId, tenant.accounts.sandbox, action.id));
      const failed = newEvent('ActionApplyFailed', { worker_id: 'dead-worker', attempt: 1, error: 'Google Ads: refused (x.Y)', will_retry: false }, streams.action(tenant.workspaceId, tenant.accounts.sandbox, action.id), {
        actor: { kind: 'worker', id: 'dead-worker' },
        correlationId: action.id,
      });
      await infra.store.append(subject, [failed], await infra.store.positionOf(subject));
      const platform = new FlakyPlatform(createPlatform(infra.database.db), 0);
      await startWorker(platform, 1000);
      const returned = await waitForStatus(svc, tenant.keys.read, tenant.accounts.sandbox, action.id, 'returned', 20_000);
      expect(returned.status_reason).to.equal('the last attempt failed for good: Google Ads: refused (x.Y)');
      expect(platform.applied, 'the refused change is not tried again').to.equal(0);
      expect((await historyOf(tenant.accounts.sandbox, action.id)).map((e) => e.type)).to.deep.equal(['ActionProposed', 'ActionApplyStarted', 'ActionApplyFailed', 'ActionReturnedToQueue']);
    });

    it('a look before the claim slower than the ack wait keeps its message: a second worker never reads it meanwhile', async () => {
      const { action, target, cpa } = await autoApplied(0.97);
      const platform = new SlowFirstReadPlatform(createPlatform(svc.service.infrastructure.database.db), 9_500);
      // The shortest ack wait APPLY_ACK_WAIT_MS allows; the consumer is shared, so both use it (and the tests after set it back).
      await Promise.all([startWorker(platform, undefined, undefined, 8000), startWorker(platform, undefined, undefined, 8000)]);
      await waitForStatus(svc, tenant.keys.read, tenant.accounts.sandbox, action.id, 'applied', 30_000);
      const events = await historyOf(tenant.accounts.sandbox, action.id);
      expect(platform.mostReadsAtOnce, 'campaign reads under way at once').to.equal(1);
      expect(events.filter((e) => e.type === 'ActionApplyStarted')).to.have.length(1);
      expect(platform.applied).to.equal(1);
      expect((await campaignById(svc, tenant.keys.read, tenant.accounts.sandbox, cpa.id)).bidding_strategy.target_cpa).to.equal(target);
    });

    it('heartbeats: a platform call 4x longer than the lease keeps its claim; a second worker never claims it', async () => {
      const { action, target, cpa } = await autoApplied(0.97);
      const platform = new SlowPlatform(createPlatform(svc.service.infrastructure.database.db), 3000);
      await Promise.all([startWorker(platform, 750), startWorker(platform, 750)]);
      await waitForStatus(svc, tenant.keys.read, tenant.accounts.sandbox, action.id, 'applied', 20_000);
      const events = await historyOf(tenant.accounts.sandbox, action.id);
      expect(events.filter((e) => e.type === 'ActionApplyStarted')).to.have.length(1);
      expect(events.filter((e) => e.type === 'ActionApplyHeartbeat').length).to.be.at.least(3);
      expect(events[events.length - 1]!.type).to.equal('ActionApplied');
      expect(platform.applied).to.equal(1);
      expect((await campaignById(svc, tenant.keys.read, tenant.accounts.sandbox, cpa.id)).bidding_strategy.target_cpa).to.equal(target);
    });
  });
});
