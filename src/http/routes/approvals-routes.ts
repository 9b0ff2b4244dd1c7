import type { Router } from '@koa/router';
import type { Context } from 'koa';
import { ActionNotFoundError, awaitingApproval, retriesOwnDecision } from '../../../commands/action/action-lifecycle.ts';
import type { ActionEdit } from '../../../commands/action/action-edit.ts';
import { platformAccountOf } from '../../../commands/account/platform-account.ts';
import { loadAccount, loadAction } from '../../../commands/queries.ts';
import { ApprovalsAppliedChangeLookup } from '../../../projections/approvals/applied-change-lookup.ts';
import { MATCH_TYPES } from '../../platform/ads-platform.ts';
import { AccountNotConnectedError } from '../../platform/platform-errors.ts';
import { EditReview } from '../../policy/edit-review.ts';
import type { CommandMeta } from '../../../commands/shared/new-event.ts';
import { ACTION_STATUSES } from '../../../commands/action/action-state.ts';
import { lastSeqOf } from '../../../commands/shared/handle.ts';
import { actionDecider } from '../../../commands/action/action-decider.ts';
import { approveAction } from '../../../commands/action/approve-action.ts';
import { APPROVALS_PROJECTION } from '../../../projections/approvals/approvals-projection.ts';
import { APPROVALS_ORDERS, findApproval, listApprovals, type ApprovalRow, type ApprovalsOrder } from '../../../projections/approvals/approval-view.ts';
import type { Principal } from '../../auth/scopes.ts';
import { json, problem, PROBLEM_MEDIA_TYPE, ref, requestIdHeader, responseRef, TEXT_MAX_LENGTH } from '../openapi/openapi-helpers.ts';
import { toApprovalRepresentation } from '../representations/action-representation.ts';
import { mountRoutes } from '../route-table/mount-routes.ts';
import { defineRoute, type RouteDefinition } from '../route-table/route-definition.ts';
import { accountOf } from './account-access.ts';
import type { ApiContext } from './api-context.ts';
import { ACTION_ID, PROJECT_ID } from './path-parameters.ts';
import { CURSOR_MESSAGES, cursorParameter, pageSizeParameter, RUN_ID_FILTER } from './query-parameters.ts';
import { AMOUNT_BOUNDS, type BoundedAmount } from '../../policy/amount-bounds.ts';

interface OnAction {
  readonly workspaceId: string;
  readonly accountId: string;
  readonly actionId: string;
  readonly meta: CommandMeta;
  /** The action's `version` the client decided on (`expected_version`); absent to decide on what it is now. */
  readonly expectedVersion?: string;
}

const APPROVALS_PAGE = { default: 50, max: 200 } as const;

const route = defineRoute<ApiContext>();

interface ApprovalsQuery {
  status?: string;
  run_id?: string;
  order?: ApprovalsOrder;
  limit?: number;
  cursor?: number;
}

export const listApprovalsRoute = route<ApprovalsQuery>({
  method: 'get',
  path: '/api/v1/accounts/{projectId}/approvals',
  operationId: 'listApprovals',
  tags: ['approvals'],
  summary: 'List the actions of an account with their status',
  description:
    'Every action proposed on the account (by runs or the target endpoint), oldest first (or newest first with ' +
    '`order=newest_first`), with where it stands now. Paginated: pass `next_cursor` as `cursor` for the next page, with the ' +
    'same filters and order; it is null on the last page.',
  access: 'read',
  backedBy: ['event-log', 'database'],
  pathParameters: { projectId: PROJECT_ID },
  query: {
    status: { description: 'Only actions with this status.', schema: { enum: [...ACTION_STATUSES] } },
    run_id: RUN_ID_FILTER,
    order: {
      description: 'By when they were proposed: `oldest_first` (the default) or `newest_first` (the latest decisions and proposals first).',
      schema: { enum: [...APPROVALS_ORDERS], default: 'oldest_first' },
    },
    limit: pageSizeParameter(APPROVALS_PAGE),
    cursor: cursorParameter('The `next_cursor` of the previous page.'),
  },
  queryMessages: CURSOR_MESSAGES,
  responses: {
    '200': { description: 'One page of actions.', headers: requestIdHeader, content: json(ref('ApprovalList')) },
    '404': responseRef('AccountNotFound'),
  },
  handler: (api) => async (ctx, { principal, params, query }) => {
    const accountId = params.projectId!;
    await accountOf(api, principal, accountId);
    await api.barrier.catchUp(APPROVALS_PROJECTION);
    const page = await listApprovals(api.db, principal.workspaceId, accountId, {
      status: query.status,
      runId: query.run_id,
      afterSeq: query.cursor,
      limit: query.limit ?? APPROVALS_PAGE.default,
      order: query.order ?? 'oldest_first',
    });
    ctx.body = {
      object: 'list',
      data: page.rows.map((row) => toApprovalRepresentation(row, api.config.publicBaseUrl)),
      next_cursor: page.next === null ? null : String(page.next),
    };
  },
});

/** An action of the account, waiting for the read side when it is not there yet. */
async function locateAction(api: ApiContext, principal: Principal, accountId: string, actionId: string): Promise<ApprovalRow> {
  const found = await findApproval(api.db, principal.workspaceId, accountId, actionId);
  if (found) return found;
  await api.barrier.catchUp(APPROVALS_PROJECTION);
  const caughtUp = await findApproval(api.db, principal.workspaceId, accountId, actionId);
  if (!caughtUp) throw new ActionNotFoundError(actionId);
  return caughtUp;
}

async function respondWithAction(api: ApiContext, ctx: Context, principal: Principal, accountId: string, actionId: string, seq: number | null): Promise<void> {
  // Nothing appended (the caller's own decision sent again): the read side may not have it yet.
  if (seq !== null) await api.barrier.reach(APPROVALS_PROJECTION, seq);
  else await api.barrier.catchUp(APPROVALS_PROJECTION);
  const row = await findApproval(api.db, principal.workspaceId, accountId, actionId);
  ctx.body = toApprovalRepresentation(row!, api.config.publicBaseUrl);
}

/** Approve and reject differ only in their body and their command. */
const decision =
  <B extends { expected_version?: string }>(decide: (api: ApiContext, target: OnAction, body: B) => Promise<{ appended: readonly { seq: number }[] }>) =>
  (api: ApiContext) =>
  async (ctx: Context, request: { principal: Principal; params: Readonly<Record<string, string>>; body: () => Promise<B> }) => {
    const { principal, params } = request;
    const accountId = params.projectId!;
    await accountOf(api, principal, accountId);
    const body = await request.body();
    const action = await locateAction(api, principal, accountId, params.actionId!);
    const target: OnAction = {
      workspaceId: principal.workspaceId,
      accountId,
      actionId: action.id,
      meta: { actor: { kind: 'api_key', id: principal.keyId }, correlationId: action.run_id ?? action.id },
      ...(body.expected_version === undefined ? {} : { expectedVersion: body.expected_version }),
    };
    await respondWithAction(api, ctx, principal, accountId, action.id, lastSeqOf(await decide(api, target, body)));
  };

/** What approve and reject have in common in the document. */
const decisionResponses = (done: string) => ({
  '200': { description: `The ${done} action.`, headers: requestIdHeader, content: json(ref('Approval')) },
  '404': responseRef('ActionNotFound'),
  '409': responseRef('ActionNotDecidable'),
});

/** The optional precondition of approve and reject. */
const EXPECTED_VERSION_SCHEMA = {
  type: 'string',
  minLength: 1,
  maxLength: 100,
  description:
    'Optional precondition: the action\'s `version` as the client read it (from the approvals list or an earlier answer). ' +
    'When the action has changed since (edited, or approved and returned to the queue), nothing is decided and the answer is ' +
    '409 `action-changed`: read the action again and decide on what it is now. Without it, the action is decided as it is at that moment.',
} as const;

const PRECONDITION_TEXT =
  'Send the action\'s `version` as `expected_version` to decide only on the version the person saw: if the action changed since ' +
  '(edited, or approved and returned to the queue), the answer is 409 `action-changed` and nothing is decided.';

const positiveValue = (what: string, field: BoundedAmount) => ({
  type: 'number',
  exclusiveMinimum: 0,
  maximum: AMOUNT_BOUNDS[field].maximum,
  description: `The new ${what} (replaces the proposed one).`,
});

/** The body's `edit`: one params field of the action's kind, replaced. Which field fits the kind is checked against the action. */
const EDIT_SCHEMA = {
  type: 'object',
  additionalProperties: false,
  minProperties: 1,
  maxProperties: 1,
  description:
    'Optional: change the action before approving it, in the same request. Send exactly one field, the one of the action\'s kind: ' +
    '`keywords` for `add_negative_keywords` (a subset of the proposed keywords, each with its match type: drop keywords or change a match type; ' +
    'a keyword that was not proposed is refused), `daily_budget` for `set_campaign_budget`, `target_cpa` for `set_target_cpa`, ' +
    '`target_roas_pct` for `set_target_roas`. The edited action is classified again by the policy (its new risk tier and reasons are ' +
    'recorded; a version the policy blocks is refused with 422), and the edit is recorded as ActionEdited with both versions.',
  properties: {
    keywords: {
      type: 'array',
      minItems: 1,
      maxItems: 50,
      description: 'The proposed negative keywords to keep, each with the match type to apply.',
      items: {
        type: 'object',
        additionalProperties: false,
        required: ['text', 'match_type'],
        properties: { text: { type: 'string', minLength: 1, maxLength: 80 }, match_type: { enum: [...MATCH_TYPES] } },
      },
    },
    daily_budget: positiveValue('daily budget, in the account\'s currency', 'daily_budget'),
    target_cpa: positiveValue('target CPA, in the account\'s currency', 'target_cpa'),
    target_roas_pct: positiveValue('target ROAS, in percent', 'target_roas_pct'),
  },
} as const;

interface ApproveBody {
  note?: string;
  edit?: ActionEdit;
  expected_version?: string;
}

/** Approves, first putting the approver's edit (if any) through the policy again. */
async function approveWithEdit(api: ApiContext, target: OnAction, body: ApproveBody) {
  if (!body.edit) return approveAction(api.commands, { ...target, note: body.note ?? '' });
  const action = (await loadAction(api.aggregates, target.workspaceId, target.accountId, target.actionId)).state;
  // This very request's edit and approval are both stored already (its answer was lost):
  // nothing to review, nothing to record. Events are never undone, so the loaded state is proof.
  const request = { decision: 'approved', actor: target.meta.actor, text: body.note ?? '', edit: body.edit, expectedVersion: target.expectedVersion } as const;
  if (retriesOwnDecision(action, request)) return { appended: [] };
  // An action that left the queue, or is not the version the client saw, answers 409 whatever the edit
  // says (the decider checks both again on append); unless this request's own edit was stored
  // without its approval, when only the approval is recorded (retriesOwnEdit).
  awaitingApproval({ ...target, edit: body.edit }, action);
  const account = platformAccountOf(target.accountId, (await loadAccount(api.aggregates, target.workspaceId, target.accountId)).state);
  if (!account) throw new AccountNotConnectedError(target.accountId);
  const review = new EditReview(api.platform, api.aggregates, new ApprovalsAppliedChangeLookup(api.db));
  const reviewed = await review.review({ ...target, action, account, edit: body.edit });
  return approveAction(api.commands, { ...target, note: body.note ?? '', edit: reviewed });
}

export const approveActionRoute = route<Record<string, never>, ApproveBody>({
  method: 'post',
  path: '/api/v1/accounts/{projectId}/approvals/{actionId}/approve',
  operationId: 'approveAction',
  tags: ['approvals'],
  summary: 'Approve a queued action, optionally edited first',
  description:
    'Only an action that is `queued` or `returned` can be approved; the apply worker then applies it. Anything else answers 409 ' +
    '`action-not-in-queue` (of two concurrent approvals, one wins). The response is the action as the approvals list shows it. ' +
    'When the workspace requires a distinct approver (`adsagent workspace set WS --require-distinct-approver on`), the key that ' +
    'proposed the action, or started the run that proposed it, answers 403 `distinct-approver-required`. ' +
    'With an `edit`, the action is changed and approved in one step (ActionEdited then ActionApproved): what is approved is exactly what is applied. ' +
    'An edit that adds a keyword, names a field of another kind, or that the policy blocks answers 422 `validation-error` saying what to send instead. ' +
    PRECONDITION_TEXT,
  access: 'write',
  backedBy: ['event-log', 'database', 'platform'],
  pathParameters: { projectId: PROJECT_ID, actionId: ACTION_ID },
  body: {
    component: 'ApproveRequest',
    required: false,
    description: 'Optional; no body means `{}`.',
    schema: {
      type: 'object',
      additionalProperties: false,
      properties: { note: { type: 'string', maxLength: TEXT_MAX_LENGTH }, edit: EDIT_SCHEMA, expected_version: EXPECTED_VERSION_SCHEMA },
    },
    messages: {
      '/edit': {
        minProperties: 'must name the one field to change: `keywords`, `daily_budget`, `target_cpa` or `target_roas_pct` (the one of the action\'s kind)',
        maxProperties: 'must change exactly one field, the one of the action\'s kind',
      },
    },
  },
  responses: {
    ...decisionResponses('approved'),
    '403': responseRef('ApproveForbidden'),
    // An edit is checked against the platform: two more answers than a plain approve.
    '404': {
      description:
        'No such account (`account-not-found`) or no action `actionId` in it (`action-not-found`); another workspace’s look exactly the same. ' +
        'With an `edit`: the action’s campaign no longer exists on the platform (`campaign-not-found`).',
      headers: requestIdHeader,
      content: problem(),
    },
    '409': {
      description:
        'The action is not `queued` or `returned` (`action-not-in-queue`, with `action_status`), or it changed since the ' +
        '`expected_version` sent (`action-changed`, with its current `action_version`: read it again). ' +
        'With an `edit`: the account has no connected platform to check the edit against (`account-not-connected`).',
      headers: requestIdHeader,
      content: { [PROBLEM_MEDIA_TYPE]: { schema: { anyOf: [ref('ActionNotInQueueProblem'), ref('ActionChangedProblem'), ref('Problem')] } } },
    },
  },
  handler: decision(approveWithEdit),
});

interface RejectBody {
  reason: string;
  expected_version?: string;
}

export const rejectActionRoute = route<Record<string, never>, RejectBody>({
  method: 'post',
  path: '/api/v1/accounts/{projectId}/approvals/{actionId}/reject',
  operationId: 'rejectAction',
  tags: ['approvals'],
  summary: 'Reject a queued action',
  description: 'Same rules as approve: only from `queued` or `returned`, otherwise 409 `action-not-in-queue`. A reason is required. ' + PRECONDITION_TEXT,
  access: 'write',
  backedBy: ['event-log', 'database'],
  pathParameters: { projectId: PROJECT_ID, actionId: ACTION_ID },
  body: {
    component: 'RejectRequest',
    required: true,
    // No body is `{}`, so the answer names the missing reason (422) instead of calling an absent body malformed.
    absentIsEmptyObject: true,
    schema: {
      type: 'object',
      additionalProperties: false,
      required: ['reason'],
      properties: { reason: { type: 'string', minLength: 1, maxLength: TEXT_MAX_LENGTH, pattern: '\\S' }, expected_version: EXPECTED_VERSION_SCHEMA },
    },
  },
  responses: decisionResponses('rejected'),
  handler: decision((api, target, body: RejectBody) => api.commands.handle(actionDecider, { type: 'RejectAction', ...target, reason: body.reason })),
});

export const APPROVAL_ROUTES: readonly RouteDefinition<ApiContext>[] = [listApprovalsRoute, approveActionRoute, rejectActionRoute];

/**
 * The approvals view of an account, and the two ways a person acts on a queued action.
 * Approve and reject need write scope; listing needs read scope.
 */
export function approvalsRouter(api: ApiContext): Router {
  return mountRoutes(APPROVAL_ROUTES, api, { limits: api.config, keys: api.keys });
}

