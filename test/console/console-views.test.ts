import { expect } from 'chai';
import type { Page } from 'playwright-core';
import { startGeminiTestService, type GeminiTestService } from '../support/gemini-service.ts';
import { revokeKey } from '../../src/operator/operator-commands.ts';
import { eventually } from '../support/eventually.ts';
import { startRun, waitForTerminalRun } from '../support/runs.ts';
import { approvalOf, campaignsByStrategy, proposeTarget, type CampaignsByStrategy } from '../safe-apply/helpers.ts';
import { actionCard, newConsoleContext, signIn, useConsoleBrowser } from './support/console-browser.ts';

/**
 * The console's other pages and its qualities: accounts, a run moving while watched,
 * history newest first with filters and pages, phone width, keyboard, no layout shift,
 * and nothing the Content-Security-Policy had to block.
 */
describe('console: views, live run, accessibility', function () {
  this.timeout(120_000);
  const session = useConsoleBrowser();
  let service: GeminiTestService;
  let campaigns: CampaignsByStrategy;
  let cspViolations: string[];

  const svc = () => service.svc;
  const tenant = () => service.tenant;
  const account = () => service.tenant.accounts.sandbox;
  const propose = (n: number) => {
    const roas = campaigns.roas.bidding_strategy.target_roas_pct!;
    return proposeTarget(svc(), tenant().keys.write, account(), campaigns.roas.id, { target_roas_pct: Math.round(roas * (0.97 + n / 1000) * 10) / 10, reason: `step ${n}` });
  };

  before(async () => {
    service = await startGeminiTestService('console-views');
    campaigns = await campaignsByStrategy(svc(), tenant().keys.read, account());
  });
  after(async () => {
    await service?.stop();
  });
  beforeEach(async () => {
    cspViolations = [];
    session.page.on('console', (message) => {
      if (/Content.Security.Policy/i.test(message.text())) cspViolations.push(message.text());
    });
  });
  afterEach(async () => {
    expect(cspViolations, 'CSP violations').to.deep.equal([]);
  });

  it('lists the key\'s accounts, each linking to its approvals', async () => {
    await signIn(session.page, `${svc().baseUrl}/console`, tenant().keys.read);
    await session.page.getByRole('heading', { name: 'Accounts' }).waitFor();
    for (const name of ['tenant sandbox', 'tenant sandbox 2', 'tenant offline']) {
      const link = session.page.getByRole('link', { name, exact: true });
      await link.waitFor();
    }
    await session.page.getByRole('link', { name: 'tenant sandbox 2', exact: true }).click();
    await session.page.waitForURL(`**/console/accounts/${tenant().accounts.sandbox2}/approvals`);
    await session.page.getByText('No action has been proposed on this account yet.').waitFor();
    // The page changed without a reload: its title follows, and focus moves to the new content.
    expect(await session.page.title()).to.equal('Approvals · Approvals console');
    expect(await session.page.evaluate(() => document.activeElement?.id)).to.equal('main');
  });

  it('says so when the account does not exist (or is another workspace\'s), without a read-only notice', async () => {
    await signIn(session.page, `${svc().baseUrl}/console/accounts/00000000-0000-4000-8000-000000000000/approvals`, tenant().keys.write);
    const alert = session.page.locator('main [role=alert]');
    await alert.waitFor();
    expect(await alert.textContent()).to.match(/account/i);
    expect(await session.page.getByText('Your API key is read-only').count()).to.equal(0);
  });

  it('follows a run while it runs: its status moves without a reload', async () => {
    service.gemini.script([
      { functionCalls: [{ name: 'get_account_summary', args: {} }] },
      { delayMs: 2_500, then: { text: 'All good: nothing to change.' } },
    ]);
    const runId = await startRun(svc(), tenant().keys.read, tenant().accounts.sandbox2, 'How is the account doing?');
    await signIn(session.page, `${svc().baseUrl}/console/runs/${runId}`, tenant().keys.read);
    await session.page.getByTestId('run-status').filter({ hasText: /^(queued|running)$/ }).waitFor();
    await session.page.getByTestId('run-status').filter({ hasText: 'succeeded' }).waitFor({ timeout: 15_000 });
    await session.page.getByText('All good: nothing to change.').waitFor();
    const call = session.page.locator('ol.transcript details').first();
    await call.locator('summary').click();
    await call.getByText('"impressions"').waitFor();
  });

  it('shows the history newest first, filtered by type and run, in pages', async () => {
    for (let n = 0; n < 27; n += 1) await propose(n);
    service.gemini.script([{ text: 'Nothing to do.' }]);
    const runId = await startRun(svc(), tenant().keys.read, account(), 'Anything?');
    await waitForTerminalRun(svc(), tenant().keys.read, runId);
    await signIn(session.page, `${svc().baseUrl}/console/accounts/${account()}/history`, tenant().keys.read);
    const types = session.page.locator('ol.history-list .event-type');
    await types.first().waitFor();
    expect(await types.first().textContent()).to.equal('RunSucceeded');
    expect(await types.count()).to.equal(25);
    await session.page.getByText('Page 1 of 2').waitFor();
    await session.page.getByRole('button', { name: 'Older' }).click();
    await session.page.getByText('Page 2 of 2').waitFor();
    // The account's first event ends the last page: AccountCreated, then the 27 proposals.
    expect(await types.last().textContent()).to.equal('AccountCreated');
    expect((await types.allTextContents()).slice(-3)).to.deep.equal(['ActionProposed', 'ActionProposed', 'AccountCreated']);

    await session.page.getByLabel('Event type').selectOption('ActionProposed');
    await session.page.getByRole('button', { name: 'Apply filters' }).click();
    await session.page.getByText('Page 1 of 2').waitFor();
    expect(new Set(await types.allTextContents())).to.deep.equal(new Set(['ActionProposed']));

    // New events appear on Refresh.
    await propose(27);
    await session.page.getByRole('button', { name: 'Refresh' }).click();
    await eventually(async () => expect((await types.allTextContents()).length).to.equal(25), 5_000);
    await session.page.getByText('Page 1 of 2').waitFor();
    await session.page.getByRole('button', { name: 'Older' }).click();
    await session.page.getByText('Page 2 of 2').waitFor();
    expect(await types.count()).to.equal(3);

    await session.page.getByLabel('Event type').selectOption('');
    await session.page.getByLabel('Run id').fill(runId);
    await session.page.getByRole('button', { name: 'Apply filters' }).click();
    await session.page.getByText('Page 1 of 1').waitFor();
    expect(await types.allTextContents()).to.deep.equal(['RunSucceeded', 'RunStarted', 'RunQueued']);
  });

  it('lists what the service has checked when its projections are stopped, says the newest events come later, and lists them on Refresh', async () => {
    const projector = svc().service.projectorCopy!.projector!;
    const waiting = session.page.getByText('The newest events are not listed yet');
    await projector.stop();
    let restarted = false;
    try {
      await propose(40);
      await signIn(session.page, `${svc().baseUrl}/console/accounts/${account()}/history`, tenant().keys.read);
      // Each page waits out the read barrier (3 s) before it ends at the projections' checkpoint.
      await waiting.waitFor({ timeout: 20_000 });
      expect(await session.page.locator('ol.history-list .event-type').count()).to.be.greaterThan(0);
      await projector.start();
      restarted = true;
    } finally {
      if (!restarted) await projector.start();
    }
    await eventually(async () => {
      await session.page.getByRole('button', { name: 'Refresh' }).click();
      await waiting.waitFor({ state: 'detached', timeout: 2_000 });
    }, 20_000, 500);
  });

  it('rejects several actions together with one reason', async () => {
    const [a, b] = [await propose(300), await propose(301)];
    await signIn(session.page, `${svc().baseUrl}/console/accounts/${account()}/approvals?status=queued`, tenant().keys.write);
    await actionCard(session.page, a.id).getByRole('checkbox').check();
    await actionCard(session.page, b.id).getByRole('checkbox').check();
    await session.page.getByRole('button', { name: 'Reject selected (2)' }).click();
    await session.page.getByLabel('Reason').fill('Not during the sale.');
    await session.page.getByRole('button', { name: 'Confirm reject' }).click();
    await session.page.getByText('Rejected 2 actions.').waitFor();
    for (const id of [a.id, b.id]) {
      const stored = await approvalOf(svc(), tenant().keys.read, account(), id);
      expect(stored.status).to.equal('rejected');
      expect(stored.status_reason).to.include('Not during the sale.');
    }
  });

  it('goes back to the sign-in form when the key is revoked, and forgets it; Sign out forgets it too', async () => {
    const other = await svc().tenant('console-revoked');
    await signIn(session.page, `${svc().baseUrl}/console/accounts/${other.accounts.sandbox}/approvals`, other.keys.write);
    await session.page.getByText('No action has been proposed on this account yet.').waitFor();
    await revokeKey(svc().service.infrastructure, other.keyIds.write);
    await session.page.getByText('Your API key is no longer valid. Sign in again.').waitFor({ timeout: 10_000 });
    expect(await session.page.getByLabel('API key').isVisible()).to.equal(true);
    expect(await session.page.evaluate(() => window.sessionStorage.length)).to.equal(0);

    await session.page.getByLabel('API key').fill(other.keys.read);
    await session.page.getByRole('button', { name: 'Sign in' }).click();
    await session.page.getByRole('button', { name: 'Sign out' }).click();
    await session.page.getByText('Signed out.').waitFor();
    expect(await session.page.evaluate(() => window.sessionStorage.length)).to.equal(0);
  });

  it('fits a phone-width screen without sideways scrolling', async () => {
    const phone = await newConsoleContext(session.browser, { phone: true });
    const small = await phone.newPage();
    try {
      for (const path of [`/console/accounts/${account()}/approvals`, `/console/accounts/${account()}/history`, '/console']) {
        if (path === `/console/accounts/${account()}/approvals`) await signIn(small, `${svc().baseUrl}${path}`, tenant().keys.write);
        else await small.goto(`${svc().baseUrl}${path}`);
        await small.locator('main h1').waitFor();
        await small.waitForLoadState('networkidle').catch(() => {});
        const overflow = await small.evaluate(() => document.documentElement.scrollWidth - document.documentElement.clientWidth);
        expect(overflow, path).to.be.at.most(0);
      }
    } finally {
      await phone.close();
    }
  });

  it('is operable with the keyboard: every control has a label, Approve works from the keyboard', async () => {
    const action = await propose(100);
    await signIn(session.page, `${svc().baseUrl}/console/accounts/${account()}/approvals?status=queued`, tenant().keys.write);
    const card = actionCard(session.page, action.id);
    await card.getByRole('button', { name: 'Approve' }).waitFor();
    const unlabelled = await session.page.evaluate(() =>
      [...document.querySelectorAll('input, select, textarea')].filter((element) => {
        const control = element as HTMLInputElement;
        return !control.labels?.length && !control.getAttribute('aria-label');
      }).length,
    );
    expect(unlabelled).to.equal(0);
    let reached = false;
    for (let presses = 0; presses < 200 && !reached; presses += 1) {
      await session.page.keyboard.press('Tab');
      reached = await session.page.evaluate((id) => {
        const focused = document.activeElement;
        return focused?.textContent === 'Approve' && focused.closest('article')?.getAttribute('data-action-id') === id;
      }, action.id);
    }
    expect(reached, 'Tab reaches the Approve button of the action').to.equal(true);
    await session.page.keyboard.press('Enter');
    await session.page.getByText('Approved 1 action.').waitFor();
  });

  it('does not shift the layout when a new proposal appears', async () => {
    await session.context.addInitScript(() => {
      const shifts: { value: number; time: number }[] = [];
      (window as unknown as { __shifts: typeof shifts }).__shifts = shifts;
      new PerformanceObserver((list) => {
        for (const entry of list.getEntries() as unknown as { value: number; hadRecentInput: boolean; startTime: number }[]) {
          if (!entry.hadRecentInput) shifts.push({ value: entry.value, time: entry.startTime });
        }
      }).observe({ type: 'layout-shift', buffered: true });
    });
    await signIn(session.page, `${svc().baseUrl}/console/accounts/${account()}/approvals`, tenant().keys.read);
    await session.page.locator('article[data-action-id]').first().waitFor();
    const listedAt = await session.page.evaluate(() => performance.now());
    const action = await propose(200);
    await actionCard(session.page, action.id).waitFor({ timeout: 10_000 });
    const shift = await session.page.evaluate((since) => (window as unknown as { __shifts: { value: number; time: number }[] }).__shifts
      .filter((entry) => entry.time > since)
      .reduce((sum, entry) => sum + entry.value, 0), listedAt);
    expect(shift).to.be.below(0.01);
  });
});
