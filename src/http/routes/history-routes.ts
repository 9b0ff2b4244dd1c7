import type { Router } from '@koa/router';
import { APPROVALS_PROJECTION } from '../../../projections/approvals/approvals-projection.ts';
import { RUNS_PROJECTION } from '../../../projections/runs/runs-projection.ts';
import { findRun, isTerminal } from '../../../projections/runs/run-view.ts';
import type { Principal } from '../../auth/scopes.ts';
import { json, ref, requestIdHeader, responseRef } from '../openapi/openapi-helpers.ts';
import { mountRoutes } from '../route-table/mount-routes.ts';
import { defineRoute, type RouteDefinition } from '../route-table/route-definition.ts';
import { admitRawEvent } from '../../events/admit-raw-event.ts';
import type { RawStoredMessage } from '../../event-store/event-store.ts';
import { accountOf } from './account-access.ts';
import type { ApiContext } from './api-context.ts';
import { mergeBySequence } from './history-scan.ts';
import { markChainBreaks, runsProjectionVerdicts, type HistoryEntry, type PageItem } from './history-chain-marks.ts';
import { PROJECT_ID } from './path-parameters.ts';
import { CURSOR_MESSAGES, cursorParameter, pageSizeParameter, RUN_ID_FILTER } from './query-parameters.ts';
import { streams } from '../../event-store/subjects.ts';

const HISTORY_PAGE = { default: 100, max: 500 } as const;

interface HistoryQuery {
  run_id?: string;
  limit: number;
  cursor: number;
}

export const listHistoryRoute = defineRoute<ApiContext>()<HistoryQuery>({
  method: 'get',
  path: '/api/v1/accounts/{projectId}/history',
  operationId: 'listHistory',
  tags: ['history'],
  summary: 'Read the event history of an account',
  description:
    'Every event of the account, read from the event log itself in stream order: the event envelope (docs/events.md) plus its ' +
    'stream sequence `seq`; `ToolCalled` events carry the tool’s full output. `next_cursor` is the `seq` to pass as `cursor` for ' +
    'the next page (null on the last); `run_id` keeps the events correlated with one run and reads only that run’s own subjects ' +
    '(its account subject while it was live, its run subject, its actions’ and the account’s quota subjects). Each request reads at ' +
    'most `HISTORY_SCAN_BUDGET` events and answers at most `HISTORY_MAX_PAGE_BYTES` of JSON (a single larger event still comes alone): ' +
    'a page cut short by either is shorter than `limit` and still carries `next_cursor`, so only a null `next_cursor` means the end. ' +
    'A stored message that is not a trustworthy event (not JSON, fails its schema, unknown type or version, envelope not matching its ' +
    'subject) is listed in its place as `{seq, subject, corrupt: true, code, error}`, never a 500; so is a replayed copy of a signed event ' +
    '(code `chain-broken`, as the projections judged it). While the projections have not judged the newest events, a page waits up to ' +
    '3 s and then ends at the last event they judged, with `next_cursor` there (the `cursor` sent, on an empty page, when they judged none past it).',
  access: 'read',
  backedBy: ['event-log', 'database'],
  pathParameters: { projectId: PROJECT_ID },
  query: {
    cursor: { ...cursorParameter('The `next_cursor` of the previous page: events after this stream sequence.'), schema: { ...cursorParameter('').schema, default: 0 } },
    limit: pageSizeParameter(HISTORY_PAGE),
    run_id: RUN_ID_FILTER,
  },
  queryMessages: CURSOR_MESSAGES,
  responses: {
    '200': { description: 'One page of events.', headers: requestIdHeader, content: json(ref('HistoryList')) },
    '404': responseRef('AccountNotFound'),
  },
  handler: (api) => async (ctx, { principal, params, query }) => {
    const accountId = params.projectId!;
    await accountOf(api, principal, accountId);
    const runId = query.run_id;
    const source = runId === undefined ? accountSource(api, principal, accountId, query.cursor) : await runSource(api, principal, accountId, runId, query.cursor);
    ctx.body = source === null ? { object: 'list', data: [], next_cursor: null } : await readPage(api, source, query.limit, runId, query.cursor);
  },
});

export const HISTORY_ROUTES: readonly RouteDefinition<ApiContext>[] = [listHistoryRoute];

/**
 * GET /api/v1/accounts/{projectId}/history: every event of the account, in stream order,
 * read from the event log itself (not a read model) — tool calls with their full output.
 * Paginated by cursor (a stream sequence), filterable by run.
 *
 * Bounded per request: at most HISTORY_SCAN_BUDGET events are read and at most
 * HISTORY_MAX_PAGE_BYTES of JSON answered; a page cut short by either still carries a
 * next_cursor, so a client walks on. A stored message that does not parse, fails its
 * schema or does not match its subject is listed as `{seq, subject, corrupt: true, error}`,
 * and so is a replayed copy (`chain-broken`, see history-chain-marks.ts).
 */
export function historyRouter(api: ApiContext): Router {
  return mountRoutes(HISTORY_ROUTES, api, { limits: api.config, keys: api.keys });
}

function accountSource(api: ApiContext, principal: Principal, accountId: string, after: number): AsyncGenerator<RawStoredMessage> {
  return api.store.readRaw(api.subjects.filter(principal.workspaceId, accountId, '*'), after + 1);
}

/**
 * A run's own subjects instead of the whole account: the account subject while the run
 * was live (its lifecycle events), its run subject (tool calls), its actions' subjects and
 * the account's quota subjects from when it was queued. Null when the run is not this
 * account's (answered like a run without events). An id that is not a run but an action
 * proposed outside a run reads that action's subject (its events correlate with its id).
 */
async function runSource(api: ApiContext, principal: Principal, accountId: string, runId: string, after: number): Promise<AsyncGenerator<RawStoredMessage> | null> {
  let run = await findRun(api.db, principal.workspaceId, runId);
  let action = run ? undefined : await findRunlessAction(api, principal, accountId, runId);
  if (!run && !action) {
    await Promise.all([api.barrier.catchUp(RUNS_PROJECTION), api.barrier.catchUp(APPROVALS_PROJECTION)]);
    run = await findRun(api.db, principal.workspaceId, runId);
    action = run ? undefined : await findRunlessAction(api, principal, accountId, runId);
  }
  const { store, subjects } = api;
  // An action proposed outside a run (the target endpoint) correlates its events with its own id.
  if (action) return store.readRaw(subjects.forAggregate(streams.action(principal.workspaceId, accountId, action.id)), Math.max(after + 1, Number(action.proposed_seq)));
  if (!run || run.account_id !== accountId) return null;
  const from = Math.max(after + 1, Number(run.queued_seq));
  const terminal = isTerminal(run.status);
  const sources = [
    store.readRaw(subjects.forAggregate(streams.account(principal.workspaceId, accountId)), from, terminal ? Number(run.last_seq) : undefined),
    store.readRaw(subjects.forAggregate(streams.run(principal.workspaceId, accountId, runId)), from),
    store.readRaw(subjects.filter(principal.workspaceId, accountId, 'quota'), from),
  ];
  if (terminal) {
    // The read model has applied the run's end, so it knows every action the run proposed.
    const actions = await api.db.selectFrom('run_actions').select('id').where('run_id', '=', runId).execute();
    for (const { id } of actions) sources.push(store.readRaw(subjects.forAggregate(streams.action(principal.workspaceId, accountId, id)), from));
  } else {
    sources.push(store.readRaw(subjects.filter(principal.workspaceId, accountId, 'action'), from));
  }
  return mergeBySequence(sources);
}

function findRunlessAction(api: ApiContext, principal: Principal, accountId: string, actionId: string) {
  return api.db
    .selectFrom('approvals')
    .select(['id', 'proposed_seq'])
    .where('id', '=', actionId)
    .where('workspace_id', '=', principal.workspaceId)
    .where('account_id', '=', accountId)
    .where('run_id', 'is', null)
    .executeTakeFirst();
}

/** The list around the entries at its largest (the longest cursor): what a page carries besides them. */
const PAGE_ENVELOPE_BYTES = Buffer.byteLength(JSON.stringify({ object: 'list', data: [], next_cursor: String(Number.MAX_SAFE_INTEGER) }));

async function readPage(api: ApiContext, source: AsyncGenerator<RawStoredMessage>, pageSize: number, runId: string | undefined, cursor: number) {
  const { historyScanBudget, historyMaxPageBytes } = api.config;
  const items: PageItem[] = [];
  // The cap is on the whole body: the list's own members count too.
  let bytes = PAGE_ENVELOPE_BYTES;
  let scanned = 0;
  let lastScanned = 0;
  let nextCursor: number | null = null;
  try {
    for await (const raw of source) {
      if (scanned === historyScanBudget) {
        // The budget ran out before the end: the page may be short, the cursor moves on.
        nextCursor = lastScanned;
        break;
      }
      scanned++;
      const admitted = admitRawEvent(api.store.admission, raw);
      let entry: HistoryEntry;
      if (admitted.kind === 'corrupt') {
        entry = { seq: admitted.seq, subject: admitted.subject, corrupt: true, code: admitted.code, error: admitted.error };
      } else {
        if (runId !== undefined && admitted.event.correlation_id !== runId) {
          lastScanned = raw.seq;
          continue;
        }
        entry = { seq: admitted.seq, ...admitted.event };
      }
      if (items.length === pageSize) {
        nextCursor = lastScanned;
        break;
      }
      const size = Buffer.byteLength(JSON.stringify(entry)) + 1;
      // A page always carries at least one entry, so a walk makes progress whatever the cap.
      if (items.length > 0 && bytes + size > historyMaxPageBytes) {
        nextCursor = lastScanned;
        break;
      }
      bytes += size;
      items.push({ seq: raw.seq, subject: raw.subject, entry });
      lastScanned = raw.seq;
    }
  } finally {
    await source.return(undefined);
  }
  const marked = await markChainBreaks(runsProjectionVerdicts(api.barrier, api.db), items, cursor);
  if (marked.cutAt !== null) nextCursor = marked.cutAt;
  return { object: 'list', data: marked.entries, next_cursor: nextCursor === null ? null : String(nextCursor) };
}
