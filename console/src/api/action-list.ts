import { apiPaths, fetchAllPages } from './api-client.ts';
import { ACTIONABLE_STATUSES, type ActionStatus, type Approval } from './types.ts';

/** Rows per request (the API's maximum). */
export const ACTIONS_PAGE_SIZE = 200;
/** Actions waiting for a decision are all read, up to this many pages per status (a safety stop, said on the page). */
export const WAITING_MAX_PAGES = 10;
/** Of the other (decided) actions, at most this many pages are read: the newest ones. */
export const DECIDED_MAX_PAGES = 2;

export interface ActionList {
  /** Those waiting for a decision (queued, returned) first, then the others; each oldest first. */
  readonly rows: readonly Approval[];
  /** False when more actions are waiting than WAITING_MAX_PAGES pages hold: only the oldest are in `rows`. */
  readonly waitingComplete: boolean;
  /** False when there are more decided actions than DECIDED_MAX_PAGES pages hold: only the newest are in `rows`. */
  readonly decidedComplete: boolean;
}

export const isWaiting = (action: Approval) => ACTIONABLE_STATUSES.includes(action.status);

/**
 * The account's actions as the approvals page lists them. The API filters on one status at a
 * time, so what is waiting could sit among thousands of decided actions. One capped read of
 * every status, newest first, comes first: on most accounts it holds everything (one request).
 * When it does not, every page of `status=queued` and of `status=returned` is read after it, so
 * each waiting action is listed however many decided ones there are; of those, the newest
 * DECIDED_MAX_PAGES pages are (a decision just taken stays in view). A poll therefore costs at
 * most DECIDED_MAX_PAGES requests plus the waiting actions' pages. Rows are shown oldest first.
 */
export async function readActionList(
  projectId: string,
  filter: { readonly status: string; readonly runId: string },
  signal?: AbortSignal,
): Promise<ActionList> {
  const read = async (status: string, maxPages: number, order: 'oldest_first' | 'newest_first') => {
    const read = await fetchAllPages<Approval>((cursor) => {
      const query = new URLSearchParams({ limit: String(ACTIONS_PAGE_SIZE) });
      if (status) query.set('status', status);
      if (filter.runId) query.set('run_id', filter.runId);
      if (order === 'newest_first') query.set('order', order);
      if (cursor) query.set('cursor', cursor);
      return apiPaths.approvals(projectId, query);
    }, { signal, maxPages });
    return order === 'newest_first' ? { ...read, rows: read.rows.reverse() } : read;
  };

  if (filter.status) {
    const waitingStatus = ACTIONABLE_STATUSES.includes(filter.status as ActionStatus);
    const { rows, complete } = waitingStatus ? await read(filter.status, WAITING_MAX_PAGES, 'oldest_first') : await read(filter.status, DECIDED_MAX_PAGES, 'newest_first');
    return { rows, waitingComplete: !waitingStatus || complete, decidedComplete: waitingStatus || complete };
  }

  const all = await read('', DECIDED_MAX_PAGES, 'newest_first');
  if (all.complete) {
    return { rows: [...all.rows.filter(isWaiting), ...all.rows.filter((row) => !isWaiting(row))], waitingComplete: true, decidedComplete: true };
  }
  const waitingReads = await Promise.all(ACTIONABLE_STATUSES.map((status) => read(status, WAITING_MAX_PAGES, 'oldest_first')));
  // The waiting reads came last, so they say what is waiting now. An action the first read
  // showed waiting that they do not list was decided in between: it is left out until the
  // next read shows it as it is (listing it as waiting would offer to decide it again).
  // One that went from queued to returned between the two reads is in both: keep the newer.
  const newest = new Map<string, Approval>();
  for (const row of waitingReads.flatMap((page) => page.rows)) {
    const seen = newest.get(row.id);
    if (!seen || Date.parse(row.updated_at) >= Date.parse(seen.updated_at)) newest.set(row.id, row);
  }
  const waitingNow = [...newest.values()];
  const waitingIds = new Set(newest.keys());
  const decided = all.rows.filter((row) => !isWaiting(row) && !waitingIds.has(row.id));
  const waiting = waitingNow
    .map((row, index) => ({ row, index }))
    .sort((a, b) => (Date.parse(a.row.created_at) - Date.parse(b.row.created_at)) || (a.index - b.index))
    .map(({ row }) => row);
  return { rows: [...waiting, ...decided], waitingComplete: waitingReads.every((page) => page.complete), decidedComplete: false };
}
