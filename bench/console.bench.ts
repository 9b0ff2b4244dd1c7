import { readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { gzipSync } from 'node:zlib';
import { DEFAULT_CONSOLE_DIST } from '../src/http/console/console-bundle.ts';
import { startRun, waitForTerminalRun } from '../test/support/runs.ts';
import { launchChromium, prepareConsole } from '../test/console/support/console-browser.ts';
import { startBenchService } from './support/bench-service.ts';
import { figure, note, now, percentile, section } from './support/report.ts';

/**
 * The approvals console (issue 12): how long from opening an action's approvals_url (in a
 * tab already signed in) until its list of actions is visible, in headless Chromium against
 * an in-process service on the shared machine; and what the page downloads, gzip.
 */
const ROUNDS = 15;
const STORAGE_NAME = 'adsagent.console.api-key';

export async function run(): Promise<void> {
  prepareConsole();
  assetSizes();
  const svc = await startBenchService('console');
  const browser = await launchChromium();
  try {
    const tenant = await svc.tenant('bench-console');
    const runId = await startRun(svc, tenant.keys.write, tenant.accounts.sandbox, 'Find wasted spend on search terms without conversions and add negative keywords.');
    const proposed = (await waitForTerminalRun(svc, tenant.keys.read, runId, 60_000)).result.actions.length as number;
    const url = `${svc.baseUrl}/console/accounts/${tenant.accounts.sandbox}/approvals`;
    section(`approvals_url → list visible (${proposed} actions), median of ${ROUNDS}`);

    const cold: number[] = [];
    for (let round = 0; round < ROUNDS; round += 1) {
      // A fresh profile each time: nothing cached, as when the link in a notification is first opened.
      const context = await browser.newContext();
      await context.addInitScript(([name, key]) => window.sessionStorage.setItem(name!, key!), [STORAGE_NAME, tenant.keys.read]);
      const page = await context.newPage();
      const t0 = now();
      await page.goto(url, { waitUntil: 'commit' });
      await page.locator('article[data-action-id]').first().waitFor({ state: 'visible' });
      cold.push(now() - t0);
      await context.close();
    }
    figure('cold (empty cache) p50', percentile(cold, 50), 'ms', `p90 ${percentile(cold, 90).toFixed(0)} ms`);

    const warm: number[] = [];
    const context = await browser.newContext();
    await context.addInitScript(([name, key]) => window.sessionStorage.setItem(name!, key!), [STORAGE_NAME, tenant.keys.read]);
    const page = await context.newPage();
    await page.goto(url);
    await page.locator('article[data-action-id]').first().waitFor();
    for (let round = 0; round < ROUNDS; round += 1) {
      await page.goto('about:blank');
      const t0 = now();
      await page.goto(url, { waitUntil: 'commit' });
      await page.locator('article[data-action-id]').first().waitFor({ state: 'visible' });
      warm.push(now() - t0);
    }
    await context.close();
    figure('warm (assets cached) p50', percentile(warm, 50), 'ms', `p90 ${percentile(warm, 90).toFixed(0)} ms`);
    note('Includes the page, its script and style, GET /accounts, the scope probe and GET .../approvals; the machine is shared.');
  } finally {
    await browser.close();
    await svc.stop();
  }
}

/** Bytes of each built file, raw and as served (gzip level 9 when that is smaller and the file is 512 bytes or more). */
function assetSizes(): void {
  section('console assets (console/dist), as served');
  let raw = 0;
  let gz = 0;
  const files = (dir: string): string[] =>
    readdirSync(dir, { withFileTypes: true }).flatMap((entry) => (entry.isDirectory() ? files(join(dir, entry.name)) : [join(dir, entry.name)]));
  for (const file of files(DEFAULT_CONSOLE_DIST)) {
    const body = readFileSync(file);
    // The server sends files under 512 bytes (index.html) as they are.
    const zipped = body.length < 512 ? body.length : Math.min(body.length, gzipSync(body, { level: 9 }).length);
    raw += body.length;
    gz += zipped;
    figure(file.slice(DEFAULT_CONSOLE_DIST.length), zipped / 1024, 'KiB served', `${(body.length / 1024).toFixed(1)} KiB raw`);
  }
  figure('total', gz / 1024, 'KiB served (gzip)', `${(raw / 1024).toFixed(1)} KiB raw`);
}
