import { expect } from 'chai';
import type { AdsPlatform, Campaign, PlatformAccountRef, PlatformChange } from '../../src/platform/ads-platform.ts';
import type { ActionDraft } from '../../src/policy/action-draft.ts';
import type { ActionRepresentation } from '../../src/policy/proposal-service.ts';
import { eventually } from '../support/eventually.ts';
import { clockedProposals, type CampaignFixture } from './clocked-proposals.ts';
import { api, approvalsPath, cents, waitForStatus } from './helpers.ts';
import { loadAction, loadWorkspace } from '../../commands/queries.ts';
import { workspaceDecider } from '../../commands/workspace/workspace-decider.ts';

const HOUR_MS = 3_600_000;

/**
 * docs/api.md, "Kill switch", and docs/policy.md, "Learning period": what happens between a
 * proposal and the platform call. Real NATS and Postgres; the sandbox platform, wrapped where
 * a test needs something to happen at a precise moment of the worker's handling.
 */
describe('safe-apply: apply-time races (kill switch under the claim, one setting per campaign within 24 hours)', function () {
  this.timeout(60_000);
  const clock = clockedProposals('sa-races', 'apply-time-races');
  type Fixture = CampaignFixture;
  const fixture = (name: string) => clock.fixture(name);
  const propose = (f: Fixture, draft: ActionDraft, autoApply?: boolean) => clock.propose(f, draft, autoApply);
  const live = (f: Fixture) => clock.live(f);
  const targetDraft = (c: Campaign, next: number): ActionDraft => ({
    kind: 'set_target_cpa',
    params: { campaign_id: c.id, target_cpa: next },
    based_on: { campaign_status: c.status, strategy_type: c.bidding_strategy.type, portfolio_id: null, campaigns_affected: 1, target_cpa: c.bidding_strategy.target_cpa },
  });
  const budgetDraft = (c: Campaign, next: number): ActionDraft => ({
    kind: 'set_campaign_budget',
    params: { campaign_id: c.id, daily_budget: next },
    // The campaign's own budget (not shared): the one kind of budget an auto-applied change may touch.
    based_on: { campaign_status: c.status, daily_budget: c.daily_budget, shared_budget: null },
  });
  const reasons = (action: ActionRepresentation) => action.policy_reasons.join(' | ');
  const startWorker = (platform?: AdsPlatform) => clock.startApplyWorker(platform ? { platform } : {});
  /** The sandbox, with `hooks` run before the named calls go through. */
  const wrapped = (hooks: { getCampaign?: () => Promise<void>; applyChange?: (change: PlatformChange) => Promise<void> }): AdsPlatform =>
    new Proxy(clock.platform, {
      get(target, prop, receiver) {
        if (prop === 'getCampaign' && hooks.getCampaign) {
          return async (account: PlatformAccountRef, id: string) => {
            await hooks.getCampaign!();
            return target.getCampaign(account, id);
          };
        }
        if (prop === 'applyChange' && hooks.applyChange) {
          return async (account: PlatformAccountRef, change: PlatformChange) => {
            await hooks.applyChange!(change);
            return target.applyChange(account, change);
          };
        }
        const value = Reflect.get(target, prop, receiver);
        return typeof value === 'function' ? value.bind(target) : value;
      },
    });
  /** The moment an admin engages the kill switch: the worker's first look at the campaign (its re-check). */
  const engagingOnRecheck = (f: Fixture) => {
    let engaged = false;
    return wrapped({
      getCampaign: async () => {
        if (engaged) return;
        engaged = true;
        await clock.svc.service.infrastructure.commands.handle(workspaceDecider, {
          type: 'SetKillSwitch',
          workspaceId: f.tenant.workspaceId,
          engaged: true,
          reason: 'stop everything',
          meta: { actor: { kind: 'api_key', id: f.tenant.keyIds.admin }, correlationId: 'kill-switch' },
        });
      },
    });
  };

  it('kill switch engaged while the worker re-checks an auto-applied action: returned under its claim, nothing changes on the platform', async () => {
    const f = await fixture('races-kill-auto');
    const start = f.cpa.bidding_strategy.target_cpa!;
    const action = await propose(f, targetDraft(f.cpa, cents(start * 1.05)));
    expect(action.disposition, reasons(action)).to.equal('auto_applied');

    await startWorker(engagingOnRecheck(f));
    const returned = await waitForStatus(clock.svc, f.tenant.keys.read, f.tenant.accounts.sandbox, action.id, 'returned');
    expect((await loadWorkspace(clock.svc.service.infrastructure.aggregates, f.tenant.workspaceId)).state.killSwitch.engaged).to.equal(true);
    expect(returned.status_reason).to.equal('the workspace kill switch is engaged');
    // Handed back by the worker that claimed it (one attempt, its claim ended), not applied.
    const state = (await loadAction(clock.svc.service.infrastructure.aggregates, f.tenant.workspaceId, f.tenant.accounts.sandbox, action.id)).state;
    expect(state.attempts).to.equal(1);
    expect(state.claim).to.equal(null);
    expect((await live(f)).bidding_strategy.target_cpa).to.equal(start);
  });

  it('kill switch engaged while the worker re-checks an approved action: still applied (a person approved it)', async () => {
    const f = await fixture('races-kill-approved');
    const start = f.cpa.bidding_strategy.target_cpa!;
    const action = await propose(f, targetDraft(f.cpa, cents(start * 1.05)), false);
    expect(action.disposition).to.equal('queued');
    const approved = await api(clock.svc, 'POST', `${approvalsPath(f.tenant.accounts.sandbox)}/${action.id}/approve`, { key: f.tenant.keys.admin, body: {} });
    expect(approved.status, approved.text).to.equal(200);

    await startWorker(engagingOnRecheck(f));
    await waitForStatus(clock.svc, f.tenant.keys.read, f.tenant.accounts.sandbox, action.id, 'applied');
    expect((await loadWorkspace(clock.svc.service.infrastructure.aggregates, f.tenant.workspaceId)).state.killSwitch.engaged).to.equal(true);
    expect((await live(f)).bidding_strategy.target_cpa).to.equal(cents(start * 1.05));
  });

  it('a target change at 23:59:59.9 UTC and a budget change at 00:00:00.1 UTC on one campaign: the budget change is queued as review and stays off the platform', async () => {
    const f = await fixture('races-midnight');
    const midnight = Date.UTC(new Date().getUTCFullYear(), new Date().getUTCMonth(), new Date().getUTCDate());
    const budget0 = f.cpa.daily_budget;
    clock.at = midnight - 100;
    const target = await propose(f, targetDraft(f.cpa, cents(f.cpa.bidding_strategy.target_cpa! * 1.05)));
    expect(target.disposition, reasons(target)).to.equal('auto_applied');
    clock.at = midnight + 100;
    const budget = await propose(f, budgetDraft(f.cpa, cents(budget0 * 1.1)));
    expect(budget.risk_tier).to.equal('review');
    expect(budget.disposition, reasons(budget)).to.equal('queued');
    expect(reasons(budget)).to.include(`the campaign's target_cpa had an auto-applied change at ${new Date(midnight - 100).toISOString()}, less than 24 hours ago`);

    await startWorker();
    await waitForStatus(clock.svc, f.tenant.keys.read, f.tenant.accounts.sandbox, target.id, 'applied');
    const queued = await waitForStatus(clock.svc, f.tenant.keys.read, f.tenant.accounts.sandbox, budget.id, 'queued');
    expect(queued.status).to.equal('queued');
    expect((await live(f)).daily_budget).to.equal(budget0);
  });

  it('two auto-applied changes of one campaign 25 hours apart, both still pending when the worker runs them in one batch: the later one is returned, the budget unchanged', async () => {
    const f = await fixture('races-batch');
    const target0 = f.cpa.bidding_strategy.target_cpa!;
    const budget0 = f.cpa.daily_budget;
    // The apply worker was down: 25 hours is past the quota's 24-hour rule, so both are auto_applied.
    clock.at = Date.now() - 25 * HOUR_MS;
    const target = await propose(f, targetDraft(f.cpa, cents(target0 * 1.05)));
    clock.at = Date.now();
    const budget = await propose(f, budgetDraft(f.cpa, cents(budget0 * 1.1)));
    expect(target.disposition, reasons(target)).to.equal('auto_applied');
    expect(budget.disposition, reasons(budget)).to.equal('auto_applied');

    // The target change is held at the platform call until the budget action is decided one
    // way or the other, so the budget's re-check certainly runs while the target is not applied.
    const approvalStatus = async (id: string) =>
      (await clock.svc.service.infrastructure.database.db.selectFrom('approvals').select('status').where('id', '=', id).executeTakeFirst())?.status;
    const budgetSettled = () => eventually(async () => expect(['applied', 'returned']).to.include(await approvalStatus(budget.id)), 20_000, 50);
    await startWorker(wrapped({ applyChange: async (change) => (change.kind === 'set_target_cpa' ? budgetSettled() : undefined) }));

    const returned = await waitForStatus(clock.svc, f.tenant.keys.read, f.tenant.accounts.sandbox, budget.id, 'returned', 30_000);
    expect(returned.status_reason).to.include('no longer safe at apply time (review)');
    expect(returned.status_reason).to.include(`learning period: this service changed the campaign's target CPA`);
    expect(returned.status_reason).to.include(`(action ${target.id})`);
    await waitForStatus(clock.svc, f.tenant.keys.read, f.tenant.accounts.sandbox, target.id, 'applied', 30_000);
    expect((await live(f)).daily_budget).to.equal(budget0);
    expect((await live(f)).bidding_strategy.target_cpa).to.equal(cents(target0 * 1.05));
  });
});
