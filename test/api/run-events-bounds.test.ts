import { expect } from 'chai';
import { revokeKey } from '../../src/operator/operator-commands.ts';
import type { AgentWorker } from '../../src/workers/agent-worker.ts';
import { startAgentWorker } from '../support/agent-worker.ts';
import { eventually } from '../support/eventually.ts';
import { startRun, waitForTerminalRun } from '../support/runs.ts';
import { startTestService, type TestService, type TestTenant } from '../support/test-service.ts';
import { streams } from '../../src/event-store/subjects.ts';

const LIFETIME_MS = 2000;

/** An open SSE response read as it arrives. */
class OpenStream {
  text = '';
  ended = false;
  private readonly done: Promise<void>;

  readonly response: Response;
  private readonly controller: AbortController;

  constructor(
    response: Response,
    controller: AbortController,
  ) {
    this.response = response;
    this.controller = controller;
    const reader = response.body!.getReader();
    const decoder = new TextDecoder();
    this.done = (async () => {
      try {
        for (;;) {
          const { value, done } = await reader.read();
          if (done) break;
          this.text += decoder.decode(value, { stream: true });
        }
      } catch {
        // Aborted by the test.
      } finally {
        this.ended = true;
      }
    })();
  }

  /** Resolves when the server has ended the stream; fails after `timeoutMs`. */
  async end(timeoutMs: number): Promise<string> {
    await eventually(() => expect(this.ended, 'stream ended').to.equal(true), timeoutMs, 20);
    await this.done;
    return this.text;
  }

  close(): void {
    this.controller.abort();
  }

  events(): { id: number; event: string }[] {
    return this.text
      .split('\n\n')
      .map((block) => block.split('\n'))
      .filter((lines) => lines.some((l) => l.startsWith('event: ')))
      .map((lines) => ({ id: Number(lines.find((l) => l.startsWith('id: '))!.slice(4)), event: lines.find((l) => l.startsWith('event: '))!.slice(7) }));
  }
}

describe('GET /api/v1/runs/{runId}/events: bounded streams', function () {
  this.timeout(120_000);
  let svc: TestService;
  let tenant: TestTenant;
  let worker: AgentWorker | undefined;
  const open: OpenStream[] = [];

  async function connect(runId: string, key: string, headers: Record<string, string> = {}): Promise<OpenStream> {
    const controller = new AbortController();
    const response = await fetch(`${svc.baseUrl}/api/v1/runs/${runId}/events`, { headers: { authorization: `Bearer ${key}`, ...headers }, signal: controller.signal });
    if (response.status !== 200) return new OpenStream(response, controller);
    const stream = new OpenStream(response, controller);
    open.push(stream);
    return stream;
  }

  before(async () => {
    // No agent worker: runs stay queued while streams are open.
    svc = await startTestService('ssebounds', {
      ROLES: 'http,projectors',
      SSE_MAX_STREAMS_PER_KEY: '2',
      SSE_MAX_LIFETIME_MS: String(LIFETIME_MS),
      SSE_KEY_RECHECK_MS: '200',
    });
    tenant = await svc.tenant('sse');
  });
  afterEach(() => {
    for (const stream of open.splice(0)) stream.close();
  });
  after(async () => {
    await worker?.stop();
    await svc?.stop();
  });

  it('answers 429 problem with Retry-After to a key holding SSE_MAX_STREAMS_PER_KEY streams; another key and a freed slot get 200', async () => {
    const runId = await startRun(svc, tenant.keys.write, tenant.accounts.sandbox, 'Summarise the account');
    const first = await connect(runId, tenant.keys.read);
    const second = await connect(runId, tenant.keys.read);
    expect([first.response.status, second.response.status]).to.deep.equal([200, 200]);
    const third = await svc.request('GET', `/api/v1/runs/${runId}/events`, { key: tenant.keys.read });
    expect(third.status).to.equal(429);
    expect(third.headers.get('content-type')).to.match(/^application\/problem\+json/);
    expect(third.headers.get('retry-after')).to.match(/^\d+$/);
    const problem = (await third.json()) as { type: string; status: number };
    expect(problem.type).to.equal('http://api.test/problems/too-many-streams');
    expect(problem.status).to.equal(429);
    // The limit is per key: another key of the workspace still gets its stream.
    expect((await connect(runId, tenant.keys.write)).response.status).to.equal(200);
    first.close();
    await eventually(async () => {
      const again = await connect(runId, tenant.keys.read);
      expect(again.response.status).to.equal(200);
    }, 5000, 50);
  });

  it('ends a stream after SSE_MAX_LIFETIME_MS with a short retry:, and a reconnect with Last-Event-ID resumes with exactly the rest', async () => {
    const runId = await startRun(svc, tenant.keys.write, tenant.accounts.sandbox2, 'Find wasted spend and propose negative keywords');
    const started = Date.now();
    const first = await connect(runId, tenant.keys.admin);
    const text = await first.end(LIFETIME_MS + 5000);
    expect(Date.now() - started).to.be.at.least(LIFETIME_MS - 100);
    expect(text).to.include(': stream lifetime reached; reconnect with Last-Event-ID\nretry: 500\n');
    const before = first.events();
    expect(before.map((e) => e.event)).to.deep.equal(['queued']);

    worker = await startAgentWorker(svc);
    const all: { id: number; event: string }[] = [...before];
    let lastId = before.at(-1)!.id;
    // Reconnect as EventSource would, until the terminal event (each stream lives 2 s).
    for (let attempt = 0; attempt < 20; attempt++) {
      const next = await connect(runId, tenant.keys.admin, { 'Last-Event-ID': String(lastId) });
      if (next.response.status === 204) break;
      expect(next.response.status).to.equal(200);
      await next.end(LIFETIME_MS + 5000);
      const events = next.events();
      all.push(...events);
      if (events.length > 0) lastId = events.at(-1)!.id;
      if (['succeeded', 'failed', 'canceled'].includes(all.at(-1)!.event)) break;
    }
    const run = await waitForTerminalRun(svc, tenant.keys.read, runId, 30_000);
    expect(all.at(-1)!.event).to.equal(run.status);
    const ids = all.map((e) => e.id);
    expect(new Set(ids).size, 'no event twice').to.equal(ids.length);
    expect(all.filter((e) => e.event === 'tool_called')).to.have.length(run.result.tool_calls.length);
  });

  it("ends a revoked key's streams within the re-check interval", async () => {
    const other = await svc.tenant('sse-revoke');
    // No worker: the run stays queued, so only the revocation can end the stream.
    await worker?.stop();
    worker = undefined;
    const runId = await startRun(svc, other.keys.write, other.accounts.disconnected, 'Summarise the account');
    const stream = await connect(runId, other.keys.read);
    expect(stream.response.status).to.equal(200);
    await new Promise((resolve) => setTimeout(resolve, 300));
    expect(stream.ended).to.equal(false);
    const revokedAt = Date.now();
    await revokeKey(svc.service.infrastructure, other.keyIds.read);
    const text = await stream.end(LIFETIME_MS);
    expect(Date.now() - revokedAt).to.be.below(LIFETIME_MS - 200);
    expect(text).to.include(': the API key was revoked');
    expect((await svc.request('GET', `/api/v1/runs/${runId}/events`, { key: other.keys.read })).status).to.equal(401);
  });

  it('leaves no consumer behind: 200 connect/disconnect cycles, some during setup, end where they started', async () => {
    const other = await svc.tenant('sse-cycles');
    const runId = await startRun(svc, other.keys.write, other.accounts.disconnected, 'Summarise the account');
    const { jsm } = svc.service.infrastructure;
    const consumers = async () => (await jsm.streams.info(svc.config.eventStream)).state.consumer_count;
    // Let the projectors' and the idle streams' consumers settle first.
    await new Promise((resolve) => setTimeout(resolve, 500));
    const baseline = await consumers();
    const keys = [other.keys.read, other.keys.write, other.keys.admin];
    // Half the streams resume after the run's last event, so nothing arrives to wake them up.
    const head = String(await svc.service.infrastructure.store.lastSequence());
    for (let cycle = 0; cycle < 200; cycle++) {
      const controller = new AbortController();
      const headers: Record<string, string> = { authorization: `Bearer ${keys[cycle % 3]}` };
      if (cycle % 2 === 0) headers['last-event-id'] = head;
      const request = fetch(`${svc.baseUrl}/api/v1/runs/${runId}/events`, { headers, signal: controller.signal });
      // Disconnect at different points: before the answer, right after it, after the first bytes.
      const point = cycle % 4;
      if (point === 0) {
        controller.abort();
      } else if (point === 1) {
        setTimeout(() => controller.abort(), (cycle * 7) % 23);
      }
      try {
        const response = await request;
        if (point === 3) await response.body!.getReader().read();
        controller.abort();
      } catch {
        // Aborted before the answer.
      }
    }
    await eventually(async () => expect(await consumers()).to.equal(baseline), 5000, 100);
  });

  // Last: the corrupt message stalls this branch's projectors (quarantine is issue #9's work).
  it('skips a corrupt stored message with a comment and goes on to the end', async () => {
    const other = await svc.tenant('sse-corrupt');
    const runId = await startRun(svc, other.keys.write, other.accounts.sandbox, 'Summarise the account');
    const stream = await connect(runId, other.keys.read);
    expect(stream.response.status).to.equal(200);
    await eventually(() => expect(stream.events().map((e) => e.event)).to.deep.equal(['queued']), 5000, 20);
    const { js, subjects } = svc.service.infrastructure;
    const corruptSeq = (await js.publish(subjects.forAggregate(streams.run(other.workspaceId, other.accounts.sandbox, runId)), '{not json')).seq;
    const cancel = await svc.request('DELETE', `/api/v1/runs/${runId}`, { key: other.keys.write });
    expect(cancel.status).to.be.oneOf([200, 202]);
    const text = await stream.end(10_000);
    expect(text).to.include(`: skipped a corrupt stored message (not-json)\nid: ${corruptSeq}\n\n`);
    expect(stream.events().map((e) => e.event)).to.deep.equal(['queued', 'canceled']);
  });
});
