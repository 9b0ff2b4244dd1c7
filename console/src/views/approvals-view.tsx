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

type Message = { readonly kind: 'info' | 'error'; readonly text: string } | null;

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
  const generation = useRef(0);

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
      setSelected((previous) => new Set([...previous].filter((id) => rows.some((row) => row.id === id && ACTIONABLE_STATUSES.includes(row.status)))));
    } catch (error) {
      if (signal?.aborted || started !== generation.current) throw error;
      // Keep showing the last list when a refresh fails; say why.
      setActions((previous) => (previous.state === 'ready' ? previous : { state: 'error', message: describe(error) }));
      if (!(error instanceof ApiProblem && error.status === 0)) setMessage({ kind: 'error', text: describe(error) });
      throw error;
    }
  }, [projectId, status, runId]);

  usePolling(load, APPROVALS_REFRESH_MS, [load]);

  useEffect(() => {
    const controller = new AbortController();
    // Unknown: an error (e.g. no such account) is shown by the list; the buttons stay disabled.
    canActOn(projectId, controller.signal).then(setCanAct, () => setCanAct(null));
    apiRequest<ListPage<Account>>('GET', apiPaths.accounts(), { signal: controller.signal })
      .then(({ body }) => setAccount(body.data.find((candidate) => candidate.id === projectId) ?? null), () => {});
    return () => controller.abort();
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

  /** Approves or rejects each action; returns how many succeeded and the failures' texts. */
  const decide = async (ids: readonly string[], decision: 'approve' | 'reject', reason?: string, edit?: ActionEdit) => {
    markBusy(ids, true);
    setMessage(null);
    const failures: string[] = [];
    let conflicted = false;
    let done = 0;
    for (const id of ids) {
      try {
        const path = decision === 'approve' ? apiPaths.approve(projectId, id) : apiPaths.reject(projectId, id);
        const { body } = await apiRequest<Approval>('POST', path, { body: decision === 'approve' ? (edit ? { edit } : {}) : { reason } });
        replaceAction(body);
        done += 1;
      } catch (error) {
        if (error instanceof ApiProblem && error.status === 409) conflicted = true;
        failures.push(describe(error));
      }
    }
    markBusy(ids, false);
    setSelected(new Set());
    const verb = decision === 'approve' ? (edit ? 'Edited and approved' : 'Approved') : 'Rejected';
    const noun = (count: number) => `${count} action${count === 1 ? '' : 's'}`;
    if (failures.length === 0) setMessage({ kind: 'info', text: `${verb} ${noun(done)}.` });
    else if (conflicted) {
      setMessage({
        kind: 'error',
        text: `${done > 0 ? `${verb} ${noun(done)}. ` : ''}Someone else already decided ${failures.length === 1 ? 'this action' : `${noun(failures.length)}`} first; the list has been refreshed.`,
      });
    } else setMessage({ kind: 'error', text: `${done > 0 ? `${verb} ${noun(done)}. ` : ''}${failures.join(' ')}` });
    await load().catch(() => {});
    return failures.length === 0;
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
  const actingAllowed = canAct === true;

  return (
    <section aria-labelledby="page-title">
      <AccountNav projectId={projectId} account={account} current="approvals" />
      <h1 id="page-title">Approvals</h1>
      {canAct === false && (
        <p class="notice">Your API key is read-only: you can see every action, but approving and rejecting need a key with write scope.</p>
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
            disabled={!actingAllowed || selectable.length === 0}
            onChange={(event) => setSelected((event.currentTarget as HTMLInputElement).checked ? new Set(selectable.map((action) => action.id)) : new Set())}
          />
          Select all waiting
        </label>
        <button type="button" disabled={!actingAllowed || selectedIds.length === 0} onClick={() => void decide(selectedIds, 'approve')}>
          Approve selected ({selectedIds.length})
        </button>
        <button type="button" class="button-secondary" disabled={!actingAllowed || selectedIds.length === 0} onClick={() => setBulkRejecting(true)}>
          Reject selected ({selectedIds.length})
        </button>
      </div>
      {bulkRejecting && actingAllowed && selectedIds.length > 0 && (
        <form class="reject-form" onSubmit={(event) => {
          event.preventDefault();
          if (bulkReason.trim() === '') return;
          void decide(selectedIds, 'reject', bulkReason.trim()).then(() => { setBulkRejecting(false); setBulkReason(''); });
        }}>
          <label for="bulk-reason">Reason</label>
          <textarea id="bulk-reason" rows={2} maxLength={2000} required value={bulkReason}
            onInput={(event) => setBulkReason((event.currentTarget as HTMLTextAreaElement).value)} />
          <div class="decision">
            <button type="submit" class="button-danger">Confirm reject</button>
            <button type="button" class="button-quiet" onClick={() => setBulkRejecting(false)}>Cancel</button>
          </div>
        </form>
      )}
      <p class={`message ${message?.kind ?? ''}`} role="status" aria-live="polite">{message?.text ?? ''}</p>
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
