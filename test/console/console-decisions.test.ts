import { expect } from 'chai';
import type { Page, Request } from 'playwright-core';
import { actionDecider } from '../../commands/action/action-decider.ts';
import { approvalOf, campaignsByStrategy, proposeTarget, waitForStatus } from '../safe-apply/helpers.ts';
import { runCli } from '../support/cli.ts';
import { eventually } from '../support/eventually.ts';
import { startTestService, type TestService, type TestTenant } from '../support/test-service.ts';
import { actionCard, signIn, useConsoleBrowser, waitEnabled } from './support/console-browser.ts';

const PROBE_ACTION_ID = '00000000-0000-0000-0000-000000000000';

/**
 * Deciding in the approvals console when things go wrong: double clicks, failures that are not
 * conflicts, actions that changed since the page showed them, a list that cannot be read again,
 * a scope probe that fails. Headless Chromium against a real service (HTTP and projectors: no
 * apply worker, so an approved action stays approved until a test returns it to the queue).
 */
describe('console: deciding safely in a browser', function () {
  this.timeout(120_000);
  const session = useConsoleBrowser();
  let svc: TestService;
  let roasStep = 0;

  const approvalsUrl = (projectId: string) => `${svc.baseUrl}/console/accounts/${projectId}/approvals`;
  /** A queued action on the account's ROAS campaign (each a slightly different target). */
  const propose = async (tenant: TestTenant, key = tenant.keys.write) => {
    const { roas } = await campaignsByStrategy(svc, tenant.keys.read, tenant.accounts.sandbox);
    roasStep += 1;
    const value = Math.round(roas.bidding_strategy.target_roas_pct! * (0.9 + roasStep / 100) * 10) / 10;
    return proposeTarget(svc, key, tenant.accounts.sandbox, roas.id, { target_roas_pct: value, reason: `step ${roasStep}` }) as Promise<{ id: string; summary: string }>;
  };
  /** The decision requests the page sends (not the scope probe), as `<action id> <decision>`. */
  const recordDecisions = (page: Page) => {
    const sent: { id: string; decision: string; body: Record<string, unknown> }[] = [];
    page.on('request', (request: Request) => {
      const match = /\/approvals\/([^/]+)\/(approve|reject)$/.exec(new URL(request.url()).pathname);
      if (request.method() !== 'POST' || !match || match[1] === PROBE_ACTION_ID) return;
      sent.push({ id: match[1]!, decision: match[2]!, body: JSON.parse(request.postData() ?? '{}') });
    });
    return sent;
  };
  /** Holds decision requests back until released, so the page can be looked at while they are in flight. */
  const holdDecisions = async (page: Page) => {
    let release = () => {};
    const held = new Promise<void>((resolve) => (release = resolve));
    await page.route(/\/approvals\/[^/]+\/(approve|reject)$/, async (route) => {
      await held;
      await route.continue().catch(() => {});
    });
    return release;
  };
  /** Clicks the button twice in one task, as a fast double click does before the page can re-render. */
  const clickTwiceAtOnce = (page: Page, label: string) =>
    page.evaluate((text) => {
      const button = [...document.querySelectorAll('button')].find((candidate) => candidate.textContent?.startsWith(text));
      if (!button) throw new Error(`no button ${text}`);
      button.click();
      button.click();
    }, label);
  const openApprovals = async (tenant: TestTenant, key: string, firstActionId: string) => {
    await signIn(session.page, approvalsUrl(tenant.accounts.sandbox), key);
    // Enabled once the list is read and the key's scope is known.
    await waitEnabled(actionCard(session.page, firstActionId).getByRole('button', { name: 'Approve', exact: true }));
  };

  /** Elsewhere: the action is approved, then given back to the queue (as the apply worker does on a re-check): a new version. */
  const approveAndReturnElsewhere = async (tenant: TestTenant, actionId: string) => {
    expect((await svc.request('POST', `/api/v1/accounts/${tenant.accounts.sandbox}/approvals/${actionId}/approve`, { key: tenant.keys.admin, body: {} })).status).to.equal(200);
    await svc.service.infrastructure.commands.handle(actionDecider, {
      type: 'FinishApply',
      workspaceId: tenant.workspaceId,
      accountId: tenant.accounts.sandbox,
      actionId,
      workerId: 'test-worker',
      claimId: null,
      result: { kind: 'returned', reason: 'the target changed on the platform' },
      meta: { actor: { kind: 'worker', id: 'test-worker' }, correlationId: actionId },
    });
    await waitForStatus(svc, tenant.keys.read, tenant.accounts.sandbox, actionId, 'returned');
  };

  before(async () => {
    svc = await startTestService('console-decisions', { ROLES: 'http,projectors' });
  });
  after(async () => {
    await svc?.stop();
  });

  it('"Approve selected" clicked twice: disabled while in flight, each action approved once, and the page says so', async () => {
    const tenant = await svc.tenant('double-approve');
    const [a, b] = [await propose(tenant), await propose(tenant)];
    await openApprovals(tenant, tenant.keys.write, a.id);
    const sent = recordDecisions(session.page);
    await actionCard(session.page, a.id).getByRole('checkbox').check();
    await actionCard(session.page, b.id).getByRole('checkbox').check();
    const release = await holdDecisions(session.page);
    await clickTwiceAtOnce(session.page, 'Approve selected');
    await session.page.getByRole('button', { name: /^Approve selected/ }).and(session.page.locator(':disabled')).waitFor();
    expect(await session.page.getByRole('button', { name: /^Reject selected/ }).isDisabled()).to.equal(true);
    release();
    await session.page.getByText('Approved 2 actions.').waitFor();
    await session.page.waitForTimeout(500);
    expect(sent.map((request) => `${request.id} ${request.decision}`).sort()).to.deep.equal([`${a.id} approve`, `${b.id} approve`].sort());
    expect(await session.page.getByText(/Someone else already decided/).count()).to.equal(0);
    for (const action of [a, b]) expect((await approvalOf(svc, tenant.keys.read, tenant.accounts.sandbox, action.id)).status).to.equal('approved');
  });

  it('bulk "Confirm reject" submitted twice: disabled while in flight, each action rejected once', async () => {
    const tenant = await svc.tenant('double-reject');
    const [a, b] = [await propose(tenant), await propose(tenant)];
    await openApprovals(tenant, tenant.keys.write, a.id);
    const sent = recordDecisions(session.page);
    await actionCard(session.page, a.id).getByRole('checkbox').check();
    await actionCard(session.page, b.id).getByRole('checkbox').check();
    await session.page.getByRole('button', { name: 'Reject selected (2)' }).click();
    await session.page.locator('#bulk-reason').fill('Not this week.');
    const release = await holdDecisions(session.page);
    await clickTwiceAtOnce(session.page, 'Confirm reject');
    await session.page.getByRole('button', { name: 'Confirm reject' }).and(session.page.locator(':disabled')).waitFor();
    release();
    await session.page.getByText('Rejected 2 actions.').waitFor();
    await session.page.waitForTimeout(500);
    expect(sent.map((request) => `${request.id} ${request.decision}`).sort()).to.deep.equal([`${a.id} reject`, `${b.id} reject`].sort());
    for (const action of [a, b]) expect((await approvalOf(svc, tenant.keys.read, tenant.accounts.sandbox, action.id)).status).to.equal('rejected');
  });

  it('says "someone else decided" only for the action someone else decided, and each other failure with its problem', async () => {
    const tenant = await svc.tenant('failures');
    const rule = await runCli(svc.config, ['workspace', 'set', tenant.workspaceId, '--require-distinct-approver', 'on', '--json']);
    expect(rule.code, rule.stderr).to.equal(0);
    const own = await propose(tenant, tenant.keys.write); // the console's key proposed it: 403 distinct-approver-required
    const offline = await propose(tenant, tenant.keys.admin); // answered 409 account-not-connected (below)
    const taken = await propose(tenant, tenant.keys.admin); // rejected elsewhere first: 409 action-not-in-queue
    await openApprovals(tenant, tenant.keys.write, taken.id);
    await session.page.getByRole('checkbox', { name: 'Select all waiting' }).check();
    // Hold the list's refresh back, so the page still shows `taken` waiting when it is decided elsewhere.
    let releaseList = () => {};
    const listHeld = new Promise<void>((resolve) => (releaseList = resolve));
    await session.page.route('**/approvals?*', async (route) => {
      await listHeld;
      await route.continue().catch(() => {});
    });
    // What the API answers approving an edit on an account whose platform grant was revoked meanwhile.
    await session.page.route(`**/approvals/${offline.id}/approve`, (route) =>
      route.fulfill({
        status: 409,
        contentType: 'application/problem+json',
        body: JSON.stringify({
          type: 'http://api.test/problems/account-not-connected',
          title: 'The account has no connected advertising-platform account',
          status: 409,
          detail: `Account ${tenant.accounts.sandbox} is not connected to an advertising platform; connect it first.`,
        }),
      }));
    const elsewhere = await svc.request('POST', `/api/v1/accounts/${tenant.accounts.sandbox}/approvals/${taken.id}/reject`, { key: tenant.keys.admin, body: { reason: 'decided elsewhere' } });
    expect(elsewhere.status).to.equal(200);
    await session.page.getByRole('button', { name: 'Approve selected (3)' }).click();
    releaseList();
    const message = session.page.locator('p.message');
    await message.filter({ hasText: 'Someone else already decided' }).waitFor();
    const text = await message.textContent();
    expect(text).to.include('Someone else already decided 1 action first; the list has been refreshed.');
    expect(text).to.include('2 actions could not be approved:');
    const failures = session.page.getByRole('list', { name: 'Actions that could not be decided' }).getByRole('listitem');
    expect(await failures.count()).to.equal(2);
    const ownLine = await failures.filter({ hasText: own.summary }).textContent();
    expect(ownLine).to.include('Another key must approve this action.');
    expect(ownLine).to.include('The workspace requires a distinct approver');
    const offlineLine = await failures.filter({ hasText: offline.summary }).textContent();
    expect(offlineLine).to.include('The account has no connected advertising-platform account.');
    expect(offlineLine).to.include('is not connected to an advertising platform; connect it first.');
    for (const action of [own, offline]) expect((await approvalOf(svc, tenant.keys.read, tenant.accounts.sandbox, action.id)).status).to.equal('queued');
  });

  it('sends the version it shows, and approves nothing that changed since: says so and shows the action as it is now', async () => {
    const tenant = await svc.tenant('changed');
    const action = await propose(tenant);
    const shown = await approvalOf(svc, tenant.keys.read, tenant.accounts.sandbox, action.id);
    await openApprovals(tenant, tenant.keys.write, action.id);
    const sent = recordDecisions(session.page);
    // The page keeps showing the version it read: its refresh is held back.
    let releaseList = () => {};
    const listHeld = new Promise<void>((resolve) => (releaseList = resolve));
    await session.page.route('**/approvals?*', async (route) => {
      await listHeld;
      await route.continue().catch(() => {});
    });
    // Elsewhere: approved, then given back to the queue (as the apply worker does on a re-check).
    expect((await svc.request('POST', `/api/v1/accounts/${tenant.accounts.sandbox}/approvals/${action.id}/approve`, { key: tenant.keys.admin, body: {} })).status).to.equal(200);
    await svc.service.infrastructure.commands.handle(actionDecider, {
      type: 'FinishApply',
      workspaceId: tenant.workspaceId,
      accountId: tenant.accounts.sandbox,
      actionId: action.id,
      workerId: 'test-worker',
      claimId: null,
      result: { kind: 'returned', reason: 'the target changed on the platform' },
      meta: { actor: { kind: 'worker', id: 'test-worker' }, correlationId: action.id },
    });
    await waitForStatus(svc, tenant.keys.read, tenant.accounts.sandbox, action.id, 'returned');
    const card = actionCard(session.page, action.id);
    await card.getByText('Waiting for approval').waitFor();
    await card.getByRole('button', { name: 'Approve', exact: true }).click();
    await session.page.getByText(/This action changed since the page showed it/).waitFor();
    releaseList();
    expect(sent).to.have.length(1);
    expect(sent[0]!.body).to.deep.equal({ expected_version: shown.version });
    expect(await session.page.getByText(/Someone else already decided/).count()).to.equal(0);
    // Nothing was decided; the page shows the action as it is now, ready to be reviewed again.
    await card.getByText('Returned to the queue').waitFor();
    await card.getByText('the target changed on the platform').waitFor();
    expect((await approvalOf(svc, tenant.keys.read, tenant.accounts.sandbox, action.id)).status).to.equal('returned');
  });

  it('a list that cannot be read again: says so and disables the decisions until a refresh succeeds', async () => {
    const tenant = await svc.tenant('stale');
    const action = await propose(tenant);
    await openApprovals(tenant, tenant.keys.write, action.id);
    const approve = actionCard(session.page, action.id).getByRole('button', { name: 'Approve', exact: true });
    await session.page.route('**/approvals?*', (route) => route.abort());
    const notice = session.page.getByText(/The list could not be refreshed/);
    await notice.waitFor({ timeout: 10_000 });
    expect(await notice.textContent()).to.include('Approving and rejecting are disabled until it can be read again');
    expect(await approve.isDisabled()).to.equal(true);
    expect(await session.page.getByRole('button', { name: /^Approve selected/ }).isDisabled()).to.equal(true);
    await session.page.unroute('**/approvals?*');
    await notice.waitFor({ state: 'detached', timeout: 10_000 });
    await waitEnabled(approve);
  });

  it('a failed scope check is retried (honouring Retry-After), saying why the buttons are disabled meanwhile', async () => {
    const tenant = await svc.tenant('probe');
    const action = await propose(tenant);
    let probes = 0;
    await session.page.route(`**/approvals/${PROBE_ACTION_ID}/approve`, (route) => {
      probes += 1;
      if (probes > 1) return route.continue();
      return route.fulfill({
        status: 429,
        headers: { 'retry-after': '2' },
        contentType: 'application/problem+json',
        body: JSON.stringify({ type: 'http://api.test/problems/rate-limited', title: 'Too many requests', status: 429, detail: 'This API key is over its request rate; retry after 2 s.' }),
      });
    });
    await signIn(session.page, approvalsUrl(tenant.accounts.sandbox), tenant.keys.write);
    const approve = actionCard(session.page, action.id).getByRole('button', { name: 'Approve', exact: true });
    const notice = session.page.getByText(/Approving and rejecting are disabled until the console can check what this API key may do/);
    await notice.waitFor();
    expect(await notice.textContent()).to.include('This API key is over its request rate; retry after 2 s. Trying again in 2 s.');
    expect(await approve.isDisabled()).to.equal(true);
    const shownAt = Date.now();
    await waitEnabled(approve, 10_000);
    expect(Date.now() - shownAt, 'waited for Retry-After').to.be.above(1_000);
    expect(probes).to.equal(2);
    expect(await notice.count()).to.equal(0);
  });

  it('a decision that fails without a verdict says nothing was decided or the answer was lost, and when to decide again; it is never retried', async () => {
    const tenant = await svc.tenant('no-answer');
    const action = await propose(tenant);
    await openApprovals(tenant, tenant.keys.write, action.id);
    const sent = recordDecisions(session.page);
    let answer: 'abort' | 'html502' | '429' = 'abort';
    await session.page.route(`**/approvals/${action.id}/approve`, (route) => {
      if (answer === 'abort') return route.abort('connectionreset');
      if (answer === 'html502') return route.fulfill({ status: 502, contentType: 'text/html', body: '<html><body><h1>502 Bad Gateway</h1></body></html>' });
      return route.fulfill({
        status: 429,
        headers: { 'retry-after': '7' },
        contentType: 'application/problem+json',
        body: JSON.stringify({ type: 'http://api.test/problems/rate-limited', title: 'Too many requests', status: 429, detail: 'This API key is over its request rate; retry after 7 s.' }),
      });
    });
    const approve = actionCard(session.page, action.id).getByRole('button', { name: 'Approve', exact: true });
    const message = session.page.locator('p.message');
    const line = session.page.getByRole('list', { name: 'Actions that could not be decided' }).getByRole('listitem');

    await approve.click();
    await message.filter({ hasText: 'One action may not have been approved:' }).waitFor();
    let text = await line.textContent();
    expect(text).to.include(action.summary);
    expect(text).to.include('The service could not be reached (no answer came back).');
    expect(text).to.include("Nothing was approved, or it was and the answer was lost: check the action's status in the list (read again just now), and if it is still waiting, decide again.");
    expect(await session.page.locator('main').textContent()).to.not.include('retries by itself');

    answer = 'html502';
    await waitEnabled(approve);
    await approve.click();
    await line.filter({ hasText: 'A gateway in front of the service answered 502' }).waitFor();
    text = await line.textContent();
    expect(text).to.include('A gateway in front of the service answered 502 (bad gateway): the service itself did not answer it, because it is down, restarting or overloaded.');
    expect(text).to.include('Nothing was approved, or it was and the answer was lost');

    answer = '429';
    await waitEnabled(approve);
    await approve.click();
    await message.filter({ hasText: 'One action could not be approved:' }).waitFor();
    expect(await line.textContent()).to.include('Too many requests. This API key is over its request rate; retry after 7 s. Nothing was approved: decide again in 7 s.');

    // One request per click: the page never sent a decision again by itself.
    await session.page.waitForTimeout(500);
    expect(sent.map((request) => request.decision)).to.deep.equal(['approve', 'approve', 'approve']);
    expect((await approvalOf(svc, tenant.keys.read, tenant.accounts.sandbox, action.id)).status).to.equal('queued');
  });

  it('a decision that hangs: after 30 s the page stops waiting, says so, and the action can be decided again', async () => {
    const tenant = await svc.tenant('hung');
    const action = await propose(tenant);
    await session.page.clock.install();
    await openApprovals(tenant, tenant.keys.write, action.id);
    await session.page.route(`**/approvals/${action.id}/approve`, () => {
      // Never answered.
    });
    const approve = actionCard(session.page, action.id).getByRole('button', { name: 'Approve', exact: true });
    await approve.click();
    await session.page.waitForTimeout(300);
    expect(await approve.isDisabled(), 'busy while the approve is in flight').to.equal(true);
    await session.page.clock.fastForward(31_000);
    const line = session.page.getByRole('list', { name: 'Actions that could not be decided' }).getByRole('listitem');
    await line.filter({ hasText: 'The service did not answer within 30 s.' }).waitFor();
    expect(await line.textContent()).to.include('Nothing was approved, or it was and the answer was lost');
    await waitEnabled(approve);
  });

  it('Reject and Edit move the focus into the form they open, and Cancel gives it back', async () => {
    const tenant = await svc.tenant('focus');
    const action = await propose(tenant);
    await openApprovals(tenant, tenant.keys.write, action.id);
    const card = actionCard(session.page, action.id);
    const focused = (locator: ReturnType<Page['locator']>) => locator.evaluate((element) => element === document.activeElement);

    await card.getByRole('button', { name: 'Reject' }).focus();
    await session.page.keyboard.press('Enter');
    await eventually(async () => expect(await focused(card.getByLabel('Reason'))).to.equal(true), 2_000);
    await card.getByRole('button', { name: 'Cancel' }).click();
    await eventually(async () => expect(await focused(card.getByRole('button', { name: 'Reject' }))).to.equal(true), 2_000);

    await card.getByRole('button', { name: 'Edit', exact: true }).focus();
    await session.page.keyboard.press('Enter');
    await eventually(async () => expect(await focused(card.getByLabel('New target ROAS (%)'))).to.equal(true), 2_000);
    await card.getByRole('button', { name: 'Cancel edit' }).click();
    await eventually(async () => expect(await focused(card.getByRole('button', { name: 'Edit', exact: true }))).to.equal(true), 2_000);
  });

  it('an action that changes after it was selected is unselected, so "Approve selected" never sends a version nobody looked at', async () => {
    const tenant = await svc.tenant('selection');
    const action = await propose(tenant);
    await openApprovals(tenant, tenant.keys.write, action.id);
    const card = actionCard(session.page, action.id);
    await card.getByRole('checkbox').check();
    await session.page.getByRole('button', { name: 'Approve selected (1)' }).waitFor();
    await approveAndReturnElsewhere(tenant, action.id);
    await card.getByText('Returned to the queue').waitFor({ timeout: 10_000 });
    await session.page.getByRole('button', { name: 'Approve selected (0)' }).waitFor();
    expect(await card.getByRole('checkbox').isChecked()).to.equal(false);
  });

  it('an edit made on a version that changed meanwhile is sent with that version: nothing is approved, and the page says so', async () => {
    const tenant = await svc.tenant('stale-edit');
    const action = await propose(tenant);
    const shown = await approvalOf(svc, tenant.keys.read, tenant.accounts.sandbox, action.id);
    await openApprovals(tenant, tenant.keys.write, action.id);
    const sent = recordDecisions(session.page);
    const card = actionCard(session.page, action.id);
    await card.getByRole('button', { name: 'Edit', exact: true }).click();
    const input = card.getByLabel('New target ROAS (%)');
    await input.fill(String(shown.params.target_roas_pct + 1));
    await approveAndReturnElsewhere(tenant, action.id);
    await card.getByText('Returned to the queue', { exact: true }).waitFor({ timeout: 10_000 });
    await card.getByText('This action changed since you opened this form').waitFor();
    await card.getByRole('button', { name: 'Approve edited' }).click();
    await session.page.getByText(/This action changed since the page showed it/).waitFor();
    expect(sent).to.have.length(1);
    expect(sent[0]!.body.expected_version).to.equal(shown.version);
    const now = await approvalOf(svc, tenant.keys.read, tenant.accounts.sandbox, action.id);
    expect(now.status).to.equal('returned');
    expect(now.params.target_roas_pct).to.equal(shown.params.target_roas_pct);
  });
});

