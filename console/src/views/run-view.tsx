import { useEffect, useState } from 'preact/hooks';
import { ApiProblem, apiPaths, apiRequest, describeError, fetchAllPages, mayPass, retryAfterSeconds, type ApiAnswer } from '../api/api-client.ts';
import { TERMINAL_RUN_STATUSES, type HistoryEntry, type Run } from '../api/types.ts';
import { Timestamp } from '../components/load-state.tsx';
import { JsonBlock } from '../components/value-view.tsx';
import { Untrusted } from '../components/untrusted-text.tsx';
import { Backoff, sleep } from '../live/backoff.ts';
import { followRunEvents } from '../live/run-event-stream.ts';
import { routePaths } from '../routing/routes.ts';

type RunState =
  | { readonly state: 'loading' }
  | { readonly state: 'error'; readonly message: string }
  | { readonly state: 'ready'; readonly run: Run };

/** The transcript's outputs are read this many times at most when the history fails to answer. */
const TRANSCRIPT_ATTEMPTS = 4;

const isTerminal = (run: Run) => (TERMINAL_RUN_STATUSES as readonly string[]).includes(run.status);

/**
 * A run: status, timing, answer, actions and transcript. While it is queued or running the
 * view follows the run's event stream and reads the run again on each milestone; if the
 * stream is unavailable it polls, honouring the run's Retry-After. A read that fails does not
 * end the page: it keeps showing the run as last read, says so, and tries again after 1 s,
 * 2, 4, … up to 30 s (never sooner than the failure's Retry-After).
 */
export function RunView(props: { runId: string }) {
  const [runState, setRunState] = useState<RunState>({ state: 'loading' });
  const [outputs, setOutputs] = useState<ReadonlyMap<number, unknown> | { readonly error: string } | null>(null);
  const [live, setLive] = useState<'off' | 'stream' | 'polling'>('off');
  /** Why the last read of the run failed (and when the next comes); null once a read succeeds. */
  const [readNote, setReadNote] = useState<string | null>(null);

  useEffect(() => {
    const controller = new AbortController();
    const { signal } = controller;
    let shown = false;
    const readRun = async () => {
      const answer = await apiRequest<Run>('GET', apiPaths.run(props.runId), { signal });
      shown = true;
      setRunState({ state: 'ready', run: answer.body });
      setReadNote(null);
      return answer;
    };
    /**
     * Reads the run until a read succeeds, waiting longer after each failure. Before the run was
     * ever shown, a failure that will not pass (no such run, …) ends the page instead.
     */
    const readRunUntilAnswered = async (): Promise<ApiAnswer<Run>> => {
      const backoff = new Backoff();
      for (;;) {
        try {
          return await readRun();
        } catch (error) {
          if (signal.aborted) throw error;
          if (!shown && !mayPass(error)) throw error;
          const wait = backoff.next(error);
          setReadNote(shown
            ? `The run could not be read again (${describeError(error)}); it is shown as last read. Trying again in ${wait} s.`
            : `The run could not be read (${describeError(error)}). Trying again in ${wait} s.`);
          await sleep(wait * 1000, signal);
          if (signal.aborted) throw error;
        }
      }
    };
    const readTranscript = async (run: Run) => {
      const backoff = new Backoff();
      for (let attempt = 1; ; attempt += 1) {
        try {
          const { rows } = await fetchAllPages<HistoryEntry>((cursor) => {
            const query = new URLSearchParams({ run_id: run.id, limit: '500' });
            if (cursor) query.set('cursor', cursor);
            return apiPaths.history(run.project_id, query);
          }, { signal, maxPages: 10 });
          const byIndex = new Map<number, unknown>();
          for (const entry of rows) {
            if (entry.type === 'ToolCalled' && typeof entry.data?.index === 'number') byIndex.set(entry.data.index, entry.data.output);
          }
          setOutputs(byIndex);
          return;
        } catch (error) {
          if (signal.aborted) return;
          if (!mayPass(error) || attempt >= TRANSCRIPT_ATTEMPTS) {
            setOutputs({ error: `The outputs could not be read from the history: ${describeError(error)} Reload the page to try again.` });
            return;
          }
          await sleep(backoff.next(error) * 1000, signal);
        }
      }
    };

    (async () => {
      let answer = await readRunUntilAnswered();
      if (!isTerminal(answer.body)) {
        setLive('stream');
        const end = await followRunEvents(props.runId, () => { void readRun().catch(() => {}); }, signal);
        answer = await readRunUntilAnswered();
        // No stream (or it broke): poll as the specification asks, after each Retry-After.
        while (!signal.aborted && !isTerminal(answer.body)) {
          setLive('polling');
          const seconds = end.kind === 'failed' ? (retryAfterSeconds(answer.headers) ?? 15) : 2;
          await sleep(Math.max(1, seconds) * 1000, signal);
          if (signal.aborted) return;
          answer = await readRunUntilAnswered();
        }
        setLive('off');
      }
      await readTranscript(answer.body);
    })().catch((error: unknown) => {
      if (signal.aborted) return;
      setReadNote(null);
      setRunState({ state: 'error', message: error instanceof ApiProblem && error.status === 404 ? 'There is no run with this id in your workspace.' : describeError(error) });
    });
    return () => controller.abort();
  }, [props.runId]);

  if (runState.state === 'loading') {
    return (
      <section aria-labelledby="page-title">
        <h1 id="page-title">Run</h1>
        <p class="placeholder" role="status" aria-busy="true">Loading the run…</p>
        {readNote && <p class="notice" role="alert">{readNote}</p>}
      </section>
    );
  }
  if (runState.state === 'error') {
    return <section aria-labelledby="page-title"><h1 id="page-title">Run</h1><p class="error" role="alert">{runState.message}</p></section>;
  }
  const { run } = runState;
  const result = run.result;
  const outputError = outputs !== null && !(outputs instanceof Map) ? (outputs as { readonly error: string }).error : null;
  const outputMap = outputs instanceof Map ? outputs : null;
  return (
    <section aria-labelledby="page-title">
      <nav class="account-nav" aria-label="Account">
        <a href={routePaths.accounts()}>Accounts</a>
        <span aria-hidden="true"> / </span>
        <a href={routePaths.approvals(run.project_id, new URLSearchParams({ run_id: run.id }))}>This run's actions</a>
        <span aria-hidden="true"> · </span>
        <a href={routePaths.history(run.project_id, new URLSearchParams({ run_id: run.id }))}>This run's history</a>
      </nav>
      <h1 id="page-title">Run <span class="mono"><Untrusted text={run.id} /></span></h1>
      <p class="status-line" role="status" aria-live="polite">
        <span class={`badge badge-${run.status}`} data-testid="run-status"><Untrusted text={run.status} /></span>
        {live === 'stream' && <span class="muted"> live</span>}
        {live === 'polling' && <span class="muted"> refreshing</span>}
      </p>
      {readNote && <p class="notice" role="alert">{readNote}</p>}
      <dl class="facts">
        <div><dt>Created</dt><dd><Timestamp value={run.created_at} /></dd></div>
        <div><dt>Started</dt><dd><Timestamp value={run.started_at} /></dd></div>
        <div><dt>Finished</dt><dd><Timestamp value={run.finished_at} /></dd></div>
        <div><dt>Duration</dt><dd>{run.duration_ms === null ? '—' : `${(run.duration_ms / 1000).toFixed(1)} s`}</dd></div>
        <div><dt>Agent</dt><dd>{run.agent ? <><Untrusted text={run.agent.kind} /> (<Untrusted text={run.agent.model} />)</> : '—'}</dd></div>
        <div><dt>Auto-apply</dt><dd>{run.auto_apply ? 'requested' : 'off'}</dd></div>
      </dl>
      {run.error && <p class="error" role="alert">Failed: <Untrusted text={run.error.code} /> — <Untrusted text={run.error.message} /></p>}
      <h2>Answer</h2>
      {result?.text ? <div class="answer"><Untrusted text={result.text} />{result.truncated && <p class="muted">(The answer was cut at 32,000 characters.)</p>}</div> : <p class="placeholder">No answer yet.</p>}
      <h2>Actions</h2>
      {result && result.actions.length > 0 ? (
        <ul class="plain-list">
          {result.actions.map((action) => (
            <li key={action.id} class="card">
              <p class="card-title"><Untrusted text={action.summary} /></p>
              <p class="muted"><Untrusted text={action.kind} /> · risk <Untrusted text={action.risk_tier} /> · <Untrusted text={action.disposition.replace('_', ' ')} /></p>
            </li>
          ))}
        </ul>
      ) : <p class="placeholder">No action proposed.</p>}
      <h2>Transcript</h2>
      {result && result.tool_calls.length > 0 ? (
        <ol class="transcript">
          {result.tool_calls.map((call, index) => {
            const output = outputMap?.get(index + 1);
            return (
              <li key={index}>
                <details class="disclosure">
                  <summary>{index + 1}. <Untrusted text={call.name} /> <span class={call.ok ? 'ok' : 'not-ok'}>{call.ok ? 'ok' : 'failed'}</span></summary>
                  <h3 class="subhead">Input</h3>
                  <JsonBlock value={call.input} label={`Input of ${call.name}`} />
                  <h3 class="subhead">Output</h3>
                  {outputError !== null ? <p class="error">{outputError}</p>
                    : outputMap === null ? <p class="placeholder">Loading the output from the history…</p>
                    : output === undefined ? <p class="muted">Not in the history.</p>
                    : <JsonBlock value={output} label={`Output of ${call.name}`} />}
                </details>
              </li>
            );
          })}
        </ol>
      ) : <p class="placeholder">No tool call yet.</p>}
    </section>
  );
}
