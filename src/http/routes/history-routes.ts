import Router from '@koa/router';
import { authenticate, principalOf } from '../../auth/authenticate.ts';
import { ValidationError } from '../../errors/common-errors.ts';
import { accountOf } from './account-access.ts';
import { isUuid, type ApiContext } from './api-context.ts';

const DEFAULT_PAGE = 100;
const MAX_PAGE = 500;

/**
 * GET /api/v1/accounts/{projectId}/history: every event of the account, in stream order,
 * read from the event log itself (not a read model) — tool calls with their full output.
 * Paginated by cursor (a stream sequence), filterable by run.
 */
export function historyRouter(api: ApiContext): Router {
  const router = new Router();
  router.get('/api/v1/accounts/:projectId/history', authenticate(api.keys), async (ctx) => {
    const principal = principalOf(ctx);
    const accountId = ctx.params.projectId!;
    await accountOf(api, principal, accountId);
    const { cursor, limit, run_id: runId } = ctx.query;
    const errors = [];
    const pageSize = limit === undefined ? DEFAULT_PAGE : Number(limit);
    if (!Number.isInteger(pageSize) || pageSize < 1 || pageSize > MAX_PAGE) errors.push({ pointer: '/limit', message: `must be an integer from 1 to ${MAX_PAGE}` });
    const after = cursor === undefined ? 0 : Number(cursor);
    if (!Number.isInteger(after) || after < 0) errors.push({ pointer: '/cursor', message: 'must be a cursor from a previous page' });
    if (runId !== undefined && (typeof runId !== 'string' || !isUuid(runId))) errors.push({ pointer: '/run_id', message: 'must be a run id' });
    if (errors.length > 0) throw new ValidationError('Invalid query parameters.', errors);

    const filter = api.writeModel.subjects.filter(principal.workspaceId, accountId, '*');
    const entries = [];
    let more = false;
    for await (const { seq, event } of api.writeModel.store.readFiltered(filter, after + 1)) {
      if (runId !== undefined && event.correlation_id !== runId) continue;
      if (entries.length === pageSize) {
        more = true;
        break;
      }
      entries.push({ seq, ...event });
    }
    ctx.body = {
      object: 'list',
      data: entries,
      next_cursor: more ? String(entries[entries.length - 1]!.seq) : null,
    };
  });
  return router;
}
