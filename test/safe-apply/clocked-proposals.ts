import { createLogger } from '../../src/log/logger.ts';
import type { AdsPlatform, Campaign, PlatformAccountRef } from '../../src/platform/ads-platform.ts';
import { SandboxPlatform } from '../../src/platform/sandbox/sandbox-platform.ts';
import type { ActionDraft } from '../../src/policy/action-draft.ts';
import { ProposalService, type ActionRepresentation } from '../../src/policy/proposal-service.ts';
import { ApplyWorker } from '../../src/workers/apply-worker.ts';
import { startTestService, type TestService, type TestTenant } from '../support/test-service.ts';
import { ApprovalsAppliedChangeLookup } from '../../projections/approvals/applied-change-lookup.ts';
import { platformAccount } from './helpers.ts';

/** A tenant, its sandbox account, and a campaign of it on a target CPA of its own (no portfolio). */
export interface CampaignFixture {
  readonly tenant: TestTenant;
  readonly account: PlatformAccountRef;
  readonly cpa: Campaign;
}

export interface ClockedProposals {
  readonly svc: TestService;
  readonly platform: SandboxPlatform;
  /** Proposes on the clock below; for a test that needs a request of its own (another run, another meta). */
  readonly proposals: ProposalService;
  /** The proposals' clock, in epoch ms: set it to propose at another moment; back to now before each test. */
  at: number;
  fixture(name: string): Promise<CampaignFixture>;
  /** The campaign as the sandbox has it now. */
  live(fixture: CampaignFixture): Promise<Campaign>;
  /** Proposes `draft` on the fixture's account at the clock's time (auto-apply unless told otherwise). */
  propose(fixture: CampaignFixture, draft: ActionDraft, autoApply?: boolean): Promise<ActionRepresentation>;
  /** Starts an apply worker (stopped after the test) on the sandbox, or on `platform` wrapping it. */
  startApplyWorker(options?: { readonly platform?: AdsPlatform; readonly concurrency?: number }): Promise<void>;
}

/**
 * The set-up of the safe-apply tests that step through time: a service without apply workers
 * (tests start their own when they want one), a ProposalService whose clock the test moves,
 * and sandbox campaigns to propose on. Registers its mocha hooks in the calling `describe`.
 *
 * @example
 * const clock = clockedProposals('sa-bands', 'daily-bands');
 * it('…', async () => {
 *   const f = await clock.fixture('bands-target');
 *   clock.at += DAY_MS;
 *   await clock.propose(f, draft);
 * });
 */
export function clockedProposals(label: string, correlationId: string): ClockedProposals {
  let svc: TestService | undefined;
  let platform: SandboxPlatform | undefined;
  let proposals: ProposalService | undefined;
  const workers: ApplyWorker[] = [];
  const started = () => {
    if (!svc || !platform || !proposals) throw new Error('clockedProposals: used outside a test of its describe');
    return { svc, platform, proposals };
  };

  const clocked: ClockedProposals = {
    get svc() {
      return started().svc;
    },
    get platform() {
      return started().platform;
    },
    get proposals() {
      return started().proposals;
    },
    at: Date.now(),
    async fixture(name) {
      const { svc, platform } = started();
      const tenant = await svc.tenant(name);
      const account = await platformAccount(svc, tenant.workspaceId, tenant.accounts.sandbox);
      const cpa = (await platform.listCampaigns(account)).find(
        (c) => c.status === 'enabled' && c.bidding_strategy.type === 'maximize_conversions' && c.bidding_strategy.target_cpa !== null && c.bidding_strategy.portfolio === null,
      )!;
      return { tenant, account, cpa };
    },
    async live(fixture) {
      return (await started().platform.getCampaign(fixture.account, fixture.cpa.id))!;
    },
    propose(fixture, draft, autoApply = true) {
      return started().proposals.propose({
        workspaceId: fixture.tenant.workspaceId,
        accountId: fixture.tenant.accounts.sandbox,
        runId: null,
        draft,
        summary: `test ${draft.kind}`,
        reason: 'test',
        autoApply,
        meta: { actor: { kind: 'api_key', id: fixture.tenant.keyIds.write }, correlationId },
      });
    },
    async startApplyWorker(options = {}) {
      const { svc, platform } = started();
      const worker = new ApplyWorker({
        infrastructure: svc.service.infrastructure,
        platform: options.platform ?? platform,
        logger: createLogger('silent'),
        ...(options.concurrency !== undefined ? { concurrency: options.concurrency } : {}),
      });
      await worker.start();
      workers.push(worker);
    },
  };

  before(async () => {
    svc = await startTestService(label, { ROLES: 'http,projectors' });
    const infra = svc.service.infrastructure;
    platform = new SandboxPlatform(infra.database.db);
    // With the platform, as the service builds it: the proposal reads the campaign's portfolio and shared budget.
    proposals = new ProposalService(infra.commands, new ApprovalsAppliedChangeLookup(infra.database.db), { clock: () => new Date(clocked.at), platform });
  });
  beforeEach(() => {
    clocked.at = Date.now();
  });
  afterEach(async () => {
    await Promise.all(workers.splice(0).map((worker) => worker.stop()));
  });
  after(async () => svc?.stop());
  return clocked;
}
