import { expect } from 'chai';
import { eventually } from '../support/eventually.ts';
import { startTestService, type TestService, type TestTenant } from '../support/test-service.ts';
import { actionCard, signIn, useConsoleBrowser } from './support/console-browser.ts';
import { servedApproval, serveApprovals, type ServedApproval } from './support/served-approvals.ts';

/**
 * The console on accounts too large to read at once and when reads fail: what is waiting is
 * always listed, a failed read is said and tried again, and no page gives up for good.
 * Headless Chromium against a real service (HTTP and projectors); the lists and runs too large
 * or too broken to make for real are answered by the test (page.route).
 */
describe('console: large accounts and failing reads in a browser', function () {
  this.timeout(120_000);
  const session = useConsoleBrowser();
  let svc: TestService;
  let tenant: TestTenant;

  before(async () => {
    svc = await startTestService('console-resilience', { ROLES: 'http,projectors' });
    tenant = await svc.tenant('resilience');
  });
  after(async () => {
    await svc?.stop();
  });

  it('lists every waiting action first on an account with more than 2,000 actions, says the decided ones are not all listed, and reads a bounded number of pages', async () => {
    const account = tenant.accounts.sandbox;
    // 2,150 actions, oldest first (11 pages of 200): decided ones, with two waiting early on,
    // and the newest one, waiting for a decision.
    const actions: ServedApproval[] = [];
    for (let n = 1; n <= 2_150; n += 1) {
      const status = n === 5 ? 'queued' : n === 9 ? 'returned' : n === 2_150 ? 'queued' : n % 7 === 0 ? 'rejected' : 'applied';
      actions.push(servedApproval(account, n, { status, summary: n === 2_150 ? 'The newest proposal, waiting for a decision' : `Add 1 negative keyword(s) to "Campaign ${n}"` }));
    }
    const served = await serveApprovals(session.page, () => actions);
    await signIn(session.page, `${svc.baseUrl}/console/accounts/${account}/approvals`, tenant.keys.write);

    const newest = actionCard(session.page, actions.at(-1)!.id);
    await newest.getByRole('heading', { name: 'The newest proposal, waiting for a decision' }).waitFor();
    await newest.getByText('Waiting for approval').waitFor();
    // Waiting first (oldest first among them), then the decided ones.
    const shownIds = await session.page.locator('article[data-action-id]').evaluateAll((cards) => cards.map((card) => card.getAttribute('data-action-id')));
    expect(shownIds.slice(0, 3)).to.deep.equal([actions[4]!.id, actions[8]!.id, actions[2_149]!.id]);
    expect(shownIds.length).to.be.below(actions.length);
    const notice = session.page.getByText('This account has more actions than the page shows.');
    await notice.waitFor();
    expect(await notice.textContent()).to.include('Every action waiting for a decision is listed, first; of the decided ones, only the newest 400.');
    // The decided ones shown are the newest: a decision just taken stays in view, the oldest ones leave it.
    expect(shownIds).to.include(actions[2_148]!.id).and.not.include(actions[0]!.id);
    // The page still decides: the newest action can be selected and approved.
    expect(await newest.getByRole('checkbox').isEnabled()).to.equal(true);

    // A poll reads at most two pages of every status, plus what is waiting; never the whole account.
    await eventually(() => expect(served.requests.filter((query) => query.get('status') === 'queued').length).to.be.at.least(2), 10_000, 100);
    const unfiltered = served.requests.filter((query) => !query.get('status'));
    expect(unfiltered.every((query) => query.get('order') === 'newest_first')).to.equal(true);
    expect(Math.min(...unfiltered.map((query) => Number(query.get('cursor') ?? '1e9')))).to.equal(2_150 - 200 + 1);
  });

  it('a run read that fails once: keeps showing the run, says so, and reads it again', async () => {
    const runId = '0190aaaa-0000-7000-8000-000000000001';
    let reads = 0;
    let failNext = false;
    let status = 'running';
    // No event stream: the page polls the run, every second (its Retry-After).
    await session.page.route(`**/api/v1/runs/${runId}/events`, (route) => route.fulfill({ status: 503, headers: { 'retry-after': '1' }, body: '' }));
    await session.page.route(`**/api/v1/runs/${runId}`, (route) => {
      reads += 1;
      if (failNext) {
        failNext = false;
        return route.abort('connectionreset');
      }
      return route.fulfill({
        status: 200,
        contentType: 'application/json',
        headers: { 'retry-after': '1' },
        body: JSON.stringify({
          object: 'run', id: runId, status, project_id: tenant.accounts.sandbox, auto_apply: false, scope: 'account',
          created_at: '2025-01-01T00:00:00.000Z', started_at: '2025-01-01T00:00:01.000Z', finished_at: status === 'running' ? null : '2025-01-01T00:00:09.000Z',
          duration_ms: status === 'running' ? null : 8_000, agent: { kind: 'rules', model: 'rules' },
          result: status === 'running' ? null : { text: 'Done.', truncated: false, actions: [], tool_calls: [], usage: null }, error: null,
        }),
      });
    });
    await signIn(session.page, `${svc.baseUrl}/console/runs/${runId}`, tenant.keys.read);
    const badge = session.page.getByTestId('run-status');
    await badge.filter({ hasText: 'running' }).waitFor();
    await eventually(() => expect(reads).to.be.at.least(2), 10_000, 50);

    failNext = true;
    const note = session.page.getByText(/The run could not be read again \(.+\); it is shown as last read\. Trying again in \d+ s\./);
    await note.waitFor({ timeout: 10_000 });
    const readsWhenFailed = reads;
    expect(await badge.textContent()).to.equal('running');
    expect(await session.page.getByRole('heading', { name: `Run ${runId}` }).isVisible()).to.equal(true);

    // The next read comes by itself; the note goes once it succeeds, and the run goes on being followed.
    await note.waitFor({ state: 'detached', timeout: 10_000 });
    expect(reads).to.be.above(readsWhenFailed);
    status = 'succeeded';
    await badge.filter({ hasText: 'succeeded' }).waitFor({ timeout: 10_000 });
    await session.page.getByText('Done.').waitFor();
  });

  it('the accounts page says it tries again while the API is unreachable, and lists the accounts once it is back', async () => {
    await signIn(session.page, `${svc.baseUrl}/console`, tenant.keys.read);
    await session.page.getByRole('link', { name: 'resilience sandbox', exact: true }).waitFor();
    let down = true;
    let reads = 0;
    await session.page.route('**/api/v1/accounts', (route) => {
      reads += 1;
      return down ? route.abort('connectionrefused') : route.fallback();
    });
    await session.page.reload();
    const alert = session.page.locator('main [role=alert]');
    await alert.filter({ hasText: 'The accounts could not be read' }).waitFor();
    expect(await alert.textContent()).to.match(/The page tries again by itself in \d+ s\./);
    expect(await session.page.getByRole('button', { name: 'Try again now' }).isVisible()).to.equal(true);
    await eventually(() => expect(reads).to.be.at.least(2), 10_000, 50);

    down = false;
    await session.page.getByRole('link', { name: 'resilience sandbox', exact: true }).waitFor({ timeout: 15_000 });
    expect(await alert.count()).to.equal(0);
  });

  it('the accounts page offers "Try again" after a failure that does not pass by itself, and reads again when pressed', async () => {
    await signIn(session.page, `${svc.baseUrl}/console`, tenant.keys.read);
    await session.page.getByRole('link', { name: 'resilience sandbox', exact: true }).waitFor();
    let refuse = true;
    await session.page.route('**/api/v1/accounts', (route) => refuse
      ? route.fulfill({ status: 403, contentType: 'application/problem+json', body: JSON.stringify({ type: 'http://api.test/problems/forbidden', title: 'Forbidden', status: 403, detail: 'Not now.' }) })
      : route.fallback());
    await session.page.reload();
    const alert = session.page.locator('main [role=alert]');
    await alert.filter({ hasText: 'The accounts could not be read: Not now.' }).waitFor();
    expect(await alert.textContent()).to.include('Use "Try again" to read them again.');
    refuse = false;
    await session.page.getByRole('button', { name: 'Try again', exact: true }).click();
    await session.page.getByRole('link', { name: 'resilience sandbox', exact: true }).waitFor();
  });
});
