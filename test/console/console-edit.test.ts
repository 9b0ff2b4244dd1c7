import { expect } from 'chai';
import { ApprovalsAppliedChangeLookup } from '../../projections/approvals/applied-change-lookup.ts';
import { SandboxPlatform } from '../../src/platform/sandbox/sandbox-platform.ts';
import { ProposalService } from '../../src/policy/proposal-service.ts';
import { approvalOf, campaignById, cents, listCampaigns, platformAccount, waitForStatus } from '../safe-apply/helpers.ts';
import { startRun, waitForTerminalRun } from '../support/runs.ts';
import { startTestService, type TestService, type TestTenant } from '../support/test-service.ts';
import { actionCard, signIn, useConsoleBrowser } from './support/console-browser.ts';

const WASTE_BRIEF = 'Find wasted spend on search terms without conversions and add negative keywords.';

/**
 * Edit, then approve in headless Chromium against a real service: the approver unticks a
 * keyword and changes a match type (or changes a budget), approves, and the API and the
 * sandbox platform show exactly the edited version applied.
 */
describe('console: edit, then approve in a browser', function () {
  this.timeout(120_000);
  const session = useConsoleBrowser();
  let svc: TestService;
  let tenant: TestTenant;
  let account: string;

  const approvalsUrl = () => `${svc.baseUrl}/console/accounts/${account}/approvals`;

  before(async () => {
    svc = await startTestService('console-edit');
    tenant = await svc.tenant('console-edit');
    account = tenant.accounts.sandbox;
  });

  after(async () => {
    await svc?.stop();
  });

  it('unticks a negative keyword and changes a match type, approves, and exactly the edited list is applied', async () => {
    const runId = await startRun(svc, tenant.keys.write, account, WASTE_BRIEF);
    const run = await waitForTerminalRun(svc, tenant.keys.read, runId, 30_000);
    expect(run.status, JSON.stringify(run.error)).to.equal('succeeded');
    const actions = await Promise.all((run.result.actions as { id: string }[]).map((a) => approvalOf(svc, tenant.keys.read, account, a.id)));
    const action = actions.find((a) => a.kind === 'add_negative_keywords' && a.params.keywords.length >= 2);
    expect(action, 'the waste run proposes a negative keyword action with two keywords or more').to.not.equal(undefined);
    const proposed = action.params.keywords as { text: string; match_type: string }[];
    const [dropped, rematched, ...rest] = proposed;
    const newMatch = rematched!.match_type === 'exact' ? 'broad' : 'exact';
    const platform = new SandboxPlatform(svc.service.infrastructure.database.db);
    const ref = await platformAccount(svc, tenant.workspaceId, account);
    const negatives = async () => (await platform.listNegativeKeywords(ref, action.params.campaign_id)).map((k) => `${k.text}|${k.match_type}`);
    const before = await negatives();

    await signIn(session.page, approvalsUrl(), tenant.keys.write);
    const card = actionCard(session.page, action.id);
    await card.getByRole('button', { name: 'Edit', exact: true }).click();
    await card.getByRole('checkbox', { name: `Keep "${dropped!.text}"` }).uncheck();
    await card.getByLabel(`Match type of "${rematched!.text}"`).selectOption(newMatch);
    await card.getByRole('button', { name: 'Approve edited' }).click();
    await session.page.getByText('Edited and approved 1 action.').waitFor();
    await card.getByText(/^Edited$/).waitFor();

    const expected = [{ text: rematched!.text, match_type: newMatch }, ...rest];
    const stored = await waitForStatus(svc, tenant.keys.read, account, action.id, 'applied');
    expect(stored.params.keywords).to.deep.equal(expected);
    expect(stored.edited.original.params.keywords).to.deep.equal(proposed);
    const added = (await negatives()).filter((k) => !before.includes(k));
    expect(added).to.have.members(expected.map((k) => `${k.text}|${k.match_type}`));
    expect(added).to.have.length(expected.length);
    // The card shows what was applied, and the version as proposed for reference.
    await card.getByText('Applied', { exact: true }).waitFor({ timeout: 15_000 });
    await card.getByText('As proposed, before the edit').click();
    expect(await card.getByText(action.summary).isVisible()).to.equal(true);
  });

  it('changes the value of a budget action, approves, and the campaign gets the edited budget', async () => {
    const campaign = (await listCampaigns(svc, tenant.keys.read, tenant.accounts.sandbox2)).find((c) => c.status === 'enabled')!;
    const { infrastructure } = svc.service;
    const platform = new SandboxPlatform(infrastructure.database.db);
    const proposals = new ProposalService(infrastructure.commands, new ApprovalsAppliedChangeLookup(infrastructure.database.db), { platform });
    const proposedBudget = cents(campaign.daily_budget * 1.1);
    const action = await proposals.propose({
      workspaceId: tenant.workspaceId,
      accountId: tenant.accounts.sandbox2,
      runId: null,
      draft: { kind: 'set_campaign_budget', params: { campaign_id: campaign.id, daily_budget: proposedBudget }, based_on: { campaign_status: campaign.status, daily_budget: campaign.daily_budget } },
      summary: `Change the daily budget of "${campaign.name}" from ${campaign.daily_budget} to ${proposedBudget}`,
      reason: 'browser test',
      autoApply: false,
      meta: { actor: { kind: 'api_key', id: tenant.keyIds.admin }, correlationId: 'console-edit' },
    });
    const edited = cents(campaign.daily_budget * 1.15);

    await signIn(session.page, `${svc.baseUrl}/console/accounts/${tenant.accounts.sandbox2}/approvals`, tenant.keys.write);
    const card = actionCard(session.page, action.id);
    await card.getByRole('button', { name: 'Edit', exact: true }).click();
    const input = card.getByLabel('New daily budget');
    expect(await input.inputValue()).to.equal(String(proposedBudget));
    await input.fill(String(edited));
    await card.getByRole('button', { name: 'Approve edited' }).click();
    await session.page.getByText('Edited and approved 1 action.').waitFor();

    const stored = await waitForStatus(svc, tenant.keys.read, tenant.accounts.sandbox2, action.id, 'applied');
    expect(stored.params.daily_budget).to.equal(edited);
    expect(stored.edited.original.params.daily_budget).to.equal(proposedBudget);
    expect((await campaignById(svc, tenant.keys.read, tenant.accounts.sandbox2, campaign.id)).daily_budget).to.equal(edited);
  });
});
