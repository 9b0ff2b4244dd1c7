import { expect } from 'chai';
import type { JsMsg } from '@nats-io/jetstream';
import { createLogger } from '../../src/log/logger.ts';
import { createAccount } from '../../src/operator/operator-commands.ts';
import type { AdsPlatform, Campaign, PlatformAccountRef, PlatformChange } from '../../src/platform/ads-platform.ts';
import { createPlatform } from '../../src/platform/create-platform.ts';
import { budgetBasisOf, type ActionDraft } from '../../src/policy/action-draft.ts';
import { ProposalService, type ActionRepresentation } from '../../src/policy/proposal-service.ts';
import { targetChangeDraft } from '../../src/policy/target-change-draft.ts';
import { utcDay } from '../../src/policy/policy-context.ts';
import { ApplyWorker } from '../../src/workers/apply-worker.ts';
import type { Infrastructure } from '../../src/runtime/infrastructure.ts';
import { streams } from '../../src/event-store/subjects.ts';
import type { StoredEvent } from '../../src/event-store/stored-event.ts';
import { ApprovalsAppliedChangeLookup } from '../../projections/approvals/applied-change-lookup.ts';
import { APPROVALS_PROJECTION } from '../../projections/approvals/approvals-projection.ts';
import { waitForProjection } from '../../projections/runtime/projector.ts';
import { approveAction } from '../../commands/action/approve-action.ts';
import { actionDecider } from '../../commands/action/action-decider.ts';
import { loadQuota } from '../../commands/queries.ts';
import { FakeGoogleAds } from '../support/fake-google-ads/fake-google-ads-server.ts';
import { connectFakeAccount, googleAdsEnv } from '../support/google-ads.ts';
import { startTestService, type TestService, type TestTenant } from '../support/test-service.ts';
import { api, cents, platformAccount } from './helpers.ts';
import { seededRandom } from '../support/seeded-random.ts';

/**
 * docs/policy.md over a whole simulated day (UTC day D0, its midnight, the first hours of D1 and
 * the 24-hour windows), on five accounts (three sandboxes for the random traffic and two for
 * deterministic edges, plus a Google Ads account on the local fake with a shared budget), with a
 * portfolio strategy, many concurrent auto-apply proposals and approvals, three apply workers, a
 * kill switch engaged and released mid-way, apply workers down over midnight, and one apply
 * worker crashing right after its platform call. Every invariant is checked against what the
 * platforms received (a recorder around the platform port; the fake's own request log).
 */

const SEED = Number(process.env.WHOLE_DAY_SEED ?? 0x5eed_d0);
const HOUR = 3_600_000;
const DAY = 24 * HOUR;
const PENDING = ['approved', 'auto_applied', 'applying'];

type Field = 'daily_budget' | 'target_cpa' | 'target_roas_pct';
interface Receipt {
  readonly accountId: string;
  readonly change: PlatformChange;
  readonly enteredAt: number;
  readonly by: string;
}
interface Proposed {
  readonly rep: ActionRepresentation;
  readonly accountId: string;
  readonly draft: ActionDraft;
  readonly simAt: number;
  readonly label: string;
}

const fieldOf = (kind: string): Field | null =>
  kind === 'set_campaign_budget' ? 'daily_budget' : kind === 'set_target_cpa' ? 'target_cpa' : kind === 'set_target_roas' ? 'target_roas_pct' : null;
const valueOfChange = (change: { kind: string } & Record<string, any>): number => change.daily_budget ?? change.target_cpa ?? change.target_roas_pct;
const bandOf = (field: Field) => (field === 'daily_budget' ? 0.2 : 0.1);

describe('safe-apply: a whole simulated day (seeded)', function () {
  this.timeout(180_000);
  const fake = new FakeGoogleAds();
  let svc: TestService;
  let infra: Infrastructure;
  let tenant: TestTenant;
  let router: AdsPlatform;
  const sim = { at: 0 };
  const receipts: Receipt[] = [];
  const workers: ApplyWorker[] = [];

  /** The platform port, recording every change that went through (after the platform took it). */
  const recording = (by: string, inner: AdsPlatform, hook?: (account: PlatformAccountRef, change: PlatformChange) => Promise<void>): AdsPlatform =>
    new Proxy(inner, {
      get(target, prop, receiver) {
        if (prop === 'applyChange') {
          return async (account: PlatformAccountRef, change: PlatformChange) => {
            const enteredAt = Date.now();
            const outcome = await target.applyChange(account, change);
            receipts.push({ accountId: account.accountId, change, enteredAt, by });
            if (hook) await hook(account, change);
            return outcome;
          };
        }
        const value = Reflect.get(target, prop, receiver);
        return typeof value === 'function' ? value.bind(target) : value;
      },
    });

  before(async () => {
    await fake.start();
    svc = await startTestService('sa-whole-day', { ROLES: 'http,projectors', ...googleAdsEnv(fake) });
    infra = svc.service.infrastructure;
    router = createPlatform(infra.database.db, svc.config);
  });
  after(async () => {
    await Promise.all(workers.splice(0).map((w) => w.stop()));
    await svc?.stop();
    await fake.stop();
  });

  it('keeps every invariant of docs/policy.md, checked against what the platforms received', async () => {
    console.log(`      whole-day simulation seed: ${SEED} (WHOLE_DAY_SEED to change it)`);
    const rnd = seededRandom(SEED);
    const pick = <T>(xs: readonly T[]): T => xs[Math.floor(rnd() * xs.length)]!;
    const db = infra.database.db;
    const midnight = Date.UTC(new Date().getUTCFullYear(), new Date().getUTCMonth(), new Date().getUTCDate());
    const D0 = midnight - DAY;
    const D0day = utcDay(new Date(D0));
    const D1day = utcDay(new Date(midnight));

    // --- accounts -------------------------------------------------------------------------
    tenant = await svc.tenant('whole-day');
    const ws = tenant.workspaceId;
    const [s3, s4] = await Promise.all([createAccount(infra, ws, 'edge 24h', 'sandbox'), createAccount(infra, ws, 'edge midnight', 'sandbox')]);
    const g = await connectFakeAccount(infra, fake, ws);
    const customer = fake.accounts.get('1234567890')!;
    customer.campaigns.get('666')!.budgetId = '501'; // 111 and 666 draw on shared budget 501
    const A = { S1: tenant.accounts.sandbox, S2: tenant.accounts.sandbox2, S3: s3.value.id, S4: s4.value.id, G: g.accountId };
    const refs = new Map<string, PlatformAccountRef>();
    for (const id of [A.S1, A.S2, A.S3, A.S4]) refs.set(id, await platformAccount(svc, ws, id));
    refs.set(A.G, g.ref);
    const live = async (accountId: string, campaignId: string) => (await router.getCampaign(refs.get(accountId)!, campaignId))!;
    const list = async (accountId: string) => (await router.listCampaigns(refs.get(accountId)!)).filter((c) => c.status === 'enabled');
    const ownCpa = (cs: Campaign[]) => cs.find((c) => c.bidding_strategy.type === 'maximize_conversions' && c.bidding_strategy.target_cpa !== null && !c.bidding_strategy.portfolio)!;
    const s1 = await list(A.S1);
    const C1 = ownCpa(s1);
    const portfolioPair = s1.filter((c) => c.bidding_strategy.portfolio !== null);
    expect(portfolioPair.length, 'S1 has two enabled campaigns on one portfolio').to.equal(2);
    const [pA, pB] = portfolioPair as [Campaign, Campaign];
    const E = ownCpa(await list(A.S3));
    const H = ownCpa(await list(A.S4));
    const initial = new Map<string, Campaign>();
    for (const accountId of Object.values(A)) for (const c of await router.listCampaigns(refs.get(accountId)!)) initial.set(`${accountId}/${c.id}`, c);
    const randomPool: { accountId: string; campaignId: string }[] = [
      ...s1.filter((c) => c.id !== C1.id && c.bidding_strategy.portfolio === null).map((c) => ({ accountId: A.S1, campaignId: c.id })),
      ...(await list(A.S2)).map((c) => ({ accountId: A.S2, campaignId: c.id })),
      { accountId: A.G, campaignId: '333' },
    ];

    // --- proposing, approving ---------------------------------------------------------------
    const proposals = new ProposalService(infra.commands, new ApprovalsAppliedChangeLookup(db), { clock: () => new Date(sim.at), platform: router });
    const all: Proposed[] = [];
    const used = new Set<string>();
    /** Values are unique per campaign field, so each platform receipt names its action. */
    const unique = (accountId: string, campaignId: string, field: string, value: number, step: number) => {
      let v = value;
      while (used.has(`${accountId}/${campaignId}/${field}/${v}`)) v = Math.round((v + step) * 100) / 100;
      used.add(`${accountId}/${campaignId}/${field}/${v}`);
      return v;
    };
    const propose = async (accountId: string, draft: ActionDraft, autoApply: boolean, label: string): Promise<Proposed> => {
      const simAt = sim.at;
      const rep = await proposals.propose({
        workspaceId: ws,
        accountId,
        runId: null,
        draft,
        summary: `${label} ${draft.kind}`,
        reason: 'whole-day simulation',
        autoApply,
        meta: { actor: { kind: 'api_key', id: tenant.keyIds.write }, correlationId: `whole-day-${label}` },
      });
      const proposed = { rep, accountId, draft, simAt, label };
      all.push(proposed);
      return proposed;
    };
    const budgetChange = async (accountId: string, campaignId: string, factor: number, autoApply: boolean, label: string, basis?: Campaign) => {
      const c = basis ?? (await live(accountId, campaignId));
      const next = unique(accountId, campaignId, 'daily_budget', cents(c.daily_budget * factor), 0.01);
      return propose(accountId, { kind: 'set_campaign_budget', params: { campaign_id: c.id, daily_budget: next }, based_on: budgetBasisOf(c) }, autoApply, label);
    };
    const targetChange = async (accountId: string, campaignId: string, factor: number, autoApply: boolean, label: string) => {
      const c = await live(accountId, campaignId);
      const s = c.bidding_strategy;
      const field = s.target_cpa !== null ? 'target_cpa' : 'target_roas_pct';
      const now = (s.target_cpa ?? s.target_roas_pct)!;
      const raw = field === 'target_cpa' ? cents(now * factor) : Math.round(now * factor * 10) / 10;
      const value = unique(accountId, campaignId, field, raw, field === 'target_cpa' ? 0.01 : 0.1);
      const change = targetChangeDraft(c, { field, value });
      if (!change.ok) throw new Error(`campaign ${campaignId} takes no ${field}`);
      return propose(accountId, change.draft, autoApply, label);
    };
    let negatives = 0;
    const negative = (accountId: string, campaignId: string, share: number, label: string) =>
      propose(
        accountId,
        {
          kind: 'add_negative_keywords',
          params: { campaign_id: campaignId, keywords: [{ text: `zqxwd ${SEED} ${++negatives}`, match_type: 'phrase' }] },
          based_on: { campaign_status: 'enabled', matched_cost_30d: share * 10_000, matched_conversions_30d: 0, account_cost_30d: 10_000, blocked_keywords: [] },
        },
        true,
        label,
      );
    const approve = (accountId: string, actionId: string) =>
      approveAction(infra.commands, { workspaceId: ws, accountId, actionId, note: 'approved in the simulation', meta: { actor: { kind: 'api_key', id: tenant.keyIds.admin }, correlationId: 'whole-day-approve', now: new Date(sim.at) } });
    const reject = (accountId: string, actionId: string) =>
      infra.commands.handle(actionDecider, { type: 'RejectAction', workspaceId: ws, accountId, actionId, reason: 'rejected in the simulation', meta: { actor: { kind: 'api_key', id: tenant.keyIds.admin }, correlationId: 'whole-day-reject', now: new Date(sim.at) } });
    const rows = async () => {
      await waitForProjection(db, APPROVALS_PROJECTION, await infra.store.lastSequence(), 10_000);
      return db.selectFrom('approvals').select(['id', 'account_id', 'kind', 'status', 'status_reason']).where('workspace_id', '=', ws).execute();
    };
    /** Until no action of the workspace waits for an apply worker. */
    const quiesce = async (timeoutMs = 40_000) => {
      const until = Date.now() + timeoutMs;
      for (;;) {
        const pending = (await rows()).filter((r) => PENDING.includes(r.status));
        if (pending.length === 0) return;
        if (Date.now() > until) throw new Error(`still pending: ${JSON.stringify(pending)}`);
        await new Promise((r) => setTimeout(r, 100));
      }
    };
    const startWorkers = async (n: number) => {
      for (let i = 0; i < n; i++) {
        const worker = new ApplyWorker({ infrastructure: infra, platform: recording(`live-${workers.length}`, router), logger: createLogger('silent'), retryBaseMs: 50, clock: () => new Date(sim.at) });
        await worker.start();
        workers.push(worker);
      }
    };
    const stopWorkers = async () => Promise.all(workers.splice(0).map((w) => w.stop()));

    // --- P0, D0 01:00: an apply worker crashes right after its platform call --------------------
    sim.at = D0 + 1 * HOUR;
    let crashed: { msg: JsMsg } | null = null;
    let current: JsMsg | null = null;
    let releaseHang: ((e: Error) => void) | null = null;
    const crashInfra: Infrastructure = {
      ...infra,
      commands: new Proxy(infra.commands, {
        get(target, prop, receiver) {
          const value = Reflect.get(target, prop, receiver);
          if (prop !== 'handle') return typeof value === 'function' ? value.bind(target) : value;
          return (...args: unknown[]) => (crashed ? Promise.reject(new Error('process is dead')) : (value as Function).apply(target, args));
        },
      }),
      js: new Proxy(infra.js, {
        get(target, prop, receiver) {
          const value = Reflect.get(target, prop, receiver);
          if (prop !== 'consumers') return typeof value === 'function' ? value.bind(target) : value;
          return {
            get: async (...args: unknown[]) => {
              const consumer = await (value as any).get(...args);
              return {
                next: async (opts: unknown) => {
                  if (crashed) return null;
                  const msg: JsMsg | null = await consumer.next(opts);
                  if (!msg) return null;
                  current = msg;
                  // A dead process acks, naks and heartbeats nothing.
                  return new Proxy(msg, {
                    get(m, p) {
                      const v = Reflect.get(m, p);
                      if (typeof v !== 'function') return v;
                      if (['ack', 'nak', 'working', 'term', 'ackAck'].includes(String(p))) return (...a: unknown[]) => (crashed ? undefined : v.apply(m, a));
                      return v.bind(m);
                    },
                  });
                },
              };
            },
          };
        },
      }),
    };
    const crashPlatform = recording('crashing', router, async () => {
      crashed = { msg: current! };
      await new Promise<void>((_, rejectHang) => (releaseHang = rejectHang));
    });
    const crashWorker = new ApplyWorker({ infrastructure: crashInfra, platform: crashPlatform, logger: createLogger('silent'), concurrency: 1, claimLeaseMs: 3000, clock: () => new Date(sim.at) });
    const X = await targetChange(A.S1, C1.id, 1.05, true, 'crash-X');
    expect(X.rep.disposition, X.rep.policy_reasons.join(' | ')).to.equal('auto_applied');
    await crashWorker.start();
    const crashDeadline = Date.now() + 15_000;
    while (!crashed && Date.now() < crashDeadline) await new Promise((r) => setTimeout(r, 20));
    expect(crashed, 'the crashing worker made its platform call').to.not.equal(null);
    // The server's ack wait runs out: the message goes to another worker (faster than 60 s).
    (crashed as unknown as { msg: JsMsg }).msg.nak();
    // While the dead claim's lease runs, a person approves a budget change of the same campaign.
    const Y = await budgetChange(A.S1, C1.id, 1.3, false, 'crash-Y');
    expect(Y.rep.disposition).to.equal('queued');
    await approve(A.S1, Y.rep.id);
    await startWorkers(3);
    await quiesce();

    // --- D0: random traffic, shared-setting edges, kill switch, spend cap -----------------------
    const randomStep = async (label: string, opts: { negativesOnS1: number; approvals: boolean }) => {
      const before = (await rows()).filter((r) => ['queued', 'returned'].includes(r.status) && fieldOf(r.kind) !== null);
      const jobs: Promise<unknown>[] = [];
      const chosen = new Set<string>();
      const picks = 3 + Math.floor(rnd() * 4);
      for (let i = 0; i < picks; i++) {
        const { accountId, campaignId } = pick(randomPool);
        const c = await live(accountId, campaignId);
        const hasTarget = (c.bidding_strategy.target_cpa ?? c.bidding_strategy.target_roas_pct) !== null && !(accountId === A.G && c.bidding_strategy.portfolio);
        const field = hasTarget && rnd() < 0.5 ? 'target' : 'budget';
        const key = `${campaignId}/${field}`;
        if (chosen.has(key)) continue;
        chosen.add(key);
        const n = 1 + Math.floor(rnd() * 3);
        for (let k = 0; k < n; k++) {
          const sign = rnd() < 0.7 ? 1 : -1;
          const size = rnd() < 0.8 ? 0.02 + rnd() * (field === 'budget' ? 0.16 : 0.07) : 0.25 + rnd() * 0.1;
          const auto = rnd() < 0.85;
          jobs.push(field === 'budget' ? budgetChange(accountId, campaignId, 1 + sign * size, auto, label, c) : targetChange(accountId, campaignId, 1 + sign * size, auto, label));
        }
      }
      for (let i = 0; i < opts.negativesOnS1; i++) jobs.push(negative(A.S1, C1.id, 0, label));
      if (opts.approvals) {
        for (const r of before) {
          if (!all.some((p) => p.rep.id === r.id && !p.label.startsWith('edge') && !p.label.startsWith('crash'))) continue;
          const roll = rnd();
          if (roll < 0.3) jobs.push(approve(r.account_id, r.id).catch(() => undefined));
          else if (roll < 0.45) jobs.push(reject(r.account_id, r.id).catch(() => undefined));
        }
      }
      await Promise.all(jobs);
    };

    for (const h of [2, 4]) {
      sim.at = D0 + h * HOUR;
      await randomStep(`D0-${h}h`, { negativesOnS1: 5, approvals: true });
      await quiesce();
    }
    // Edge: the 24-hour window. An auto-applied budget change of E that never goes live (its basis is stale: someone changed the budget directly).
    sim.at = D0 + 5.5 * HOUR;
    const eStale = await live(A.S3, E.id);
    await router.applyChange(refs.get(A.S3)!, { kind: 'set_campaign_budget', campaign_id: E.id, daily_budget: cents(eStale.daily_budget + 1) });
    const eBudget = await budgetChange(A.S3, E.id, 1.05, true, 'edge-E-budget', eStale);
    expect(eBudget.rep.disposition, eBudget.rep.policy_reasons.join(' | ')).to.equal('auto_applied');
    // Edge: learning period through a portfolio and a shared budget (approved changes).
    sim.at = D0 + 6 * HOUR;
    const pTarget = await targetChange(A.S1, pA.id, 1.15, false, 'edge-portfolio-target');
    const sharedBudget = await budgetChange(A.G, '111', 1.1, true, 'edge-shared-budget');
    expect(sharedBudget.rep.disposition, 'a shared budget is never auto-applied').to.equal('queued');
    await Promise.all([approve(A.S1, pTarget.rep.id), approve(A.G, sharedBudget.rep.id)]);
    await quiesce();
    await randomStep('D0-7h', { negativesOnS1: 5, approvals: true });
    await quiesce();
    sim.at = D0 + 8 * HOUR;
    const pBudget = await budgetChange(A.S1, pB.id, 1.05, true, 'edge-portfolio-budget');
    const onShared = await targetChange(A.G, '666', 1.05, true, 'edge-shared-target');
    await randomStep('D0-8h', { negativesOnS1: 5, approvals: true });
    await quiesce();
    for (const h of [10]) {
      sim.at = D0 + h * HOUR;
      await randomStep(`D0-${h}h`, { negativesOnS1: 5, approvals: true });
      await quiesce();
    }

    // Kill switch: engaged at 12:00 while a burst of auto-applied proposals arrives.
    sim.at = D0 + 12 * HOUR;
    const engage = api(svc, 'POST', '/api/v1/workspace/kill-switch/engage', { key: tenant.keys.admin, body: { reason: 'mid-day incident' } });
    await Promise.all([randomStep('D0-12h-engage', { negativesOnS1: 0, approvals: false }), engage.then((r) => expect(r.status, r.text).to.equal(200))]);
    const engagedAt = Date.now();
    sim.at = D0 + 13 * HOUR;
    const whileEngagedFrom = all.length;
    await randomStep('D0-13h-engaged', { negativesOnS1: 5, approvals: true });
    const whileEngaged = all.slice(whileEngagedFrom);
    await quiesce();
    sim.at = D0 + 14 * HOUR;
    const releasedAt = Date.now();
    const release = await api(svc, 'POST', '/api/v1/workspace/kill-switch/release', { key: tenant.keys.admin, body: {} });
    expect(release.status, release.text).to.equal(200);
    sim.at = D0 + 15 * HOUR;
    await randomStep('D0-15h', { negativesOnS1: 5, approvals: true });
    await quiesce();
    // Spend-share cap: 6 concurrent negatives of 3 % each on S2.
    sim.at = D0 + 16 * HOUR;
    const s2Cpa = ownCpa(await list(A.S2));
    const spend = await Promise.all(Array.from({ length: 6 }, () => negative(A.S2, s2Cpa.id, 0.03, 'edge-spend')));
    await quiesce();
    sim.at = D0 + 20 * HOUR;
    await randomStep('D0-20h', { negativesOnS1: 3, approvals: true });
    await quiesce();

    // --- midnight, with the apply workers down ---------------------------------------------------
    await stopWorkers();
    sim.at = midnight - 100;
    const fTarget = await targetChange(A.G, '222', 1.05, true, 'edge-F-target');
    sim.at = midnight + 100;
    const fBudget = await budgetChange(A.G, '222', 1.1, true, 'edge-F-budget');
    sim.at = midnight - 50;
    const hBase = await live(A.S4, H.id);
    const h1 = await targetChange(A.S4, H.id, 1.06, true, 'edge-H-1');
    sim.at = midnight + 50;
    const h2 = await targetChange(A.S4, H.id, 1.07, true, 'edge-H-2');
    await startWorkers(3);
    await quiesce();

    // --- D1: the 24-hour window of E, more traffic ---------------------------------------------------
    sim.at = D0 + 5.5 * HOUR + DAY - 1000;
    const eEarly = await targetChange(A.S3, E.id, 1.05, true, 'edge-E-target-early');
    sim.at = D0 + 5.5 * HOUR + DAY + 1000;
    const eLate = await targetChange(A.S3, E.id, 1.04, true, 'edge-E-target-late');
    for (const h of [1, 2]) {
      sim.at = midnight + h * HOUR;
      await randomStep(`D1-${h}h`, { negativesOnS1: 2, approvals: true });
      await quiesce();
    }
    await quiesce();

    // The crashed process is gone for good.
    const stopping = crashWorker.stop();
    releaseHang!(new Error('process is dead'));
    await stopping;

    // ======================= what happened ====================================================
    const events = new Map<string, StoredEvent[]>();
    const last = await infra.store.lastSequence();
    for (const p of all) {
      const subject = infra.subjects.forAggregate(streams.action(ws, p.accountId, p.rep.id));
      const evs: StoredEvent[] = [];
      for await (const e of infra.store.readSubject(subject, 0, last)) evs.push(e);
      events.set(p.rep.id, evs);
    }
    const typesOf = (id: string) => events.get(id)!.map((e) => e.event.type);
    const seqOf = (id: string, type: string) => events.get(id)!.find((e) => e.event.type === type)?.seq;
    const appliedIds = new Set(all.filter((p) => typesOf(p.rep.id).includes('ActionApplied')).map((p) => p.rep.id));
    const statusOf = new Map((await rows()).map((r) => [r.id, r]));
    const summary: Record<string, number> = {};
    for (const p of all) summary[`${p.rep.disposition}->${statusOf.get(p.rep.id)?.status}`] = (summary[`${p.rep.disposition}->${statusOf.get(p.rep.id)?.status}`] ?? 0) + 1;
    console.log(`      ${all.length} proposals, ${receipts.length} platform receipts; disposition->status ${JSON.stringify(summary)}`);

    // Receipts name their action (values are unique per campaign field, negatives by text).
    const actionOfReceipt = (r: Receipt): Proposed | undefined =>
      all.find((p) => {
        if (p.accountId !== r.accountId || p.draft.kind !== r.change.kind) return false;
        const params = p.draft.params as Record<string, any>;
        if (r.change.kind === 'add_negative_keywords') return params.keywords[0].text === r.change.keywords[0]!.text;
        return params.campaign_id === (r.change as any).campaign_id && valueOfChange(params as any) === valueOfChange(r.change as any);
      });
    const violations: string[] = [];
    const receiptsOf = new Map<string, Receipt[]>();
    for (const r of receipts) {
      const p = actionOfReceipt(r);
      if (!p) {
        if (r.by !== 'test') violations.push(`a platform change no action asked for: ${JSON.stringify(r)}`);
        continue;
      }
      receiptsOf.set(p.rep.id, [...(receiptsOf.get(p.rep.id) ?? []), r]);
    }

    // (1) Every approved or auto-applied action ends in exactly one terminal state; nothing is applied twice.
    for (const p of all) {
      const types = typesOf(p.rep.id);
      const decided = p.rep.disposition === 'auto_applied' || types.includes('ActionApproved');
      const status = statusOf.get(p.rep.id)!.status;
      if (decided && !['applied', 'returned', 'rejected'].includes(status)) violations.push(`${p.label} ${p.rep.id}: ended ${status}`);
      if (types.filter((t) => t === 'ActionApplied').length > 1) violations.push(`${p.label} ${p.rep.id}: ActionApplied twice`);
      const got = receiptsOf.get(p.rep.id) ?? [];
      const wentLive = got.length > 0;
      if (appliedIds.has(p.rep.id) !== wentLive) {
        violations.push(`${p.label} ${p.rep.id} (${p.draft.kind}): recorded ${status} (${types.join(',')}) but the platform received it ${got.length} time(s) [${got.map((r) => r.by).join(',')}]`);
      }
      const sends = got.length - (types.filter((t) => t === 'ActionApplyStarted').length > 1 ? 1 : 0);
      if (sends > 1) violations.push(`${p.label} ${p.rep.id}: sent to the platform ${got.length} times`);
    }
    // (2) The kill switch: no auto-applied change sent while it was engaged.
    for (const r of receipts) {
      const p = actionOfReceipt(r);
      if (p && p.rep.disposition === 'auto_applied' && !typesOf(p.rep.id).includes('ActionApproved') && r.enteredAt > engagedAt && r.enteredAt < releasedAt) {
        violations.push(`${p.label} ${p.rep.id}: auto-applied change sent while the kill switch was engaged`);
      }
    }
    const autoWhileEngaged = whileEngaged.filter((p) => p.rep.disposition === 'auto_applied');
    if (autoWhileEngaged.length > 0) violations.push(`${autoWhileEngaged.length} proposals auto_applied while the kill switch was engaged`);
    // (3) Account caps: at most 20 auto_applied per account per UTC day; the spend-share cap.
    for (const [name, accountId] of Object.entries(A)) {
      for (const day of [D0day, D1day]) {
        const autos = all.filter((p) => p.accountId === accountId && p.rep.disposition === 'auto_applied' && utcDay(new Date(p.simAt)) === day);
        const quota = (await loadQuota(infra.aggregates, ws, accountId, day)).state;
        if (autos.length > 20) violations.push(`${name} ${day}: ${autos.length} auto_applied (cap 20)`);
        if (quota.actionIds.length !== autos.length) violations.push(`${name} ${day}: quota holds ${quota.actionIds.length} slots, ${autos.length} auto_applied`);
        const share = autos.reduce((s, p) => s + (p.draft.kind === 'add_negative_keywords' ? p.draft.based_on.matched_cost_30d / p.draft.based_on.account_cost_30d : 0), 0);
        if (share > 0.1 + 1e-9) violations.push(`${name} ${day}: auto-applied negatives touch ${share} of spend`);
      }
    }
    // (4) Day band, one setting per campaign within 24 h, learning period (also through shared settings): on what went live.
    const banded = all.filter((p) => fieldOf(p.draft.kind) !== null);
    const campaignOf = (p: Proposed) => (p.draft.params as { campaign_id: string }).campaign_id;
    const ties = (p: Proposed) => {
      const b = p.draft.based_on as Record<string, any>;
      return { portfolio: p.draft.kind !== 'set_campaign_budget' ? (b.portfolio_id as string | null) : null, shared: p.draft.kind === 'set_campaign_budget' ? ((b.shared_budget?.id as string | undefined) ?? null) : null };
    };
    const portfolioMembers = new Map<string, string[]>();
    for (const accountId of Object.values(A)) {
      for (const c of await router.listCampaigns(refs.get(accountId)!)) if (c.bidding_strategy.portfolio) portfolioMembers.set(c.bidding_strategy.portfolio.id, [...c.bidding_strategy.portfolio.campaign_ids]);
    }
    const sharedMembers = new Map<string, string[]>([['501', ['111', '666']]]);
    /** The campaigns a change moves. */
    const moved = (p: Proposed) => {
      const t = ties(p);
      if (t.portfolio) return portfolioMembers.get(t.portfolio) ?? [campaignOf(p)];
      if (t.shared) return sharedMembers.get(t.shared) ?? [campaignOf(p)];
      return [campaignOf(p)];
    };
    const decisionSeq = (p: Proposed) => {
      const evs = events.get(p.rep.id)!;
      const approvals = evs.filter((e) => e.event.type === 'ActionApproved');
      return approvals.length > 0 ? approvals[approvals.length - 1]!.seq : evs[0]!.seq;
    };
    for (const x of banded.filter((p) => p.rep.disposition === 'auto_applied' && appliedIds.has(p.rep.id) && !typesOf(p.rep.id).includes('ActionApproved'))) {
      const field = fieldOf(x.draft.kind)!;
      const day = utcDay(new Date(x.simAt));
      const quota = (await loadQuota(infra.aggregates, ws, x.accountId, day)).state;
      const baseline = quota.bands[`${campaignOf(x)}/${field}`]?.baseline;
      const value = valueOfChange(x.draft.params as any);
      if (baseline === undefined || Math.abs(value - baseline) / baseline > bandOf(field) + 1e-9) violations.push(`${x.label} ${x.rep.id}: ${field} ${value} live, day baseline ${baseline}`);
      for (const y of banded) {
        if (y === x || y.accountId !== x.accountId || !appliedIds.has(y.rep.id)) continue;
        if (!moved(y).includes(campaignOf(x))) continue;
        const yField = fieldOf(y.draft.kind)!;
        const yAuto = y.rep.disposition === 'auto_applied' && !typesOf(y.rep.id).includes('ActionApproved');
        if (yAuto && campaignOf(y) === campaignOf(x) && yField !== field && Math.abs(y.simAt - x.simAt) < DAY) {
          violations.push(`${x.label} ${x.rep.id} and ${y.label} ${y.rep.id}: ${field} and ${yField} of campaign ${campaignOf(x)} both auto-applied and live, ${Math.abs(y.simAt - x.simAt)} ms apart`);
        }
        if (decisionSeq(y) < seqOf(x.rep.id, 'ActionProposed')!) {
          violations.push(`${x.label} ${x.rep.id} (auto ${x.draft.kind} on ${campaignOf(x)}) went live after ${y.label} ${y.rep.id} (${y.draft.kind} on ${campaignOf(y)}, decided before it) went live: learning period`);
        }
      }
    }
    // (5) The platform's final values are those of the last change recorded as applied.
    const finalChecks: [string, string][] = [[A.S1, C1.id], [A.S1, pA.id], [A.S1, pB.id], [A.S3, E.id], [A.S4, H.id], [A.G, '111'], [A.G, '666'], [A.G, '222'], ...randomPool.map((r) => [r.accountId, r.campaignId] as [string, string])];
    for (const [accountId, campaignId] of finalChecks) {
      const c = await live(accountId, campaignId);
      for (const field of ['daily_budget', 'target_cpa', 'target_roas_pct'] as Field[]) {
        const lastApplied = banded
          .filter((p) => p.accountId === accountId && fieldOf(p.draft.kind) === field && appliedIds.has(p.rep.id) && moved(p).includes(campaignId))
          .sort((a, b) => seqOf(a.rep.id, 'ActionApplied')! - seqOf(b.rep.id, 'ActionApplied')!)
          .at(-1);
        const read = (x: Campaign) => (field === 'daily_budget' ? x.daily_budget : field === 'target_cpa' ? x.bidding_strategy.target_cpa : x.bidding_strategy.target_roas_pct);
        const now = read(c);
        if (!lastApplied) {
          // Nothing recorded as applied: the value is the one it had (E's budget was changed outside the service).
          const was = read(initial.get(`${accountId}/${campaignId}`)!);
          if (!(accountId === A.S3 && field === 'daily_budget') && now !== was) violations.push(`campaign ${campaignId} ${field}: platform has ${now}, no change recorded as applied (was ${was})`);
          continue;
        }
        if (Math.abs((now ?? NaN) - valueOfChange(lastApplied.draft.params as any)) > 0.005) {
          violations.push(`campaign ${campaignId} ${field}: platform has ${now}, last applied action ${lastApplied.label} ${lastApplied.rep.id} set ${valueOfChange(lastApplied.draft.params as any)}`);
        }
      }
    }
    // Google Ads: the fake's own log agrees with the recorder.
    const gaWrites = fake.mutates().filter((r) => (r.body as { validateOnly?: boolean }).validateOnly !== true && r.status === 200);
    const gaReceipts = receipts.filter((r) => r.accountId === A.G);
    if (gaWrites.length !== gaReceipts.length) violations.push(`fake Google Ads took ${gaWrites.length} writes, the recorder saw ${gaReceipts.length}`);

    // ======================= exact outcomes of the deterministic edges ===============================
    const outcome = (p: Proposed) => `${p.rep.risk_tier}/${p.rep.disposition}/${statusOf.get(p.rep.id)!.status}`;
    const crashTypes = typesOf(X.rep.id);
    console.log(`      crash-X events: ${crashTypes.join(',')}; status ${statusOf.get(X.rep.id)!.status}: ${statusOf.get(X.rep.id)!.status_reason ?? ''}`);
    console.log(`      edges: E-budget ${outcome(eBudget)}, E-early ${outcome(eEarly)}, E-late ${outcome(eLate)}, F-target ${outcome(fTarget)}, F-budget ${outcome(fBudget)}, H1 ${outcome(h1)}, H2 ${outcome(h2)}, portfolio-budget ${outcome(pBudget)}, shared-target ${outcome(onShared)}`);
    const expectations: [string, string, string][] = [
      ['crash-Y (approved budget, same campaign)', outcome(Y), 'review/queued/applied'],
      ['E budget (stale basis: returned by the re-check)', outcome(eBudget), 'safe/auto_applied/returned'],
      ['E target 24 h - 1 s after the E budget decision', `${eEarly.rep.risk_tier}/${eEarly.rep.disposition}`, 'review/queued'],
      ['E target 24 h + 1 s after it', outcome(eLate), 'safe/auto_applied/applied'],
      ['F target at 23:59:59.900', outcome(fTarget), 'safe/auto_applied/applied'],
      ['F budget at 00:00:00.100', `${fBudget.rep.risk_tier}/${fBudget.rep.disposition}`, 'review/queued'],
      ['H target +6 % at 23:59:59.950 (workers down)', outcome(h1), 'safe/auto_applied/applied'],
      ['H target +7 % at 00:00:00.050 (workers down)', outcome(h2), 'safe/auto_applied/returned'],
      ['budget of pB after the approved portfolio target change', `${pBudget.rep.risk_tier}/${pBudget.rep.disposition}`, 'review/queued'],
      ['target of 666 after the approved change of shared budget 501', `${onShared.rep.risk_tier}/${onShared.rep.disposition}`, 'review/queued'],
      ['crash-X (its change went live before the crash)', statusOf.get(X.rep.id)!.status, 'applied'],
    ];
    for (const [what, got, want] of expectations) if (got !== want) violations.push(`${what}: ${got}, expected ${want}`);
    const spendAuto = spend.filter((p) => p.rep.disposition === 'auto_applied').length;
    if (spendAuto !== 3) violations.push(`spend-share cap: ${spendAuto} of 6 negatives of 3 % auto_applied, expected 3`);
    const s1D0 = all.filter((p) => p.accountId === A.S1 && p.rep.disposition === 'auto_applied' && utcDay(new Date(p.simAt)) === D0day).length;
    if (s1D0 !== 20) violations.push(`S1 on ${D0day}: ${s1D0} auto_applied, expected exactly 20 (cap)`);
    if (h1.rep.id && hBase.bidding_strategy.target_cpa === null) violations.push('H has no target');

    for (const v of violations) console.log(`      VIOLATION: ${v}`);
    expect(violations, `seed ${SEED}`).to.deep.equal([]);
  });
});
