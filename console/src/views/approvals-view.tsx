import { useCallback, useEffect, useRef, useState } from 'preact/hooks';
import { ApiProblem, apiPaths, apiRequest, fetchAllPages } from '../api/api-client.ts';
import { canActOn } from '../api/key-abilities.ts';
import { ACTION_STATUSES, ACTIONABLE_STATUSES, type Account, type ActionEdit, type Approval, type ListPage } from '../api/types.ts';
import { LoadState, type Loadable } from '../components/load-state.tsx';
import { usePolling } from '../live/use-polling.ts';
import { navigate } from '../routing/location.ts';
import { routePaths } from '../routing/routes.ts';
import { ApprovalCard } from './approval-card.tsx';
import { AccountNav } from './account-nav.tsx';

/** How often the list is read again: a new proposal appears within this many ms. */
export const APPROVALS_REFRESH_MS = 2500;

/** A decision's outcome: a sentence, and one line per action that failed for a reason other than a conflict. */
type Message = { readonly kind: 'info' | 'error'; readonly text: string; readonly failures?: readonly string[] } | null;

/** The scope probe's first retry waits this long; each further one twice as long, up to SCOPE_PROBE_MAX_DELAY_S. */
const SCOPE_PROBE_FIRST_DELAY_S = 1;
const SCOPE_PROBE_MAX_DELAY_S = 30;

/** The account's actions, with approve/reject one by one or together, filtered by status and run. */
export function ApprovalsView(props: { projectId: string; search: URLSearchParams }) {
  const { projectId } = props;
  const status = props.search.get('status') ?? '';
  const runId = props.search.get('run_id') ?? '';
  const [actions, setActions] = useState<Loadable<readonly Approval[]>>({ state: 'loading' });
  const [canAct, setCanAct] = useState<boolean | null>(null);
  const [selected, setSelected] = useState<ReadonlySet<string>>(new Set());
  const [busy, setBusy] = useState<ReadonlySet<string>>(new Set());
  const [message, setMessage] = useState<Message>(null);
  const [bulkRejecting, setBulkRejecting] = useState(false);
  const [bulkReason, setBulkReason] = useState('');
  const [account, setAccount] = useState<Account | null>(null);
  /** Why the last read of the list failed; null once a read succeeds. While set, nothing can be decided. */
  const [refreshError, setRefreshError] = useState<string | null>(null);
  /** Why the key's scope is not known yet (the probe failed and is retried). */
  const [scopeNote, setScopeNote] = useState<string | null>(null);
  const generation = useRef(0);
  /** Actions with a decision in flight: updated at once (not on the next render), so a second click never sends one twice. */
  const inFlight = useRef(new Set<string>());

  const load = useCallback(async (signal?: AbortSignal) => {
    const started = ++generation.current;
    try {
      const { rows } = await fetchAllPages<Approval>((cursor) => {
        const query = new URLSearchParams({ limit: '200' });
        if (status) query.set('status', status);
        if (runId) query.set('run_id', runId);
        if (cursor) query.set('cursor', cursor);
        return apiPaths.approvals(projectId, query);
      }, { signal, maxPages: 10 });
      // A slower, older read must not overwrite a newer one (e.g. right after an approve).
      if (started !== generation.current) return;
      setActions({ state: 'ready', value: rows });
      setRefreshError(null);
      setSelected((previous) => new Set([...previous].filter((id) => rows.some((row) => row.id === id && ACTIONABLE_STATUSES.includes(row.status)))));
    } catch (error) {
      if (signal?.aborted || started !== generation.current) throw error;
      // Keep showing the last list when a refresh fails, but say why and let nothing be decided on
      // it: what is on screen may no longer be what the actions are.
      setActions((previous) => (previous.state === 'ready' ? previous : { state: 'error', message: describe(error) }));
      setRefreshError(describe(error));
      throw error;
    }
  }, [projectId, status, runId]);

  usePolling(load, APPROVALS_REFRESH_MS, [load]);

  useEffect(() => {
    const controller = new AbortController();
    let timer: ReturnType<typeof setTimeout> | undefined;
    let delay = SCOPE_PROBE_FIRST_DELAY_S;
    // Until the key's scope is known the buttons stay disabled, and the page says why. A failure
    // that may pass (no answer, 408, 429, 5xx) is retried with backoff, honouring Retry-After.
    const probe = () => {
      canActOn(projectId, controller.signal).then((can) => {
        setCanAct(can);
        setScopeNote(null);
      }, (error: unknown) => {
        if (controller.signal.aborted) return;
        setCanAct(null);
        if (!isTransient(error)) {
          // No such account: the list says so already.
          if (error instanceof ApiProblem && error.slug === 'account-not-found') return;
          setScopeNote(`Approving and rejecting are disabled: the console could not check what this API key may do here. ${describe(error)}`);
          return;
        }
        const wait = Math.max(delay, error instanceof ApiProblem ? (error.retryAfterSeconds ?? 0) : 0);
        delay = Math.min(SCOPE_PROBE_MAX_DELAY_S, delay * 2);
        setScopeNote(`Approving and rejecting are disabled until the console can check what this API key may do: ${describe(error)} Trying again in ${wait} s.`);
        timer = setTimeout(probe, wait * 1000);
      });
    };
    probe();
    apiRequest<ListPage<Account>>('GET', apiPaths.accounts(), { signal: controller.signal })
      .then(({ body }) => setAccount(body.data.find((candidate) => candidate.id === projectId) ?? null), () => {});
    return () => {
      controller.abort();
      if (timer !== undefined) clearTimeout(timer);
    };
  }, [projectId]);

  const replaceAction = (updated: Approval) => {
    setActions((previous) => previous.state === 'ready'
      ? { state: 'ready', value: previous.value.map((row) => (row.id === updated.id ? updated : row)) }
      : previous);
  };
  const markBusy = (ids: readonly string[], on: boolean) => setBusy((previous) => {
    const next = new Set(previous);
    for (const id of ids) {
      if (on) next.add(id);
      else next.delete(id);
    }
    return next;
  });

  /**
   * Approves or rejects each action, as the version shown (`expected_version`), and says how it
   * went. An action whose decision is still in flight is skipped: it is never sent twice.
   * Resolves true when every request went through.
   */
  const decide = async (ids: readonly string[], decision: 'approve' | 'reject', reason?: string, edit?: ActionEdit) => {
    const shown = new Map((actions.state === 'ready' ? actions.value : []).map((action) => [action.id, action]));
    const fresh = ids.filter((id) => !inFlight.current.has(id) && shown.has(id));
    if (fresh.length === 0) return false;
    for (const id of fresh) inFlight.current.add(id);
    markBusy(fresh, true);
    setSelected((previous) => new Set([...previous].filter((id) => !fresh.includes(id))));
    setMessage(null);
    let done = 0;
    let conflicts = 0;
    let changed = 0;
    const failures: string[] = [];
    try {
      for (const id of fresh) {
        const action = shown.get(id)!;
        try {
          const path = decision === 'approve' ? apiPaths.approve(projectId, id) : apiPaths.reject(projectId, id);
          const body = decision === 'approve'
            ? { ...(edit ? { edit } : {}), expected_version: action.version }
            : { reason, expected_version: action.version };
          const answer = await apiRequest<Approval>('POST', path, { body });
          replaceAction(answer.body);
          done += 1;
        } catch (error) {
          // Only `action-not-in-queue` means another decision came first; any other failure says what it was.
          if (error instanceof ApiProblem && error.slug === 'action-not-in-queue') conflicts += 1;
          else if (error instanceof ApiProblem && error.slug === 'action-changed') changed += 1;
          else failures.push(`“${action.summary}”: ${describeFailure(error)}`);
        }
      }
    } finally {
      for (const id of fresh) inFlight.current.delete(id);
      markBusy(fresh, false);
    }
    const verb = decision === 'approve' ? (edit ? 'Edited and approved' : 'Approved') : 'Rejected';
    const noun = (count: number) => `${count} action${count === 1 ? '' : 's'}`;
    const failed = conflicts + changed + failures.length;
    const parts: string[] = [];
    if (done > 0 || failed === 0) parts.push(`${verb} ${noun(done)}.`);
    if (conflicts > 0) parts.push(`Someone else already decided ${conflicts === 1 && fresh.length === 1 ? 'this action' : noun(conflicts)} first; the list has been refreshed.`);
    if (changed > 0) {
      parts.push(`${changed === 1 && fresh.length === 1 ? 'This action' : noun(changed)} changed since the page showed ${changed === 1 ? 'it' : 'them'} ` +
        `(edited, or returned to the queue), so nothing was decided on ${changed === 1 ? 'it' : 'them'}; the list has been refreshed: review ${changed === 1 ? 'it' : 'them'} and decide again.`);
    }
    if (failures.length > 0) parts.push(`${failures.length === 1 ? 'One action' : noun(failures.length)} could not be ${decision === 'approve' ? 'approved' : 'rejected'}:`);
    setMessage({ kind: failed === 0 ? 'info' : 'error', text: parts.join(' '), failures });
    await load().catch(() => {});
    return failed === 0;
  };

  const applyFilters = (event: Event) => {
    event.preventDefault();
    const form = new FormData(event.currentTarget as HTMLFormElement);
    const query = new URLSearchParams();
    const nextStatus = String(form.get('status') ?? '');
    const nextRun = String(form.get('run_id') ?? '').trim();
    if (nextStatus) query.set('status', nextStatus);
    if (nextRun) query.set('run_id', nextRun);
    navigate(routePaths.approvals(projectId, query), { replace: true });
  };

  const list = actions.state === 'ready' ? actions.value : [];
  const selectable = list.filter((action) => ACTIONABLE_STATUSES.includes(action.status));
  const selectedIds = selectable.filter((action) => selected.has(action.id)).map((action) => action.id);
  // Nothing is decided on a list that could not be read again: it may show versions that are gone.
  const stale = refreshError !== null && actions.state === 'ready';
  const actingAllowed = canAct === true && !stale;
  const anyBusy = busy.size > 0;

  return (
    <section aria-labelledby="page-title">
      <AccountNav projectId={projectId} account={account} current="approvals" />
      <h1 id="page-title">Approvals</h1>
      {canAct === false && (
        <p class="notice">Your API key is read-only: you can see every action, but approving and rejecting need a key with write scope.</p>
      )}
      {canAct === null && scopeNote && <p class="notice" role="alert">{scopeNote}</p>}
      {stale && (
        <p class="notice" role="alert">
          The list could not be refreshed ({refreshError}), so it may be out of date. Approving and rejecting are disabled until it
          can be read again; the page keeps trying.
        </p>
      )}
      <form key={`${status}|${runId}`} class="filters" onSubmit={applyFilters} aria-label="Filter actions">
        <div class="field">
          <label for="filter-status">Status</label>
          <select id="filter-status" name="status">
            <option value="" selected={status === ''}>All statuses</option>
            {ACTION_STATUSES.map((value) => <option key={value} value={value} selected={status === value}>{value.replace('_', ' ')}</option>)}
          </select>
        </div>
        <div class="field">
          <label for="filter-run">Run id</label>
          <input id="filter-run" name="run_id" type="text" defaultValue={runId} spellcheck={false} autoComplete="off" placeholder="any run" />
        </div>
        <button type="submit" class="button-secondary">Apply filters</button>
      </form>
      <div class="bulk-bar" role="group" aria-label="Selected actions">
        <label class="inline">
          <input
            type="checkbox"
            checked={selectable.length > 0 && selectedIds.length === selectable.length}
            disabled={!actingAllowed || anyBusy || selectable.length === 0}
            onChange={(event) => setSelected((event.currentTarget as HTMLInputElement).checked ? new Set(selectable.map((action) => action.id)) : new Set())}
          />
          Select all waiting
        </label>
        <button type="button" disabled={!actingAllowed || anyBusy || selectedIds.length === 0} onClick={() => void decide(selectedIds, 'approve')}>
          Approve selected ({selectedIds.length})
        </button>
        <button type="button" class="button-secondary" disabled={!actingAllowed || anyBusy || selectedIds.length === 0} onClick={() => setBulkRejecting(true)}>
          Reject selected ({selectedIds.length})
        </button>
      </div>
      {/* Stays up, disabled, while its rejections are in flight (the selection is cleared as they start). */}
      {bulkRejecting && actingAllowed && (selectedIds.length > 0 || anyBusy) && (
        <form class="reject-form" onSubmit={(event) => {
          event.preventDefault();
          // A second submit while the first is in flight (before the page re-rendered) sends nothing and keeps the form.
          if (bulkReason.trim() === '' || anyBusy || selectedIds.some((id) => inFlight.current.has(id))) return;
          void decide(selectedIds, 'reject', bulkReason.trim()).then(() => { setBulkRejecting(false); setBulkReason(''); });
        }}>
          <label for="bulk-reason">Reason</label>
          <textarea id="bulk-reason" rows={2} maxLength={2000} required value={bulkReason}
            onInput={(event) => setBulkReason((event.currentTarget as HTMLTextAreaElement).value)} />
          <div class="decision">
            <button type="submit" class="button-danger" disabled={anyBusy}>Confirm reject</button>
            <button type="button" class="button-quiet" disabled={anyBusy} onClick={() => setBulkRejecting(false)}>Cancel</button>
          </div>
        </form>
      )}
      <p class={`message ${message?.kind ?? ''}`} role="status" aria-live="polite">{message?.text ?? ''}</p>
      {message?.failures && message.failures.length > 0 && (
        <ul class="message-failures" aria-label="Actions that could not be decided">
          {message.failures.map((failure, index) => <li key={index}>{failure}</li>)}
        </ul>
      )}
      <LoadState loadable={actions} loadingText="Loading actions…" emptyText={status || runId ? 'No action matches these filters.' : 'No action has been proposed on this account yet.'}>
        {(rows) => (
          <ol class="action-list" aria-label="Actions">
            {rows.map((action) => (
              <li key={action.id}>
                <ApprovalCard
                  action={action}
                  canAct={actingAllowed}
                  busy={busy.has(action.id)}
                  selected={selected.has(action.id)}
                  onToggleSelected={(on) => setSelected((previous) => {
                    const next = new Set(previous);
                    if (on) next.add(action.id);
                    else next.delete(action.id);
                    return next;
                  })}
                  onApprove={() => void decide([action.id], 'approve')}
                  onApproveEdited={(edit) => decide([action.id], 'approve', undefined, edit)}
                  onReject={(reason) => decide([action.id], 'reject', reason)}
                />
              </li>
            ))}
          </ol>
        )}
      </LoadState>
    </section>
  );
}

function describe(error: unknown): string {
  if (error instanceof ApiProblem) return error.message;
  return error instanceof Error ? error.message : String(error);
}

/** A failed decision as the problem states it: its title (the kind of failure) and its detail (this one). */
function describeFailure(error: unknown): string {
  if (!(error instanceof ApiProblem)) return describe(error);
  const title = error.title?.replace(/[.\s]+$/, '');
  if (title && error.detail && error.detail !== error.title) return `${title}. ${error.detail}`;
  return error.message;
}

/** A failure that may pass by itself: no answer, a timeout, a rate limit or a server error. */
function isTransient(error: unknown): boolean {
  if (!(error instanceof ApiProblem)) return true;
  return error.status === 0 || error.status === 408 || error.status === 429 || error.status >= 500;
}
