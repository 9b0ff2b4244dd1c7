import { expect } from 'chai';
import type { EventEnvelope } from '../../src/events/envelope.ts';
import type { FakeGeminiServer } from '../support/fake-gemini/fake-gemini-server.ts';
import { startGeminiTestService, type GeminiTestService } from '../support/gemini-service.ts';
import { startRun, waitForTerminalRun } from '../support/runs.ts';
import { startTestService, type TestService, type TestTenant } from '../support/test-service.ts';

/** A search term a platform could return: terminal escape and a bell. */
const HOSTILE_SEARCH_TERM = 'cheap \u001b[31mroses\u0007';

async function plantSearchTerm(svc: TestService, tenant: TestTenant): Promise<void> {
  const db = svc.service.infrastructure.database.db;
  await svc.request('GET', `/api/v1/accounts/${tenant.accounts.sandbox}/campaigns`, { key: tenant.keys.read }); // generates the sandbox
  const row = await db.selectFrom('sandbox_search_term_daily').selectAll().where('account_id', '=', tenant.accounts.sandbox).limit(1).executeTakeFirstOrThrow();
  await db
    .insertInto('sandbox_search_term_daily')
    .values({ ...row, search_term: HOSTILE_SEARCH_TERM, cost: '80.00', clicks: 60, impressions: 900, conversions: '0', conversion_value: '0' } as never)
    .execute();
}

async function recordedEventsOf(svc: TestService, runId: string): Promise<EventEnvelope[]> {
  const infra = svc.service.infrastructure;
  const events: EventEnvelope[] = [];
  for await (const { event } of infra.store.readFiltered(infra.subjects.all, 1)) {
    if (event.correlation_id === runId) events.push(event);
  }
  return events;
}

describe('model and platform output with characters no event may carry', function () {
  this.timeout(60_000);

  describe('Gemini (the real SDK against the scripted server)', () => {
    let setup: GeminiTestService;
    let svc: TestService;
    let tenant: TestTenant;
    let gemini: FakeGeminiServer;

    before(async () => {
      setup = await startGeminiTestService('sanitize-gemini');
      ({ svc, tenant, gemini } = setup);
    });
    after(async () => setup?.stop());

    it('records U+FFFD for U+0000, lone surrogates and C0 controls in text, tool arguments and tool output, and the run succeeds', async () => {
      await plantSearchTerm(svc, tenant);
      gemini.script([
        { functionCalls: [{ name: 'get_search_terms', args: { limit: 500, campaign_id: 'c\u0000\ud800' } }] },
        { functionCalls: [{ name: 'get_search_terms', args: { limit: 500 } }] },
        { text: 'Waste: \u0000 \ud800 \udc00 \u001b[0m done \ud83d\ude00\tok' },
      ]);
      const runId = await startRun(svc, tenant.keys.write, tenant.accounts.sandbox, 'Review my search terms');
      const run = await waitForTerminalRun(svc, tenant.keys.read, runId);
      expect(run.status, JSON.stringify(run.error)).to.equal('succeeded');
      expect(run.result.text).to.equal('Waste: \uFFFD \uFFFD \uFFFD \uFFFD[0m done \ud83d\ude00\tok');

      const events = await recordedEventsOf(svc, runId);
      const calls = events.filter((e) => e.type === 'ToolCalled').map((e) => e.data as { input: Record<string, unknown>; output: unknown });
      expect(calls).to.have.length(2);
      expect(calls[0]!.input.campaign_id).to.equal('c\uFFFD\uFFFD');
      const output = JSON.stringify(calls[1]!.output);
      expect(output).to.include('cheap \uFFFD[31mroses\uFFFD');
      expect(output).not.to.include('\\u001b');
      // And what the model was shown is the same sanitised text.
      expect(JSON.stringify(gemini.requests[2]!.contents)).to.include('cheap \uFFFD[31mroses\uFFFD');
    });
  });

  describe('the rules agent', () => {
    let svc: TestService;
    let tenant: TestTenant;

    before(async () => {
      svc = await startTestService('sanitize-rules');
      tenant = await svc.tenant();
    });
    after(async () => svc?.stop());

    it('reads a hostile search term, proposes on it and succeeds, recording it sanitised', async () => {
      await plantSearchTerm(svc, tenant);
      const runId = await startRun(svc, tenant.keys.write, tenant.accounts.sandbox, 'Find wasted spend on search terms');
      const run = await waitForTerminalRun(svc, tenant.keys.read, runId);
      expect(run.status, JSON.stringify(run.error)).to.equal('succeeded');
      const recorded = JSON.stringify(await recordedEventsOf(svc, runId));
      expect(recorded).to.include('cheap \uFFFD[31mroses\uFFFD');
      expect(recorded).not.to.match(/\\u00(0[0-8bcef]|1[0-9a-f])/);
    });
  });
});
