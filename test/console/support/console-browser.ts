import { execFileSync } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { chromium, type Browser, type BrowserContext, type Locator, type Page } from 'playwright-core';

const ROOT = fileURLToPath(new URL('../../../', import.meta.url));
export const CHROMIUM_PATH = process.env.CHROMIUM_PATH ?? '/usr/bin/chromium';

/** Installs chromium when missing and builds the console when its sources changed. */
export function prepareConsole(): void {
  execFileSync('bash', [`${ROOT}deploy/ensure-chromium.sh`], { stdio: 'inherit' });
  execFileSync('bash', [`${ROOT}deploy/build-console.sh`], { stdio: 'inherit', cwd: ROOT });
}

/** Debian's headless chromium through playwright-core (browser downloads are not possible here). */
export async function launchChromium(): Promise<Browser> {
  return chromium.launch({
    executablePath: CHROMIUM_PATH,
    headless: true,
    // Tests run as root in a container, where chromium's sandbox cannot start.
    args: ['--no-sandbox', '--disable-dev-shm-usage', '--disable-gpu'],
  });
}

/** A fresh browser profile (empty sessionStorage) with a phone-width viewport when asked. */
export async function newConsoleContext(browser: Browser, options: { phone?: boolean } = {}): Promise<BrowserContext> {
  return browser.newContext(options.phone ? { viewport: { width: 375, height: 740 }, isMobile: true, hasTouch: true } : { viewport: { width: 1280, height: 900 } });
}

/** Opens `url` and signs in with `key` on the form the console shows first. */
export async function signIn(page: Page, url: string, key: string): Promise<void> {
  await page.goto(url);
  await page.getByLabel('API key').fill(key);
  await page.getByRole('button', { name: 'Sign in' }).click();
  await page.getByRole('button', { name: 'Sign out' }).waitFor();
}

/** The card of the action with this id on the approvals page. */
export function actionCard(page: Page, actionId: string) {
  return page.locator(`article[data-action-id="${actionId}"]`);
}

export const SCREENSHOT_DIR = `${ROOT}.adsagent/screenshots`;

export interface ConsoleSession {
  readonly browser: Browser;
  /** A fresh profile (empty sessionStorage) for each test. */
  readonly context: BrowserContext;
  readonly page: Page;
}

/**
 * Registers the hooks every console test file needs: the console built and chromium launched
 * once for the describe block, a fresh profile and page for each test. Call it first in the
 * describe block, so its hooks run before the file's own.
 *
 * @example
 * ```ts
 * const session = useConsoleBrowser();
 * it('signs in', async () => signIn(session.page, url, key));
 * ```
 */
export function useConsoleBrowser(): ConsoleSession {
  const session = {} as { browser: Browser; context: BrowserContext; page: Page };
  before(async () => {
    prepareConsole();
    session.browser = await launchChromium();
  });
  after(async () => {
    await session.browser?.close();
  });
  beforeEach(async () => {
    session.context = await newConsoleContext(session.browser);
    session.page = await session.context.newPage();
  });
  afterEach(async () => {
    await session.context?.close();
  });
  return session;
}

/** Waits until the button is enabled (Playwright's waitFor has no "enabled" state). */
export async function waitEnabled(locator: Locator, timeoutMs = 10_000): Promise<void> {
  const until = Date.now() + timeoutMs;
  await locator.waitFor({ timeout: timeoutMs });
  while (await locator.isDisabled()) {
    if (Date.now() > until) throw new Error('the button stayed disabled');
    await new Promise((resolve) => setTimeout(resolve, 50));
  }
}
