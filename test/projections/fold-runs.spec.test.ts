import { expect } from 'chai';
import { foldRunEvents, type RunRecord } from '../../projections/runs/fold-runs.ts';
import type { StoredEvent } from '../../src/event-store/event-store.ts';
import { recorded } from '../support/decider-spec.ts';

/** The runs read model's fold (projections/runs/fold-runs.ts), pure: given events, then rows. */
const at = (seconds: number) => new Date(Date.parse('2026-11-21T10:00:00.000Z') + seconds * 1000).toISOString();
const usage = { input_tokens: 3, output_tokens: 4, steps: 2 };
const events = {
  queued: (runId = 'r1') => recorded('RunQueued', { run_id: runId, brief: 'b', auto_apply: false, key_id: 'k1', scope: 'write' }, { time: at(0) }),
  started: (runId = 'r1') => recorded('RunStarted', { run_id: runId, worker_id: 'w1', agent: { kind: 'rules', model: 'r' } }, { time: at(2) }),
  canceled: (runId = 'r1') => recorded('RunCanceled', { run_id: runId }, { time: at(5) }),
  succeeded: (runId = 'r1') =>
    recorded('RunSucceeded', { run_id: runId, text: 'done', truncated: false, usage, duration_ms: 1234 }, { time: at(4) }),
  failedQueued: (runId = 'r1') =>
    recorded('RunFailed', { run_id: runId, error: { code: 'key_revoked', message: 'm' }, text: '', truncated: false, usage, duration_ms: null }, { time: at(1.5) }),
  toolCalled: (index: number, runId = 'r1') =>
    recorded('ToolCalled', { run_id: runId, index, name: 'get_search_terms', input: { a: index }, ok: true, output: {}, duration_ms: 1 }, { time: at(3) }),
};

function given(...domainEvents: ReturnType<typeof recorded>[]) {
  const rows = new Map<string, RunRecord>();
  const stored: StoredEvent[] = domainEvents.map((event, i) => ({ seq: i + 1, subject: 's', event }));
  const result = foldRunEvents(rows, stored);
  return { rows, ...result };
}

describe('runs fold (specs)', () => {
  it('a queued run has a row with no timings yet', () => {
    const { rows, changed } = given(events.queued());
    expect([...changed]).to.deep.equal(['r1']);
    expect(rows.get('r1')).to.include({ status: 'queued', started_at: null, finished_at: null, duration_ms: null, queued_seq: 1, last_seq: 1 });
  });

  it('a succeeded run keeps the worker’s duration, result and usage', () => {
    const row = given(events.queued(), events.started(), events.succeeded()).rows.get('r1')!;
    expect(row).to.include({ status: 'succeeded', started_at: at(2), finished_at: at(4), duration_ms: 1234, result_text: 'done', worker_id: 'w1', last_seq: 3 });
    expect(row.usage).to.deep.equal(usage);
  });

  it('a canceled run has duration_ms', () => {
    const row = given(events.queued(), events.canceled()).rows.get('r1')!;
    expect(row).to.include({ status: 'canceled', finished_at: at(5), duration_ms: 5000 });
  });

  it('a run failed before a worker took it has duration_ms, measured from when it was queued', () => {
    const row = given(events.queued(), events.failedQueued()).rows.get('r1')!;
    expect(row).to.include({ status: 'failed', duration_ms: 1500 });
    expect(row.error).to.deep.equal({ code: 'key_revoked', message: 'm' });
  });

  it('counts every tool call and records name, input and ok', () => {
    const row = given(events.queued(), events.started(), events.toolCalled(1), events.toolCalled(2)).rows.get('r1')!;
    expect(row.tool_call_count).to.equal(2);
    expect(row.tool_calls).to.deep.equal([
      { name: 'get_search_terms', input: { a: 1 }, ok: true },
      { name: 'get_search_terms', input: { a: 2 }, ok: true },
    ]);
  });

  it('ignores events of a run it has no row for, and events of no run', () => {
    const { rows, changed } = given(events.started('unknown'), recorded('WorkspaceCreated', { name: 'w' }));
    expect(rows.size).to.equal(0);
    expect(changed.size).to.equal(0);
  });

  it('lists the actions a run proposed', () => {
    const proposed = recorded('ActionProposed', {
      action_id: 'a1',
      run_id: 'r1',
      kind: 'add_negative_keywords',
      summary: 's',
      reason: 'r',
      params: {},
      based_on: {},
      risk_tier: 'safe',
      disposition: 'queued',
      policy_reasons: ['p'],
      auto_apply_requested: false,
    });
    const { actions } = given(events.queued(), proposed);
    expect(actions).to.have.length(1);
    expect(actions[0]).to.include({ id: 'a1', run_id: 'r1', account_id: 'acc', disposition: 'queued', seq: 2 });
  });
});
