import { useCallback, useEffect, useRef, useState } from 'preact/hooks';
import { ApiProblem, apiPaths, apiRequest, describeError, mayPass } from '../api/api-client.ts';
import { ACTIONS_PAGE_SIZE, DECIDED_MAX_PAGES, readActionList, WAITING_MAX_PAGES } from '../api/action-list.ts';
import { canActOn } from '../api/key-abilities.ts';
import { ACTION_STATUSES, ACTIONABLE_STATUSES, type Account, type ActionEdit, type Approval, type ListPage } from '../api/types.ts';
import { LoadState, type Loadable } from '../components/load-state.tsx';
import { Untrusted } from '../components/untrusted-text.tsx';
import { Backoff } from '../live/backoff.ts';
import { usePolling } from '../live/use-polling.ts';
import { navigate } from '../routing/location.ts';
import { routePaths } from '../routing/routes.ts';
import { ApprovalCard } from './approval-card.tsx';
import { AccountNav } from './account-nav.tsx';

/** How often the list is read again: a new proposal appears within this many ms. */
export const APPROVALS_REFRESH_MS = 2500;

/** How long a decision may go unanswered before the page stops waiting and says so (the action is then no longer busy). */
export const DECISION_TIMEOUT_MS = 30_000;

/** One action a decision failed on for a reason other than a conflict: its summary, and what happened. */
interface Failure {
  readonly summary: string;
  readonly problem: string;
}

/** A decision's outcome: a sentence, and one line per action that failed for a reason other than a conflict. */
type Message = { readonly kind: 'info' | 'error'; readonly text: string; readonly failures?: readonly Failure[] } | null;

/** The actions to decide, each with the version the person decided on (sent as `expected_version`). */
type Targets = readonly { readonly id: string; readonly version: string }[];

/** The account's actions, with approve/reject one by one or together, filtered by status and run. */
export function ApprovalsView(props: { projectId: string; search: URLSearchParams }) {
  const { projectId } = props;
  const status = props.search.get('status') ?? '';
  const runId = props.search.get('run_id') ?? '';
  const [actions, setActions] = useState<Loadable<readonly Approval[]>>({ state: 'loading' });
  const [canAct, setCanAct] = useState<boolean | null>(null);
  /** Selected actions, each with the version it had when selected: a new version clears it. */
  const [selected, setSelected] = useState<ReadonlyMap<string, string>>(new Map());
  const [busy, setBusy] = useState<ReadonlySet<string>>(new Set());
  const [message, setMessage] = useState<Message>(null);
  const [bulkRejecting, setBulkRejecting] = useState(false);
  const [bulkReason, setBulkReason] = useState('');
  const [account, setAccount] = useState<Account | null>(null);
  /** Whether the last read listed every action (ActionList): the page says when it did not. */
  const [ending, setEnding] = useState({ waitingComplete: true, decidedComplete: true });
  /** Why the last read of the list failed; null once a read succeeds. While set, nothing can be decided. */
  const [refreshError, setRefreshError] = useState<string | null>(null);
  /** Why the key's scope is not known yet (the probe failed and is retried). */
  const [scopeNote, setScopeNote] = useState<string | null>(null);
  const generation = useRef(0);
  /** Actions with a decision in flight: updated at once (not on the next render), so a second click never sends one twice. */
  const inFlight = useRef(new Set<string>());
  const bulkReasonField = useRef<HTMLTextAreaElement>(null);
  const bulkRejectButton = useRef<HTMLButtonElement>(null);
  // The bulk reason form takes the focus when it opens, so keyboard and screen-reader users land in it.
  useEffect(() => {
    if (bulkRejecting) bulkReasonField.current?.focus();
  }, [bulkRejecting]);

  const load = useCallback(async (signal?: AbortSignal) => {
    const started = ++generation.current;
    try {
      const list = await readActionList(projectId, { status, runId }, signal);
      const { rows } = list;
      // A slower, older read must not overwrite a newer one (e.g. right after an approve).
      if (started !== generation.current) return;
      setActions({ state: 'ready', value: rows });
      setEnding({ waitingComplete: list.waitingComplete, decidedComplete: list.decidedComplete });
      setRefreshError(null);
      // A selection is of the version the person saw: an action that changed since (or is gone, or decided) is unselected.
      setSelected((previous) => new Map([...previous].filter(([id, version]) => rows.some((row) => row.id === id && row.version === version && ACTIONABLE_STATUSES.includes(row.status)))));
    } catch (error) {
      if (signal?.aborted || started !== generation.current) throw error;
      // Keep showing the last list when a refresh fails, but say why and let nothing be decided on
      // it: what is on screen may no longer be what the actions are.
      setActions((previous) => (previous.state === 'ready' ? previous : { state: 'error', message: mayPass(error) ? `${describeError(error)} The page keeps trying.` : describeError(error) }));
      setRefreshError(describeError(error));
      throw error;
    }
  }, [projectId, status, runId]);

  usePolling(load, APPROVALS_REFRESH_MS, [load]);

  useEffect(() => {
    const controller = new AbortController();
    let timer: ReturnType<typeof setTimeout> | undefined;
    const backoff = new Backoff();
    // Until the key's scope is known the buttons stay disabled, and the page says why. A failure
    // that may pass (no answer, 408, 429, 5xx) is retried with backoff, honouring Retry-After.
    const probe = () => {
      canActOn(projectId, controller.signal).then((can) => {
        setCanAct(can);
        setScopeNote(null);
      }, (error: unknown) => {
        if (controller.signal.aborted) return;
        setCanAct(null);
        if (!mayPass(error)) {
          // No such account: the list says so already.
          if (error instanceof ApiProblem && error.slug === 'account-not-found') return;
          setScopeNote(`Approving and rejecting are disabled: the console could not check what this API key may do here. ${describeError(error)}`);
          return;
        }
        const wait = backoff.next(error);
        setScopeNote(`Approving and rejecting are disabled until the console can check what this API key may do: ${describeError(error)} Trying again in ${wait} s.`);
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
   * Approves or rejects each action, as the version the person decided on (`expected_version`),
   * and says how it went. An action whose decision is still in flight is skipped: it is never
   * sent twice. A decision is never retried by the page: when no answer comes (or not within
   * DECISION_TIMEOUT_MS) the page cannot tell whether it was recorded, and says so.
   * Resolves true when every request went through.
   */
  const decide = async (targets: Targets, decision: 'approve' | 'reject', reason?: string, edit?: ActionEdit) => {
    const shown = new Map((actions.state === 'ready' ? actions.value : []).map((action) => [action.id, action]));
    const fresh = targets.filter((target) => !inFlight.current.has(target.id) && shown.has(target.id));
    const freshIds = fresh.map((target) => target.id);
    if (fresh.length === 0) return false;
    for (const id of freshIds) inFlight.current.add(id);
    markBusy(freshIds, true);
    setSelected((previous) => new Map([...previous].filter(([id]) => !freshIds.includes(id))));
    setMessage(null);
    let done = 0;
    let conflicts = 0;
    let changed = 0;
    const failures: Failure[] = [];
    let uncertain = 0;
    try {
      for (const target of fresh) {
        const action = shown.get(target.id)!;
        try {
          const path = decision === 'approve' ? apiPaths.approve(projectId, target.id) : apiPaths.reject(projectId, target.id);
          const body = decision === 'approve'
            ? { ...(edit ? { edit } : {}), expected_version: target.version }
            : { reason, expected_version: target.version };
          const answer = await apiRequest<Approval>('POST', path, { body, timeoutMs: DECISION_TIMEOUT_MS });
          replaceAction(answer.body);
          done += 1;
        } catch (error) {
          // Only `action-not-in-queue` means another decision came first; any other failure says what it was.
          if (error instanceof ApiProblem && error.slug === 'action-not-in-queue') conflicts += 1;
          else if (error instanceof ApiProblem && error.slug === 'action-changed') changed += 1;
          else {
            if (outcomeUnknown(error)) uncertain += 1;
            failures.push({ summary: action.summary, problem: describeDecisionFailure(error, decision) });
          }
        }
      }
    } finally {
      for (const id of freshIds) inFlight.current.delete(id);
      markBusy(freshIds, false);
    }
    const verb = decision === 'approve' ? (edit ? 'Edited and approved' : 'Approved') : 'Rejected';
    const verbed = decision === 'approve' ? 'approved' : 'rejected';
    const noun = (count: number) => `${count} action${count === 1 ? '' : 's'}`;
    const failed = conflicts + changed + failures.length;
    const parts: string[] = [];
    if (done > 0 || failed === 0) parts.push(`${verb} ${noun(done)}.`);
    if (conflicts > 0) parts.push(`Someone else already decided ${conflicts === 1 && fresh.length === 1 ? 'this action' : noun(conflicts)} first; the list has been refreshed.`);
    if (changed > 0) {
      parts.push(`${changed === 1 && fresh.length === 1 ? 'This action' : noun(changed)} changed since the page showed ${changed === 1 ? 'it' : 'them'} ` +
        `(edited, or returned to the queue), so nothing was decided on ${changed === 1 ? 'it' : 'them'}; the list has been refreshed: review ${changed === 1 ? 'it' : 'them'} and decide again.`);
    }
    if (failures.length > 0) {
      const count = failures.length === 1 ? 'One action' : noun(failures.length);
      if (uncertain === 0) parts.push(`${count} could not be ${verbed}:`);
      else if (uncertain === failures.length) parts.push(`${count} may not have been ${verbed}:`);
      else parts.push(`${count} could not be ${verbed}, or may not have been:`);
    }
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
  const selectedTargets = selectable.filter((action) => selected.has(action.id)).map((action) => ({ id: action.id, version: selected.get(action.id)! }));
  const selectedIds = selectedTargets.map((target) => target.id);
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
      {actions.state === 'ready' && !ending.waitingComplete && (
        <p class="notice" role="status">
          More actions are waiting than the page shows: only the oldest {(WAITING_MAX_PAGES * ACTIONS_PAGE_SIZE).toLocaleString('en')} of
          each waiting status are listed. Filter by run id to see the others.
        </p>
      )}
      {actions.state === 'ready' && !ending.decidedComplete && (
        <p class="notice" role="status">
          {status
            ? `There are more ${status.replace('_', ' ')} actions than the page shows: only the newest ${(DECIDED_MAX_PAGES * ACTIONS_PAGE_SIZE).toLocaleString('en')} are listed. `
            : `This account has more actions than the page shows. Every action waiting for a decision is listed, first; of the decided ones, only the newest ${(DECIDED_MAX_PAGES * ACTIONS_PAGE_SIZE).toLocaleString('en')}. `}
          Filter by {status ? 'run id' : 'status or run id'} to see others, or see the <a href={routePaths.history(projectId)}>history</a>.
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
            onChange={(event) => setSelected((event.currentTarget as HTMLInputElement).checked ? new Map(selectable.map((action) => [action.id, action.version])) : new Map())}
          />
          Select all waiting
        </label>
        <button type="button" disabled={!actingAllowed || anyBusy || selectedIds.length === 0} onClick={() => void decide(selectedTargets, 'approve')}>
          Approve selected ({selectedIds.length})
        </button>
        <button type="button" class="button-secondary" ref={bulkRejectButton} disabled={!actingAllowed || anyBusy || selectedIds.length === 0} onClick={() => setBulkRejecting(true)}>
          Reject selected ({selectedIds.length})
        </button>
      </div>
      {/* Stays up, disabled, while its rejections are in flight (the selection is cleared as they start). */}
      {bulkRejecting && actingAllowed && (selectedIds.length > 0 || anyBusy) && (
        <form class="reject-form" onSubmit={(event) => {
          event.preventDefault();
          // A second submit while the first is in flight (before the page re-rendered) sends nothing and keeps the form.
          if (bulkReason.trim() === '' || anyBusy || selectedIds.some((id) => inFlight.current.has(id))) return;
          void decide(selectedTargets, 'reject', bulkReason.trim()).then(() => { setBulkRejecting(false); setBulkReason(''); });
        }}>
          <label for="bulk-reason">Reason</label>
          <textarea id="bulk-reason" ref={bulkReasonField} rows={2} maxLength={2000} required value={bulkReason}
            onInput={(event) => setBulkReason((event.currentTarget as HTMLTextAreaElement).value)} />
          <div class="decision">
            <button type="submit" class="button-danger" disabled={anyBusy}>Confirm reject</button>
            <button type="button" class="button-quiet" disabled={anyBusy} onClick={() => { setBulkRejecting(false); bulkRejectButton.current?.focus(); }}>Cancel</button>
          </div>
        </form>
      )}
      <p class={`message ${message?.kind ?? ''}`} role="status" aria-live="polite">{message?.text ?? ''}</p>
      {message?.failures && message.failures.length > 0 && (
        <ul class="message-failures" aria-label="Actions that could not be decided">
          {message.failures.map((failure, index) => <li key={index}>“<Untrusted text={failure.summary} />”: {failure.problem}</li>)}
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
                    const next = new Map(previous);
                    if (on) next.set(action.id, action.version);
                    else next.delete(action.id);
                    return next;
                  })}
                  onApprove={() => void decide([{ id: action.id, version: action.version }], 'approve')}
                  onApproveEdited={(edit, version) => decide([{ id: action.id, version }], 'approve', undefined, edit)}
                  onReject={(reason) => decide([{ id: action.id, version: action.version }], 'reject', reason)}
                />
              </li>
            ))}
          </ol>
        )}
      </LoadState>
    </section>
  );
}

/** A failed decision as the problem states it: its title (the kind of failure) and its detail (this one). */
function describeFailure(error: unknown): string {
  if (!(error instanceof ApiProblem)) return describeError(error);
  const title = error.title?.replace(/[.\s]+$/, '');
  if (title && error.detail && error.detail !== error.title) return `${title}. ${error.detail}`;
  return error.message;
}

/**
 * A failure after which the console cannot tell whether the decision was recorded: no answer
 * (or none in time), a server or gateway error, which may come after the service recorded it,
 * or an answer that could not be read.
 */
function outcomeUnknown(error: unknown): boolean {
  if (!(error instanceof ApiProblem)) return true;
  return error.status === 0 || error.status === 408 || error.status >= 500 || error.slug === 'unreadable';
}

/**
 * What a failed decision means for the person: what happened, whether anything was decided,
 * and what to do. Decisions are never retried by the page (a retry could decide twice, or on
 * something the person no longer sees): it says when to decide again.
 */
function describeDecisionFailure(error: unknown, decision: 'approve' | 'reject'): string {
  const verbed = decision === 'approve' ? 'approved' : 'rejected';
  const wait = error instanceof ApiProblem && error.retryAfterSeconds !== null ? error.retryAfterSeconds : null;
  const when = wait === null ? '' : ` The service asks to wait ${wait} s first.`;
  if (outcomeUnknown(error)) {
    return `${describeFailure(error)} Nothing was ${verbed}, or it was and the answer was lost: check the action's status in the list ` +
      `(read again just now), and if it is still waiting, decide again.${when}`;
  }
  if (error instanceof ApiProblem && error.status === 429) {
    return `${describeFailure(error)} Nothing was ${verbed}: decide again ${wait === null ? 'in a moment' : `in ${wait} s`}.`;
  }
  return describeFailure(error);
}
