import Router from '@koa/router';
import { APPROVALS_PROJECTION } from '../../../projections/approvals/approvals-projection.ts';
import { RUNS_PROJECTION } from '../../../projections/runs/runs-projection.ts';
import { findRun, isTerminal } from '../../../projections/runs/run-view.ts';
import { authenticate, principalOf } from '../../auth/authenticate.ts';
import type { Principal } from '../../auth/scopes.ts';
import { ValidationError, type InvalidParam } from '../../errors/common-errors.ts';
import { integerQueryParam } from '../query-params.ts';
import { admitRawEvent } from '../../events/admit-raw-event.ts';
import type { RawStoredMessage } from '../../event-store/event-store.ts';
import { accountOf } from './account-access.ts';
import { isUuid, type ApiContext } from './api-context.ts';
import { mergeBySequence } from './history-scan.ts';

const DEFAULT_PAGE = 100;
const MAX_PAGE = 500;

/** A stored message that is not a trustworthy event: shown with its place, never its content. */
interface CorruptEntry {
  readonly seq: number;
  readonly subject: string;
  readonly corrupt: true;
  /** Why it was not believed: not-json, schema, unknown-type, subject-mismatch, bad-text, untrusted. */
  readonly code: string;
  readonly error: string;
}

/**
 * GET /api/v1/accounts/{projectId}/history: every event of the account, in stream order,
 * read from the event log itself (not a read model) — tool calls with their full output.
 * Paginated by cursor (a stream sequence), filterable by run.
 *
 * Bounded per request: at most HISTORY_SCAN_BUDGET events are read and at most
 * HISTORY_MAX_PAGE_BYTES of JSON answered; a page cut short by either still carries a
 * next_cursor, so a client walks on. A stored message that does not parse, fails its
 * schema or does not match its subject is listed as `{seq, subject, corrupt: true, error}`.
 */
export function historyRouter(api: ApiContext): Router {
  const router = new Router();
  router.get('/api/v1/accounts/:projectId/history', authenticate(api.keys), async (ctx) => {
    const principal = principalOf(ctx);
    const accountId = ctx.params.projectId!;
    await accountOf(api, principal, accountId);
    const runId = ctx.query.run_id;
    const errors: InvalidParam[] = [];
    const pageSize = integerQueryParam(ctx.query, 'limit', { min: 1, max: MAX_PAGE, fallback: DEFAULT_PAGE }, errors);
    const after = integerQueryParam(ctx.query, 'cursor', { min: 0, max: Number.MAX_SAFE_INTEGER, fallback: 0 }, errors, 'must be a cursor from a previous page');
    if (runId !== undefined && (typeof runId !== 'string' || !isUuid(runId))) errors.push({ pointer: '/run_id', message: 'must be a run id' });
    if (errors.length > 0) throw new ValidationError('Invalid query parameters.', errors);

    const source = runId === undefined ? accountSource(api, principal, accountId, after) : await runSource(api, principal, accountId, runId as string, after);
    ctx.body = source === null ? { object: 'list', data: [], next_cursor: null } : await readPage(api, source, pageSize, runId as string | undefined);
  });
  return router;
}

function accountSource(api: ApiContext, principal: Principal, accountId: string, after: number): AsyncGenerator<RawStoredMessage> {
  return api.writeModel.store.readRaw(api.writeModel.subjects.filter(principal.workspaceId, accountId, '*'), after + 1);
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
  const { writeModel } = api;
  // An action proposed outside a run (the target endpoint) correlates its events with its own id.
  if (action) return writeModel.store.readRaw(writeModel.actionSubject(principal.workspaceId, accountId, action.id), Math.max(after + 1, Number(action.proposed_seq)));
  if (!run || run.account_id !== accountId) return null;
  const from = Math.max(after + 1, Number(run.queued_seq));
  const terminal = isTerminal(run.status);
  const sources = [
    writeModel.store.readRaw(writeModel.accountSubject(principal.workspaceId, accountId), from, terminal ? Number(run.last_seq) : undefined),
    writeModel.store.readRaw(writeModel.runSubject(principal.workspaceId, accountId, runId), from),
    writeModel.store.readRaw(writeModel.subjects.filter(principal.workspaceId, accountId, 'quota'), from),
  ];
  if (terminal) {
    // The read model has applied the run's end, so it knows every action the run proposed.
    const actions = await api.db.selectFrom('run_actions').select('id').where('run_id', '=', runId).execute();
    for (const { id } of actions) sources.push(writeModel.store.readRaw(writeModel.actionSubject(principal.workspaceId, accountId, id), from));
  } else {
    sources.push(writeModel.store.readRaw(writeModel.subjects.filter(principal.workspaceId, accountId, 'action'), from));
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

async function readPage(api: ApiContext, source: AsyncGenerator<RawStoredMessage>, pageSize: number, runId: string | undefined) {
  const { historyScanBudget, historyMaxPageBytes } = api.config;
  const entries: (Record<string, unknown> | CorruptEntry)[] = [];
  let bytes = 0;
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
      const admitted = admitRawEvent(api.writeModel.store.admission, raw);
      let entry: Record<string, unknown> | CorruptEntry;
      if (admitted.kind === 'corrupt') {
        entry = { seq: admitted.seq, subject: admitted.subject, corrupt: true, code: admitted.code, error: admitted.error };
      } else {
        if (runId !== undefined && admitted.event.correlation_id !== runId) {
          lastScanned = raw.seq;
          continue;
        }
        entry = { seq: admitted.seq, ...admitted.event };
      }
      if (entries.length === pageSize) {
        nextCursor = lastScanned;
        break;
      }
      const size = Buffer.byteLength(JSON.stringify(entry)) + 1;
      // A page always carries at least one entry, so a walk makes progress whatever the cap.
      if (entries.length > 0 && bytes + size > historyMaxPageBytes) {
        nextCursor = lastScanned;
        break;
      }
      bytes += size;
      entries.push(entry);
      lastScanned = raw.seq;
    }
  } finally {
    await source.return(undefined);
  }
  return { object: 'list', data: entries, next_cursor: nextCursor === null ? null : String(nextCursor) };
}
