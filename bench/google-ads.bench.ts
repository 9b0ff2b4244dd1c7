import { ToolRegistry } from '../src/agent/tools/tool-registry.ts';
import { createWorkspace } from '../src/operator/operator-commands.ts';
import { createPlatform } from '../src/platform/create-platform.ts';
import { FakeGoogleAds, FAKE_DEVELOPER_TOKEN } from '../test/support/fake-google-ads/fake-google-ads-server.ts';
import { connectFakeAccount, googleAdsEnv } from '../test/support/google-ads.ts';
import { startBenchService } from './support/bench-service.ts';
import { compareLatency, figure, note, section } from './support/report.ts';

/**
 * Google Ads adapter benchmark (issue 11): an agent read tool's latency through the real
 * adapter (OAuth token cache, REST transport, GAQL, mapping) against the local fake of the
 * Google Ads API, beside (a) the fake's own handling time for the same requests and (b) a
 * bare `fetch` of the same search request, so the adapter's own overhead is visible.
 * Each tool call is timed with the tool registry's sanitising wrapper, as a run calls it.
 */
const SAMPLES = 300;
const WARMUP = 20;
const TOOLS = [
  { name: 'get_search_terms', args: { limit: 50 } },
  { name: 'list_campaigns', args: {} },
] as const;

export async function run(): Promise<void> {
  const fake = await new FakeGoogleAds().start();
  const svc = await startBenchService('gads', { ROLES: 'projectors', ...googleAdsEnv(fake) });
  try {
    const infra = svc.service.infrastructure;
    const workspaceId = (await createWorkspace(infra, 'bench')).value.id;
    const { ref } = await connectFakeAccount(infra, fake, workspaceId);
    const platform = createPlatform(infra.database.db, svc.config);
    const tools = ToolRegistry.forScope('read');
    const context = { platform, account: ref, today: new Date(), signal: new AbortController().signal, propose: () => Promise.reject(new Error('read only')) };
    await platform.listCampaigns(ref); // token fetched once, as in a warm worker
    const exchangesBefore = fake.tokenExchanges;

    for (const { name, args } of TOOLS) {
      const tool = tools.get(name)!;
      const toolMs: number[] = [];
      const fakeMs: number[] = [];
      let requestsPerCall = 0;
      for (let i = 0; i < WARMUP + SAMPLES; i++) {
        const before = fake.requests.length;
        const t0 = performance.now();
        await tool.run(args, context);
        const elapsed = performance.now() - t0;
        const made = fake.requests.slice(before);
        if (i < WARMUP) continue;
        toolMs.push(elapsed);
        fakeMs.push(made.reduce((sum, r) => sum + r.handlingMs, 0));
        requestsPerCall = made.length;
      }
      section(`${name}: tool call through the adapter vs the fake's own handling time (${requestsPerCall} API request(s) per call)`);
      compareLatency(`${name} tool call`, toolMs, 'fake handling', fakeMs, '(adapter+HTTP / fake alone)');
    }

    // The same search request with a bare fetch: HTTP round trip + fake, no adapter.
    const first = fake.apiRequests().find((r) => String((r.body as { query?: string }).query).includes('FROM search_term_view'))!;
    const token = String(first.headers.authorization);
    const bare: number[] = [];
    const adapter: number[] = [];
    const range = { from: new Date(Date.now() - 30 * 86_400_000).toISOString().slice(0, 10), to: new Date(Date.now() - 86_400_000).toISOString().slice(0, 10) };
    for (let i = 0; i < WARMUP + SAMPLES; i++) {
      const t0 = performance.now();
      const response = await fetch(`${fake.baseUrl}${first.path}`, {
        method: 'POST',
        headers: { authorization: token, 'developer-token': FAKE_DEVELOPER_TOKEN, 'content-type': 'application/json' },
        body: JSON.stringify(first.body),
      });
      await response.json();
      const t1 = performance.now();
      await platform.searchTerms(ref, range, { limit: 50 });
      const t2 = performance.now();
      if (i < WARMUP) continue;
      bare.push(t1 - t0);
      adapter.push(t2 - t1);
    }
    section('searchTerms through the adapter vs the same googleAds:search request with a bare fetch (interleaved)');
    compareLatency('adapter searchTerms', adapter, 'bare fetch', bare, '(adapter / bare)');
    figure('token exchanges during the benchmark', fake.tokenExchanges - exchangesBefore, 'req', '(cached access token: 0 expected)');
    note('fake: node:http on 127.0.0.1, GAQL over 13 seeded search terms x 30 days; no added latency');
  } finally {
    await svc.stop();
    await fake.stop();
  }
}

if (import.meta.url === `file://${process.argv[1]}`) await run();
