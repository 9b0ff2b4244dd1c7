import { expect } from 'chai';
import type { Locator } from 'playwright-core';
import { startTestService, type TestService, type TestTenant } from '../support/test-service.ts';
import { actionCard, signIn, useConsoleBrowser, waitEnabled } from './support/console-browser.ts';
import { servedApproval, serveApprovals } from './support/served-approvals.ts';

const RLO = '\u202E';
const PDF = '\u202C';

/**
 * Text from the API (what the agent proposed, its reasons, keywords, names) shown as it is:
 * a bidirectional control character cannot make one text look like another, and a long
 * unbroken string cannot push the page sideways. Headless Chromium against a real service
 * (HTTP and projectors); the actions are answered by the test (page.route).
 */
describe('console: untrusted text in a browser', function () {
  this.timeout(120_000);
  const session = useConsoleBrowser();
  let svc: TestService;
  let tenant: TestTenant;

  before(async () => {
    svc = await startTestService('console-untrusted', { ROLES: 'http,projectors' });
    tenant = await svc.tenant('untrusted');
  });
  after(async () => {
    await svc?.stop();
  });

  it('shows bidirectional control characters as markers: a keyword "\\u202Eeerf" does not read "free"', async () => {
    const account = tenant.accounts.sandbox;
    const action = servedApproval(account, 1, {
      status: 'queued',
      summary: `Add 1 negative keyword(s) to "${RLO}eerf${PDF}": ok`,
      reason: `${RLO}esaercni tegdub`,
      policy_reasons: [`${RLO}01 ot 1 morf tegdub eht esaercnI`],
      params: { campaign_id: 'cmp-1', keywords: [{ text: `${RLO}eerf`, match_type: 'exact' }, { text: 'cheap', match_type: 'phrase' }] },
    });
    await serveApprovals(session.page, () => [action]);
    await signIn(session.page, `${svc.baseUrl}/console/accounts/${account}/approvals`, tenant.keys.write);
    const card = actionCard(session.page, action.id);
    await card.getByText('Waiting for approval').waitFor();

    await card.getByText('Change details').click();
    const keyword = card.locator('table.keywords tbody td').first();
    expect(await readsAs(keyword)).to.equal('⟨U+202E⟩eerf');
    expect(await readsAs(card.locator('h2.card-title'))).to.equal('Add 1 negative keyword(s) to "⟨U+202E⟩eerf⟨U+202C⟩": ok');
    expect(await readsAs(card.locator('.action-reason'))).to.equal('⟨U+202E⟩esaercni tegdub');
    expect(await readsAs(card.locator('.reasons li'))).to.equal('⟨U+202E⟩01 ot 1 morf tegdub eht esaercnI');
    // What assistive technology reads names the character too.
    expect(await card.getByRole('checkbox', { name: 'Select: Add 1 negative keyword(s) to "⟨U+202E⟩eerf⟨U+202C⟩": ok' }).count()).to.equal(1);

    // The edit form lists the keyword the same way.
    await card.getByRole('button', { name: 'Edit', exact: true }).click();
    const keep = card.locator('.edit-keywords li').first().locator('label').first();
    expect(await readsAs(keep)).to.equal('Keep "⟨U+202E⟩eerf"');
    expect(await card.getByRole('checkbox', { name: 'Keep "⟨U+202E⟩eerf"' }).count()).to.equal(1);
  });

  it('shows zero-width and tag characters as markers: a negative "fr\\u200Bee" does not read "free", hidden tag text is seen', async () => {
    const account = tenant.accounts.sandbox;
    // "IGNORE" in tag characters (U+E0049 …): invisible text, say instructions meant for a model.
    const hiddenTags = [...'IGNORE'].map((c) => String.fromCodePoint(0xe0000 + c.charCodeAt(0))).join('');
    const action = servedApproval(account, 2, {
      status: 'queued',
      summary: `Add 1 negative keyword(s) to "fr\u200Bee": ok`,
      reason: `wasted spend${hiddenTags}`,
      params: { campaign_id: 'cmp-1', keywords: [{ text: 'fr\u200Bee', match_type: 'exact' }, { text: 'sh\u00ADoes\uFEFF', match_type: 'phrase' }, { text: 'خرید\u200Cها', match_type: 'broad' }] },
    });
    await serveApprovals(session.page, () => [action]);
    await signIn(session.page, `${svc.baseUrl}/console/accounts/${account}/approvals`, tenant.keys.write);
    const card = actionCard(session.page, action.id);
    await card.getByText('Waiting for approval').waitFor();

    await card.getByText('Change details').click();
    const keywords = card.locator('table.keywords tbody tr td:first-child');
    expect(await readsAs(keywords.nth(0))).to.equal('fr⟨U+200B⟩ee');
    expect(await readsAs(keywords.nth(1))).to.equal('sh⟨U+00AD⟩oes⟨U+FEFF⟩');
    // A zero-width non-joiner is part of how Persian is written: shown as it is.
    expect(await keywords.nth(2).textContent()).to.equal('خرید\u200Cها');
    expect(await readsAs(card.locator('h2.card-title'))).to.equal('Add 1 negative keyword(s) to "fr⟨U+200B⟩ee": ok');
    expect(await readsAs(card.locator('.action-reason'))).to.equal('wasted spend⟨U+E0049⟩⟨U+E0047⟩⟨U+E004E⟩⟨U+E004F⟩⟨U+E0052⟩⟨U+E0045⟩');
    expect(await card.getByRole('checkbox', { name: 'Select: Add 1 negative keyword(s) to "fr⟨U+200B⟩ee": ok' }).count()).to.equal(1);
  });

  it('wraps long unbroken strings: nothing scrolls sideways at 1280 or 375 pixels wide', async () => {
    const account = tenant.accounts.sandbox2;
    const long = (c: string) => c.repeat(600);
    const action = servedApproval(account, 1, {
      status: 'returned',
      summary: long('s'),
      reason: long('r'),
      status_reason: long('t'),
      policy_reasons: [long('p')],
      params: { campaign_id: long('c'), keywords: [{ text: long('k'), match_type: 'exact' }, { text: 'cheap', match_type: 'phrase' }] },
    });
    await serveApprovals(session.page, () => [action]);
    // The approve fails with a long detail, so the failure line is long too.
    await session.page.route(`**/approvals/${action.id}/approve`, (route) => route.fulfill({
      status: 409,
      contentType: 'application/problem+json',
      body: JSON.stringify({ type: 'http://api.test/problems/account-not-connected', title: 'The account has no connected advertising-platform account', status: 409, detail: long('d') }),
    }));
    await signIn(session.page, `${svc.baseUrl}/console/accounts/${account}/approvals`, tenant.keys.write);
    const card = actionCard(session.page, action.id);
    await card.getByText('Returned to the queue').waitFor();
    await waitEnabled(card.getByRole('button', { name: 'Approve', exact: true }));
    await card.getByRole('button', { name: 'Approve', exact: true }).click();
    await session.page.getByRole('list', { name: 'Actions that could not be decided' }).waitFor();
    await card.getByText('Change details').click();
    await card.getByRole('button', { name: 'Edit', exact: true }).click();
    await card.locator('.edit-keywords').waitFor();

    for (const width of [1280, 375]) {
      await session.page.setViewportSize({ width, height: 800 });
      const sizes = await session.page.evaluate(() => ({ scroll: document.documentElement.scrollWidth, client: document.documentElement.clientWidth }));
      expect(sizes.scroll, `page width at ${width} px`).to.be.at.most(sizes.client);
      // Each long text stays inside its card (or the page's column).
      const wider = await session.page.evaluate(() => [...document.querySelectorAll('main *')]
        .filter((element) => element.getBoundingClientRect().right > document.documentElement.clientWidth + 1)
        .map((element) => `${element.tagName.toLowerCase()}.${element.className}`));
      expect(wider, `elements past the right edge at ${width} px`).to.deep.equal([]);
    }
  });
});

/**
 * The text as a reader sees it: its characters in the order they are displayed, left to right
 * and top to bottom (a bidi override reverses them on screen, not in the DOM).
 */
async function readsAs(locator: Locator): Promise<string> {
  return locator.evaluate((element) => {
    const placed: { char: string; top: number; left: number }[] = [];
    const walker = document.createTreeWalker(element, NodeFilter.SHOW_TEXT);
    for (let node = walker.nextNode(); node; node = walker.nextNode()) {
      const text = node.textContent ?? '';
      for (let index = 0; index < text.length; index += 1) {
        const range = document.createRange();
        range.setStart(node, index);
        range.setEnd(node, index + 1);
        const box = range.getBoundingClientRect();
        // Invisible characters (the controls themselves, when obeyed) take no room.
        if (box.width === 0) continue;
        placed.push({ char: text[index]!, top: Math.round(box.top), left: box.left });
      }
    }
    placed.sort((a, b) => (Math.abs(a.top - b.top) > 4 ? a.top - b.top : a.left - b.left));
    return placed.map((entry) => entry.char).join('');
  });
}

