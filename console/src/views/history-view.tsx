import { useEffect, useRef, useState } from 'preact/hooks';
import { apiPaths, apiRequest, describeError, fetchAllPages } from '../api/api-client.ts';
import type { Account, HistoryEntry, ListPage } from '../api/types.ts';
import { LoadState, Timestamp, type Loadable } from '../components/load-state.tsx';
import { Untrusted } from '../components/untrusted-text.tsx';
import { JsonBlock } from '../components/value-view.tsx';
import { navigate } from '../routing/location.ts';
import { revealHiddenCharacters } from '../text/hidden-characters.ts';
import { routePaths } from '../routing/routes.ts';
import { AccountNav } from './account-nav.tsx';

export const HISTORY_PAGE_SIZE = 25;
/** The API pages oldest first; to show newest first the console reads up to this many pages. */
const MAX_API_PAGES = 20;

/** The account's event history, newest first, filtered by run (API) and type (here), paged. */
export function HistoryView(props: { projectId: string; search: URLSearchParams }) {
  const { projectId } = props;
  const runId = props.search.get('run_id') ?? '';
  const type = props.search.get('type') ?? '';
  const page = Math.max(1, Number.parseInt(props.search.get('page') ?? '1', 10) || 1);
  const [entries, setEntries] = useState<Loadable<readonly HistoryEntry[]>>({ state: 'loading' });
  /**
   * How the last read ended: with every page (`complete`), or stopped by the service because it
   * has not checked the newest events yet (`waiting`: they come on a Refresh), or neither (cut short).
   */
  const [ending, setEnding] = useState({ complete: true, waiting: false });
  const [account, setAccount] = useState<Account | null>(null);
  /** Bumped by the Refresh button: the history is read on demand, not polled (it can be thousands of events). */
  const [readCount, setReadCount] = useState(0);
  const shownFilters = useRef('');

  useEffect(() => {
    const controller = new AbortController();
    // A Refresh keeps the current list on screen until the new one is in; new filters do not.
    const filters = `${projectId}|${runId}`;
    if (shownFilters.current !== filters) setEntries({ state: 'loading' });
    shownFilters.current = filters;
    fetchAllPages<HistoryEntry>((cursor) => {
      const query = new URLSearchParams({ limit: '500' });
      if (runId) query.set('run_id', runId);
      if (cursor) query.set('cursor', cursor);
      return apiPaths.history(projectId, query);
    }, { signal: controller.signal, maxPages: MAX_API_PAGES })
      .then(({ rows, complete, waiting }) => {
        setEntries({ state: 'ready', value: rows.reverse() });
        setEnding({ complete, waiting: waiting === true });
      })
      .catch((error: unknown) => {
        // Not polled: the page says how to read it again.
        if (!controller.signal.aborted) setEntries({ state: 'error', message: `${describeError(error)} Use Refresh to try again.` });
      });
    apiRequest<ListPage<Account>>('GET', apiPaths.accounts(), { signal: controller.signal })
      .then(({ body }) => setAccount(body.data.find((candidate) => candidate.id === projectId) ?? null), () => {});
    return () => controller.abort();
  }, [projectId, runId, readCount]);

  const all = entries.state === 'ready' ? entries.value : [];
  const types = [...new Set(all.map((entry) => entry.type ?? 'corrupt'))].sort();
  const filtered = type ? all.filter((entry) => (entry.type ?? 'corrupt') === type) : all;
  const pages = Math.max(1, Math.ceil(filtered.length / HISTORY_PAGE_SIZE));
  const current = Math.min(page, pages);
  const shown = filtered.slice((current - 1) * HISTORY_PAGE_SIZE, current * HISTORY_PAGE_SIZE);
  const go = (changes: Record<string, string>) => {
    const query = new URLSearchParams(props.search);
    for (const [name, value] of Object.entries(changes)) {
      if (value) query.set(name, value);
      else query.delete(name);
    }
    navigate(routePaths.history(projectId, query), { replace: true });
  };

  return (
    <section aria-labelledby="page-title">
      <AccountNav projectId={projectId} account={account} current="history" />
      <h1 id="page-title">History</h1>
      <form key={`${runId}|${type}`} class="filters" aria-label="Filter history" onSubmit={(event) => {
        event.preventDefault();
        const form = new FormData(event.currentTarget as HTMLFormElement);
        go({ run_id: String(form.get('run_id') ?? '').trim(), type: String(form.get('type') ?? ''), page: '' });
      }}>
        <div class="field">
          <label for="history-run">Run id</label>
          <input id="history-run" name="run_id" type="text" defaultValue={runId} spellcheck={false} autoComplete="off" placeholder="any run" />
        </div>
        <div class="field">
          <label for="history-type">Event type</label>
          <select id="history-type" name="type">
            <option value="" selected={type === ''}>All types</option>
            {(type && !types.includes(type) ? [...types, type] : types).map((value) => <option key={value} value={value} selected={value === type}>{revealHiddenCharacters(value)}</option>)}
          </select>
        </div>
        <button type="submit" class="button-secondary">Apply filters</button>
      </form>
      <p><button type="button" class="button-quiet" onClick={() => setReadCount((count) => count + 1)}>Refresh</button></p>
      {!ending.complete && !ending.waiting && <p class="notice">This history is longer than the console reads at once: only its oldest part is listed. Narrow it with a run id.</p>}
      {ending.waiting && <p class="notice">The newest events are not listed yet: the service has not finished checking them. Refresh in a moment.</p>}
      <LoadState loadable={entries} loadingText="Loading the history…" emptyText="No event matches.">
        {() => (
          <>
            {shown.length === 0 ? <p class="placeholder">No event of this type.</p> : (
              <ol class="history-list" aria-label="Events, newest first">
                {shown.map((entry) => (
                  <li key={entry.seq} class="card">
                    <details class="disclosure">
                      <summary>
                        <span class="event-type"><Untrusted text={entry.type ?? `corrupt message (${entry.code ?? 'unknown'})`} /></span>{' '}
                        <span class="muted"><Timestamp value={entry.time} /> · #{entry.seq}</span>
                      </summary>
                      {entry.correlation_id && (
                        <p class="muted">Correlation: <a href={routePaths.history(projectId, new URLSearchParams({ run_id: entry.correlation_id }))}><Untrusted text={entry.correlation_id} /></a></p>
                      )}
                      <JsonBlock value={entry.corrupt ? { code: entry.code, error: entry.error } : entry.data} label={`Data of event ${entry.seq}`} />
                    </details>
                  </li>
                ))}
              </ol>
            )}
            <nav class="pager" aria-label="History pages">
              <button type="button" class="button-secondary" disabled={current <= 1} onClick={() => go({ page: String(current - 1) })}>Newer</button>
              <span>Page {current} of {pages}</span>
              <button type="button" class="button-secondary" disabled={current >= pages} onClick={() => go({ page: String(current + 1) })}>Older</button>
            </nav>
          </>
        )}
      </LoadState>
    </section>
  );
}
