import { expect } from 'chai';
import { randomUUID } from 'node:crypto';
import type { UnsealedEvent } from '../../src/events/envelope.ts';
import { ChainedAppender } from '../support/chained-appender.ts';
import { startRun, waitForTerminalRun } from '../support/runs.ts';
import { startTestService, type TestService, type TestTenant } from '../support/test-service.ts';
import { api } from '../safe-apply/helpers.ts';
import { streams } from '../../src/event-store/subjects.ts';

const SCAN_BUDGET = 10;
const PAGE_BYTES = 65_536;

/** docs/api.md, "History": bounded pages, run_id reading the run's own subjects, corrupt events marked. */
describe('history: scan budget, page size cap, run_id subjects and corrupt events', function () {
  this.timeout(90_000);
  let svc: TestService;
  let tenant: TestTenant;
  let account: string;
  let runId: string;
  let noiseRun: string;
  const corruptSeqs: number[] = [];

  const history = (query: string) => api(svc, 'GET', `/api/v1/accounts/${account}/history${query ? `?${query}` : ''}`, { key: tenant.keys.read });

  /** Walks every page from the start; returns the pages. */
  async function walk(query: string): Promise<any[]> {
    const pages: any[] = [];
    let cursor: string | null = null;
    do {
      const page = await history(`${query}${cursor === null ? '' : `&cursor=${cursor}`}`);
      expect(page.status, page.text).to.equal(200);
      pages.push(page);
      cursor = page.body.next_cursor;
      expect(pages.length, 'pages').to.be.below(500);
    } while (cursor !== null);
    return pages;
  }

  const toolCalled = (index: number, outputBytes: number, onAccount = account, ofRun = noiseRun): UnsealedEvent => ({
    id: randomUUID(),
    type: 'ToolCalled',
    version: 1,
    time: new Date().toISOString(),
    workspace_id: tenant.workspaceId,
    account_id: onAccount,
    aggregate: { type: 'run', id: ofRun },
    actor: { kind: 'worker', id: 'test' },
    correlation_id: ofRun,
    data: { run_id: ofRun, index, name: 'get_search_terms', input: {}, ok: true, output: { blob: 'x'.repeat(outputBytes) }, duration_ms: 1 },
  });

  before(async () => {
    svc = await startTestService('histbounds', { ROLES: 'http,projectors,agent-worker', HISTORY_SCAN_BUDGET: String(SCAN_BUDGET), HISTORY_MAX_PAGE_BYTES: String(PAGE_BYTES) });
    tenant = await svc.tenant('hb');
    account = tenant.accounts.sandbox;
    runId = await startRun(svc, tenant.keys.write, account, 'Find wasted spend and propose negative keywords');
    const run = await waitForTerminalRun(svc, tenant.keys.read, runId, 30_000);
    expect(run.status).to.equal('succeeded');
    // After the run: 60 events of another (made-up) run on the same account, some of them 20 kB.
    noiseRun = randomUUID();
    const appender = new ChainedAppender(svc.service.infrastructure);
    const subject = svc.service.infrastructure.subjects.forAggregate(streams.run(tenant.workspaceId, account, noiseRun));
    for (let i = 1; i <= 60; i++) await appender.append(subject, toolCalled(i, i % 10 === 0 ? 20_000 : 100));
    // Corrupt messages on a subject of the account, published around the store (as anyone with NATS access could).
    const { js, subjects } = svc.service.infrastructure;
    const corruptSubject = subjects.forAggregate(streams.run(tenant.workspaceId, account, randomUUID()));
    const valid = toolCalled(61, 10);
    const payloads = [
      '{not json',
      JSON.stringify({ ...valid, data: { nonsense: true } }),
      JSON.stringify({ ...valid, type: 'NoSuchEvent' }),
      JSON.stringify({ ...valid, workspace_id: 'another-workspace', prev_hash: '0'.repeat(64), hash: '0'.repeat(64) }),
    ];
    for (const payload of payloads) corruptSeqs.push((await js.publish(corruptSubject, payload)).seq);
  });

  after(async () => {
    await svc?.stop();
  });

  it('reads at most the scan budget per request: a short page still has a next_cursor', async () => {
    const first = await history('limit=500');
    expect(first.status, first.text).to.equal(200);
    expect(first.body.data.length).to.be.at.most(SCAN_BUDGET);
    expect(first.body.next_cursor).to.equal(String(first.body.data.at(-1).seq));
  });

  let everything: any[] = [];
  it('walks every event exactly once, in order, across budget- and size-cut pages, corrupt ones marked with their seq', async () => {
    const pages = await walk('limit=500');
    everything = pages.flatMap((p) => p.body.data);
    const seqs = everything.map((e) => e.seq as number);
    expect(new Set(seqs).size).to.equal(seqs.length);
    expect(seqs).to.deep.equal([...seqs].sort((a, b) => a - b));
    expect(everything.filter((e) => e.correlation_id === noiseRun)).to.have.length(60);
    expect(everything.filter((e) => e.correlation_id === runId && e.type === 'RunSucceeded')).to.have.length(1);
    const corrupt = everything.filter((e) => e.corrupt === true);
    expect(corrupt.map((e) => e.seq)).to.deep.equal(corruptSeqs);
    for (const entry of corrupt) {
      expect(Object.keys(entry).sort()).to.deep.equal(['code', 'corrupt', 'error', 'seq', 'subject']);
      expect(entry.error).to.be.a('string').and.not.equal('');
    }
    expect(corrupt.map((e) => e.code)).to.deep.include.members(['not-json', 'subject-mismatch']);
    // The last page is the one that reached the end.
    expect(pages.at(-1)!.body.next_cursor).to.equal(null);
  });

  it('never answers more than HISTORY_MAX_PAGE_BYTES, unless one event alone is bigger', async () => {
    const pages = await walk('limit=500');
    let cutBySize = 0;
    for (const page of pages) {
      // The body as sent, the list around the entries included.
      const bytes = Buffer.byteLength(page.text);
      if (page.body.data.length > 1) expect(bytes, `page of ${page.body.data.length}`).to.be.at.most(PAGE_BYTES);
      if (page.body.data.length < SCAN_BUDGET && page.body.next_cursor !== null) cutBySize++;
    }
    expect(cutBySize, 'pages cut short by the size cap').to.be.greaterThan(0);
  });

  it('counts the list around the entries: two entries that fit the cap but not with the list end the page after the first', async () => {
    // On the second account, from a cursor just before the first event: the page holds exactly these three.
    const onAccount = tenant.accounts.sandbox2;
    const ofRun = randomUUID();
    const infra = svc.service.infrastructure;
    const subject = infra.subjects.forAggregate(streams.run(tenant.workspaceId, onAccount, ofRun));
    const appender = new ChainedAppender(infra);
    const pageOf = (cursor: number) => api(svc, 'GET', `/api/v1/accounts/${onAccount}/history?limit=10&cursor=${cursor}`, { key: tenant.keys.read });
    const entryBytes = (entry: unknown) => Buffer.byteLength(JSON.stringify(entry)) + 1;
    const first = await appender.append(subject, toolCalled(1, 100, onAccount, ofRun));
    const firstBytes = entryBytes((await pageOf(first.seq - 1)).body.data[0]);
    // Sized so that the two entries together are 10 bytes under the cap.
    const second = await appender.append(subject, toolCalled(2, 100 + PAGE_BYTES - 10 - 2 * firstBytes, onAccount, ofRun));
    await appender.append(subject, toolCalled(3, 100, onAccount, ofRun));
    const secondBytes = entryBytes((await pageOf(second.seq - 1)).body.data[0]);
    expect(firstBytes + secondBytes, 'the entries alone fit').to.be.within(PAGE_BYTES - 20, PAGE_BYTES);

    const page = await pageOf(first.seq - 1);
    expect(Buffer.byteLength(page.text), 'the body').to.be.at.most(PAGE_BYTES);
    expect(page.body.data.map((entry: { seq: number }) => entry.seq)).to.deep.equal([first.seq]);
    expect(page.body.next_cursor).to.equal(String(first.seq));
  });

  it("run_id reads the run's own subjects: the 64 later events of the account are not scanned", async () => {
    const pages = await walk(`run_id=${runId}&limit=500`);
    const events = pages.flatMap((p) => p.body.data);
    const expected = everything.filter((e) => e.correlation_id === runId).map((e) => e.seq);
    expect(events.map((e) => e.seq)).to.deep.equal(expected);
    // Scanning the whole account from the run on would read the 64 later events too, SCAN_BUDGET
    // a page: at least 6 more pages, empty ones. Reading the run's subjects, every page carries events.
    for (const page of pages) expect(page.body.data.length, 'events on each page').to.be.greaterThan(0);
    expect(pages.length).to.be.at.most(expected.length);
  });

  it('answers 422 to a cursor that is not a sequence (1e21, 2^60)', async () => {
    for (const cursor of ['1e21', '1152921504606846976', '']) {
      const page = await history(`cursor=${cursor}`);
      expect(page.status, cursor).to.equal(422);
    }
  });
});
