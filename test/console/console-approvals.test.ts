import { expect } from 'chai';
import { mkdirSync } from 'node:fs';
import { eventually } from '../support/eventually.ts';
import { startRun, waitForTerminalRun } from '../support/runs.ts';
import { startTestService, type TestService, type TestTenant } from '../support/test-service.ts';
import { actionCard, SCREENSHOT_DIR, signIn, useConsoleBrowser } from './support/console-browser.ts';

const WASTE_BRIEF = 'Find wasted spend on search terms without conversions and add negative keywords.';

/**
 * The approvals console in headless Chromium against a real service (every role, real NATS
 * and Postgres, the rules agent): what a person sees and does, checked through the API.
 */
describe('console: approvals in a browser', function () {
  this.timeout(120_000);
  const session = useConsoleBrowser();
  let svc: TestService;
  let tenant: TestTenant;
  let runId: string;
  let runActions: { id: string; summary: string; approvals_url: string; policy_reasons: string[] }[];

  const approvalsUrl = (projectId: string) => `${svc.baseUrl}/console/accounts/${projectId}/approvals`;
  const approvalOf = async (projectId: string, actionId: string) => {
    const response = await svc.request('GET', `/api/v1/accounts/${projectId}/approvals?limit=200`, { key: tenant.keys.read });
    const body = (await response.json()) as { data: { id: string; status: string; status_reason: string | null }[] };
    return body.data.find((action) => action.id === actionId)!;
  };

  before(async () => {
    svc = await startTestService('console-browser');
    tenant = await svc.tenant('console');
    runId = await startRun(svc, tenant.keys.write, tenant.accounts.sandbox, WASTE_BRIEF);
    const run = await waitForTerminalRun(svc, tenant.keys.read, runId, 30_000);
    expect(run.status, JSON.stringify(run.error)).to.equal('succeeded');
    runActions = run.result.actions;
    expect(runActions.length, 'the waste run proposes at least 3 actions').to.be.at.least(3);
  });

  after(async () => {
    await svc?.stop();
  });

  it('refuses a wrong key: says it is not valid and stays on the form', async () => {
    await session.page.goto(approvalsUrl(tenant.accounts.sandbox));
    await session.page.getByLabel('API key').fill(`${tenant.keys.write.slice(0, -4)}xxxx`);
    await session.page.getByRole('button', { name: 'Sign in' }).click();
    await session.page.getByText('That API key is not valid.').waitFor();
    expect(await session.page.getByLabel('API key').isVisible()).to.equal(true);
    expect(await session.page.evaluate(() => window.sessionStorage.length)).to.equal(0);
  });

  it('opens the approvals_url of a real run after sign-in and shows its actions, and writes a screenshot', async () => {
    const first = runActions[0]!;
    // The action's own approvals_url, on this test server (PUBLIC_BASE_URL is http://api.test here).
    expect(first.approvals_url).to.equal(`http://api.test/console/accounts/${tenant.accounts.sandbox}/approvals`);
    await signIn(session.page, `${svc.baseUrl}${new URL(first.approvals_url).pathname}`, tenant.keys.write);
    const card = actionCard(session.page, first.id);
    await card.getByRole('heading', { name: first.summary }).waitFor();
    expect(await card.getByText('add_negative_keywords').count()).to.be.at.least(1);
    // waitFor (visible) rather than isVisible(): parts of the card render a moment after its heading.
    await card.getByText('Waiting for approval').waitFor({ state: 'visible' });
    // Its policy reasons, as the API gives them (they depend on the generated account's figures).
    expect(first.policy_reasons.length).to.be.at.least(1);
    for (const reason of first.policy_reasons) await card.getByText(reason, { exact: false }).first().waitFor({ state: 'visible' });
    expect(await card.getByRole('link', { name: /^run / }).getAttribute('href')).to.equal(`/console/runs/${runId}`);
    // The figures the proposal was based on come from the history when opened.
    await card.getByText('Figures it was based on').click();
    await card.getByText('matched cost 30d').waitFor();
    mkdirSync(SCREENSHOT_DIR, { recursive: true });
    await session.page.screenshot({ path: `${SCREENSHOT_DIR}/approvals.png`, fullPage: true });
  });

  it('approves one action, and the API shows it approved and then applied', async () => {
    const target = runActions[0]!;
    await signIn(session.page, approvalsUrl(tenant.accounts.sandbox), tenant.keys.write);
    const card = actionCard(session.page, target.id);
    await card.getByRole('button', { name: 'Approve' }).click();
    await session.page.getByText('Approved 1 action.').waitFor();
    await eventually(async () => expect((await approvalOf(tenant.accounts.sandbox, target.id)).status).to.equal('applied'), 15_000, 100);
    // The page follows the apply worker by itself.
    await card.getByText('Applied', { exact: true }).waitFor({ timeout: 15_000 });
    expect(await card.getByRole('button', { name: 'Approve' }).isDisabled()).to.equal(true);
  });

  it('rejects one action with a reason', async () => {
    const target = runActions[1]!;
    await signIn(session.page, approvalsUrl(tenant.accounts.sandbox), tenant.keys.write);
    const card = actionCard(session.page, target.id);
    await card.getByRole('button', { name: 'Reject' }).click();
    await card.getByLabel('Reason').fill('These terms still bring trial sign-ups.');
    await card.getByRole('button', { name: 'Confirm reject' }).click();
    await card.getByText('These terms still bring trial sign-ups.').waitFor();
    const stored = await approvalOf(tenant.accounts.sandbox, target.id);
    expect(stored.status).to.equal('rejected');
    expect(stored.status_reason).to.include('These terms still bring trial sign-ups.');
  });

  it('says so and refreshes when someone else decided first (409)', async () => {
    const target = runActions[2]!;
    await signIn(session.page, approvalsUrl(tenant.accounts.sandbox), tenant.keys.write);
    const card = actionCard(session.page, target.id);
    await card.getByRole('button', { name: 'Approve' }).waitFor();
    // Hold the page's list refresh back so its Approve button is still enabled when the other person acts.
    let release = () => {};
    const held = new Promise<void>((resolve) => (release = resolve));
    await session.page.route('**/approvals?*', async (route) => {
      await held;
      await route.continue().catch(() => {});
    });
    const other = await svc.request('POST', `/api/v1/accounts/${tenant.accounts.sandbox}/approvals/${target.id}/reject`, {
      key: tenant.keys.admin,
      body: { reason: 'decided elsewhere' },
    });
    expect(other.status).to.equal(200);
    await card.getByRole('button', { name: 'Approve' }).click();
    release();
    await session.page.unroute('**/approvals?*');
    await session.page.getByText(/Someone else already decided this action first; the list has been refreshed/).waitFor();
    await card.getByText('decided elsewhere').waitFor();
    expect((await approvalOf(tenant.accounts.sandbox, target.id)).status).to.equal('rejected');
  });

  it('approves several actions together', async () => {
    const bulkRun = await startRun(svc, tenant.keys.write, tenant.accounts.sandbox2, WASTE_BRIEF);
    const run = await waitForTerminalRun(svc, tenant.keys.read, bulkRun, 30_000);
    const [a, b] = run.result.actions as { id: string }[];
    await signIn(session.page, approvalsUrl(tenant.accounts.sandbox2), tenant.keys.write);
    await actionCard(session.page, a!.id).getByRole('checkbox').check();
    await actionCard(session.page, b!.id).getByRole('checkbox').check();
    await session.page.getByRole('button', { name: 'Approve selected (2)' }).click();
    await session.page.getByText('Approved 2 actions.').waitFor();
    for (const id of [a!.id, b!.id]) {
      expect((await approvalOf(tenant.accounts.sandbox2, id)).status).to.be.oneOf(['approved', 'applying', 'applied']);
    }
  });

  it('lets a read key see everything but act on nothing', async () => {
    await signIn(session.page, approvalsUrl(tenant.accounts.sandbox2), tenant.keys.read);
    await session.page.getByText('Your API key is read-only').waitFor();
    const cards = session.page.locator('article[data-action-id]');
    await cards.first().waitFor();
    expect(await cards.count()).to.be.at.least(3);
    const buttons = session.page.getByRole('button', { name: /^(Approve|Reject)/ });
    const count = await buttons.count();
    expect(count).to.be.at.least(2 + 2 * 3);
    for (let i = 0; i < count; i += 1) expect(await buttons.nth(i).isDisabled(), `button ${i}`).to.equal(true);
  });

  it('shows a new proposal within seconds, without a reload', async () => {
    const fresh = await svc.tenant('console-live');
    await signIn(session.page, approvalsUrl(fresh.accounts.sandbox), fresh.keys.write);
    await session.page.getByText('No action has been proposed on this account yet.').waitFor();
    const liveRun = await startRun(svc, fresh.keys.write, fresh.accounts.sandbox, WASTE_BRIEF);
    const run = await waitForTerminalRun(svc, fresh.keys.read, liveRun, 30_000);
    const proposed = run.result.actions[0] as { id: string; summary: string };
    const seenAfter = Date.now();
    await actionCard(session.page, proposed.id).getByRole('heading', { name: proposed.summary }).waitFor({ timeout: 8_000 });
    expect(Date.now() - seenAfter).to.be.below(8_000);
  });

  it('shows a run: status, answer, actions and its transcript, collapsed, with outputs from the history', async () => {
    await signIn(session.page, `${svc.baseUrl}/console/runs/${runId}`, tenant.keys.read);
    await session.page.getByTestId('run-status').filter({ hasText: 'succeeded' }).waitFor();
    await session.page.getByText('Proposed changes (nothing is live until approved').waitFor();
    const firstCall = session.page.locator('ol.transcript details').first();
    expect(await firstCall.evaluate((element) => (element as HTMLDetailsElement).open)).to.equal(false);
    await firstCall.locator('summary').click();
    await firstCall.getByText('"impressions"').waitFor();
    expect(await session.page.locator('ol.transcript > li').count()).to.equal((await waitForTerminalRun(svc, tenant.keys.read, runId)).result.tool_calls.length);
  });

  it('keeps the key in sessionStorage only: not in localStorage, a cookie or the URL', async () => {
    await signIn(session.page, approvalsUrl(tenant.accounts.sandbox), tenant.keys.write);
    await session.page.locator('article[data-action-id]').first().waitFor();
    const storage = await session.page.evaluate(() => ({
      session: Object.values({ ...window.sessionStorage }),
      local: window.localStorage.length,
      cookie: document.cookie,
      url: window.location.href,
    }));
    expect(storage.session).to.deep.equal([tenant.keys.write]);
    expect(storage.local).to.equal(0);
    expect(storage.cookie).to.equal('');
    expect((await session.context.cookies()).length).to.equal(0);
    expect(storage.url).to.not.include(tenant.keys.write.slice(3, 20));
  });
});
