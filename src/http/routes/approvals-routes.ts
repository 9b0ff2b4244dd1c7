import Router from '@koa/router';
import type { Context } from 'koa';
import { ActionNotFoundError } from '../../../commands/action/action-lifecycle.ts';
import type { CommandMeta } from '../../../commands/shared/new-event.ts';
import { ACTION_STATUSES } from '../../../commands/action/action-state.ts';
import { lastSeqOf } from '../../../commands/write-model.ts';
import { APPROVALS_PROJECTION } from '../../../projections/approvals/approvals-projection.ts';
import { findApproval, listApprovals, toApprovalRepresentation, type ApprovalRow } from '../../../projections/approvals/approval-view.ts';
import { authenticate, principalOf } from '../../auth/authenticate.ts';
import { requireScope, type Principal } from '../../auth/scopes.ts';
import { ValidationError, type InvalidParam } from '../../errors/common-errors.ts';
import { integerQueryParam } from '../query-params.ts';
import { bodyValidator } from '../request-validation.ts';
import { accountOf } from './account-access.ts';
import { isUuid, type ApiContext } from './api-context.ts';
import { readOptionalJsonBody } from './optional-json-body.ts';

interface OnAction {
  readonly workspaceId: string;
  readonly accountId: string;
  readonly actionId: string;
  readonly meta: CommandMeta;
}

const DEFAULT_PAGE = 50;
const MAX_PAGE = 200;

/**
 * The approvals view of an account, and the two ways a person acts on a queued action.
 * Approve and reject need write scope; listing needs read scope.
 */
export function approvalsRouter(api: ApiContext): Router {
  const router = new Router();
  const auth = authenticate(api.keys);
  const validateApprove = bodyValidator<{ note?: string }>({
    type: 'object',
    additionalProperties: false,
    properties: { note: { type: 'string', maxLength: 2000 } },
  });
  const validateReject = bodyValidator<{ reason: string }>({
    type: 'object',
    additionalProperties: false,
    required: ['reason'],
    properties: { reason: { type: 'string', minLength: 1, maxLength: 2000, pattern: '\\S' } },
  });

  /** An action of the account, waiting for the read side when it is not there yet. */
  const locateAction = async (principal: Principal, accountId: string, actionId: string): Promise<ApprovalRow> => {
    if (!isUuid(actionId)) throw new ActionNotFoundError(actionId);
    const found = await findApproval(api.db, principal.workspaceId, accountId, actionId);
    if (found) return found;
    await api.barrier.catchUp(APPROVALS_PROJECTION);
    const caughtUp = await findApproval(api.db, principal.workspaceId, accountId, actionId);
    if (!caughtUp) throw new ActionNotFoundError(actionId);
    return caughtUp;
  };

  const respondWithAction = async (ctx: Context, principal: Principal, accountId: string, actionId: string, seq: number | null) => {
    if (seq !== null) await api.barrier.reach(APPROVALS_PROJECTION, seq);
    const row = await findApproval(api.db, principal.workspaceId, accountId, actionId);
    ctx.body = toApprovalRepresentation(row!, api.config.publicBaseUrl);
  };

  router.get('/api/v1/accounts/:projectId/approvals', auth, async (ctx) => {
    const principal = principalOf(ctx);
    const accountId = ctx.params.projectId!;
    await accountOf(api, principal, accountId);
    const { status, run_id: runId, cursor } = ctx.query;
    const errors: InvalidParam[] = [];
    if (status !== undefined && !ACTION_STATUSES.includes(status as never)) {
      errors.push({ pointer: '/status', message: `must be one of ${ACTION_STATUSES.join(', ')}` });
    }
    if (runId !== undefined && (typeof runId !== 'string' || !isUuid(runId))) errors.push({ pointer: '/run_id', message: 'must be a run id' });
    const pageSize = integerQueryParam(ctx.query, 'limit', { min: 1, max: MAX_PAGE, fallback: DEFAULT_PAGE }, errors);
    const afterSeq = cursor === undefined
      ? undefined
      : integerQueryParam(ctx.query, 'cursor', { min: 0, max: Number.MAX_SAFE_INTEGER, fallback: 0 }, errors, 'must be a cursor from a previous page');
    if (errors.length > 0) throw new ValidationError('Invalid query parameters.', errors);
    await api.barrier.catchUp(APPROVALS_PROJECTION);
    const page = await listApprovals(api.db, principal.workspaceId, accountId, {
      status: status as string | undefined,
      runId: runId as string | undefined,
      afterSeq,
      limit: pageSize,
    });
    ctx.body = {
      object: 'list',
      data: page.rows.map((row) => toApprovalRepresentation(row, api.config.publicBaseUrl)),
      next_cursor: page.next === null ? null : String(page.next),
    };
  });

  /** Approve and reject differ only in their body and their command. */
  const decision =
    <B>(validate: (body: unknown) => B, decide: (target: OnAction, body: B) => Promise<{ appended: readonly { seq: number }[] }>) =>
    async (ctx: Context) => {
      const principal = principalOf(ctx);
      requireScope(principal, 'write');
      const accountId = ctx.params.projectId!;
      await accountOf(api, principal, accountId);
      const body = validate(await readOptionalJsonBody(ctx, api.config.bodyLimitBytes));
      const action = await locateAction(principal, accountId, ctx.params.actionId!);
      const target: OnAction = {
        workspaceId: principal.workspaceId,
        accountId,
        actionId: action.id,
        meta: { actor: { kind: 'api_key', id: principal.keyId }, correlationId: action.run_id ?? action.id },
      };
      await respondWithAction(ctx, principal, accountId, action.id, lastSeqOf(await decide(target, body)));
    };

  router.post(
    '/api/v1/accounts/:projectId/approvals/:actionId/approve',
    auth,
    decision(validateApprove, (target, body) => api.writeModel.approveAction({ ...target, note: body.note ?? '' })),
  );
  router.post(
    '/api/v1/accounts/:projectId/approvals/:actionId/reject',
    auth,
    decision(validateReject, (target, body) => api.writeModel.rejectAction({ ...target, reason: body.reason })),
  );

  return router;
}
