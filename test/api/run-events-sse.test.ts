import { expect } from 'chai';
import type { AgentWorker } from '../../src/workers/agent-worker.ts';
import { streams } from '../../src/event-store/subjects.ts';
import { startAgentWorker } from '../support/agent-worker.ts';
import { startRun, waitForTerminalRun } from '../support/runs.ts';
import { startTestService, type TestService, type TestTenant } from '../support/test-service.ts';

interface SseEvent {
  id: number;
  event: string;
  data: any;
}

/** Reads a whole SSE response (until the server closes it), parsing each event. */
async function readEvents(response: Response): Promise<SseEvent[]> {
  const text = await response.text();
  return text
    .split('\n\n')
    .map((block) => block.split('\n').filter((line) => line && !line.startsWith(':')))
    .filter((lines) => lines.some((l) => l.startsWith('event:')))
    .map((lines) => {
      const field = (name: string) => lines.find((l) => l.startsWith(`${name}: `))?.slice(name.length + 2) ?? '';
      return { id: Number(field('id')), event: field('event'), data: JSON.parse(field('data')) };
    });
}

describe('GET /api/v1/runs/{runId}/events (Server-Sent Events)', function () {
  this.timeout(60_000);
  let svc: TestService;
  let tenant: TestTenant;
  let worker: AgentWorker;
  let runId: string;

  before(async () => {
    // No agent worker yet: the run waits while the client connects.
    svc = await startTestService('runevents', { ROLES: 'http,projectors' });
    tenant = await svc.tenant();
    runId = await startRun(svc, tenant.keys.write, tenant.accounts.sandbox, 'Find wasted spend and propose negative keywords');
  });
  after(async () => {
    await worker?.stop();
    await svc?.stop();
  });

  let live: SseEvent[] = [];

  it('streams queued, started, each tool call, each action and the end, live, then closes', async () => {
    const response = await svc.request('GET', `/api/v1/runs/${runId}/events`, { key: tenant.keys.write });
    expect(response.status).to.equal(200);
    expect(response.headers.get('content-type')).to.match(/^text\/event-stream/);
    const reading = readEvents(response);
    worker = await startAgentWorker(svc);
    live = await reading;
    const run = await waitForTerminalRun(svc, tenant.keys.write, runId);
    const names = live.map((e) => e.event);
    expect(names[0]).to.equal('queued');
    expect(names[1]).to.equal('started');
    expect(names[names.length - 1]).to.equal('succeeded');
    expect(names.filter((n) => n === 'tool_called')).to.have.length(run.result.tool_calls.length);
    expect(names.filter((n) => n === 'action_proposed')).to.have.length(run.result.actions.length);
    expect(live.filter((e) => e.event === 'action_proposed').map((e) => e.data.action.id)).to.deep.equal(run.result.actions.map((a: { id: string }) => a.id));
    const ids = live.map((e) => e.id);
    expect(ids).to.deep.equal([...ids].sort((a, b) => a - b));
    expect(live.every((e) => e.data.run_id === runId)).to.equal(true);
  });

  it('resumes after Last-Event-ID with exactly the events that followed', async () => {
    const third = live[2]!;
    const response = await svc.request('GET', `/api/v1/runs/${runId}/events`, { key: tenant.keys.write, headers: { 'Last-Event-ID': String(third.id) } });
    expect(response.status).to.equal(200);
    const resumed = await readEvents(response);
    expect(resumed.map((e) => e.id)).to.deep.equal(live.slice(3).map((e) => e.id));
  });

  it('answers 204 to a reconnect after the end, so EventSource stops', async () => {
    const last = live[live.length - 1]!;
    const response = await svc.request('GET', `/api/v1/runs/${runId}/events`, { key: tenant.keys.write, headers: { 'Last-Event-ID': String(last.id) } });
    expect(response.status).to.equal(204);
  });

  it('refuses a Last-Event-ID that is not an id of this stream (422, as ?last_event_id= does) instead of replaying from the start', async () => {
    for (const value of ['abc', '1e1', '99999999999999999999']) {
      const response = await svc.request('GET', `/api/v1/runs/${runId}/events`, { key: tenant.keys.write, headers: { 'Last-Event-ID': value } });
      expect(response.status, value).to.equal(422);
      const problem = (await response.json()) as { type: string; errors: { pointer: string }[] };
      expect(problem.type, value).to.match(/\/problems\/validation-error$/);
      expect(problem.errors.map((e) => e.pointer), value).to.deep.equal(['/Last-Event-ID']);
    }
    // 16 digits fit the query's pattern but not a sequence of the stream (past 2^53): refused too, never a replay from 0.
    for (const [value, header] of [['9999999999999999', 'Last-Event-ID'], ['9007199254740992', 'Last-Event-ID']] as const) {
      const byHeader = await svc.request('GET', `/api/v1/runs/${runId}/events`, { key: tenant.keys.write, headers: { [header]: value } });
      const byQuery = await svc.request('GET', `/api/v1/runs/${runId}/events?last_event_id=${value}`, { key: tenant.keys.write });
      expect([byHeader.status, byQuery.status], value).to.deep.equal([422, 422]);
      const problem = (await byQuery.json()) as { errors: { pointer: string }[] };
      expect(problem.errors.map((e) => e.pointer), value).to.deep.equal(['/last_event_id']);
      await byHeader.body?.cancel();
    }
  });

  it('answers 404 for an unknown run and for a run of another workspace, 401 without a key', async () => {
    const other = await svc.tenant('other');
    const unknown = await svc.request('GET', `/api/v1/runs/00000000-0000-4000-8000-000000000000/events`, { key: tenant.keys.write });
    const foreign = await svc.request('GET', `/api/v1/runs/${runId}/events`, { key: other.keys.write });
    expect(unknown.status).to.equal(404);
    expect(foreign.status).to.equal(404);
    expect(((await foreign.json()) as { type: string }).type).to.equal(((await unknown.json()) as { type: string }).type);
    expect((await svc.request('GET', `/api/v1/runs/${runId}/events`)).status).to.equal(401);
  });
  it('does not show a replayed copy of one of the run\'s events as a second milestone: it is skipped with a chain-broken comment', async () => {
    await worker.stop();
    const replayedRun = await startRun(svc, tenant.keys.write, tenant.accounts.sandbox2, 'Find wasted spend');
    const infra = svc.service.infrastructure;
    const accountSubject = infra.subjects.forAggregate(streams.account(tenant.workspaceId, tenant.accounts.sandbox2));
    const queued = (await infra.store.lastOf(accountSubject))!;
    expect(queued.event.type).to.equal('RunQueued');
    // The exact signed bytes again, without Nats-Msg-Id: nothing de-duplicates them.
    const replayed = (await infra.js.publish(accountSubject, (await infra.store.rawAt(queued.seq))!.data)).seq;
    worker = await startAgentWorker(svc);
    await waitForTerminalRun(svc, tenant.keys.write, replayedRun);

    const response = await svc.request('GET', `/api/v1/runs/${replayedRun}/events`, { key: tenant.keys.write });
    const text = await response.text();
    expect(text).to.include(`: skipped a corrupt stored message (chain-broken)\nid: ${replayed}\n\n`);
    const names = text.split('\n').filter((line) => line.startsWith('event: ')).map((line) => line.slice(7));
    expect(names.filter((name) => name === 'queued')).to.have.length(1);
    expect(names[names.length - 1]).to.equal('succeeded');
    // Resumed after the replay, the stream still knows where the chain stands.
    const resumed = await svc.request('GET', `/api/v1/runs/${replayedRun}/events`, { key: tenant.keys.write, headers: { 'Last-Event-ID': String(replayed) } });
    const rest = (await readEvents(resumed)).map((event) => event.event);
    expect(rest[0]).to.equal('started');
    expect(rest.at(-1)).to.equal('succeeded');
  });
});
