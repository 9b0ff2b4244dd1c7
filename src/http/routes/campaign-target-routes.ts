import type { Router } from '@koa/router';
import type { Context } from 'koa';
import { v7 as uuidv7 } from 'uuid';
import { APPROVALS_PROJECTION } from '../../../projections/approvals/approvals-projection.ts';
import { findApproval } from '../../../projections/approvals/approval-view.ts';
import type { Principal } from '../../auth/scopes.ts';
import { ValidationError } from '../../errors/common-errors.ts';
import { CampaignNotFoundError } from '../../platform/platform-errors.ts';
import { targetChangeDraft } from '../../policy/target-change-draft.ts';
import { idempotencyKeyOf, requestFingerprint } from '../idempotency/idempotency-store.ts';
import { TakeoverUndecidedError } from '../idempotency/idempotency-errors.ts';
import { headerRef, json, problem, ref, requestIdHeader, responseRef, TEXT_MAX_LENGTH } from '../openapi/openapi-helpers.ts';
import { toActionRepresentation, type ActionRepresentation } from '../representations/action-representation.ts';
import { mountRoutes } from '../route-table/mount-routes.ts';
import { defineRoute, type RouteDefinition } from '../route-table/route-definition.ts';
import { accountOf, connectedAccount } from './account-access.ts';
import { isIdToken, type ApiContext } from './api-context.ts';
import { CAMPAIGN_ID, PROJECT_ID } from './path-parameters.ts';
import { StrategyMismatchError } from './target-errors.ts';
import { AMOUNT_BOUNDS } from '../../policy/amount-bounds.ts';

interface TargetBody {
  target_cpa?: number;
  target_roas_pct?: number;
  reason: string;
  auto_apply?: boolean;
}

/** The target endpoint's answer: the Action, as proposed (its disposition is its status), on its campaign. */
function targetResponse(action: ActionRepresentation, accountId: string, campaignId: string): Record<string, unknown> {
  return { object: 'action', ...action, status: action.disposition, project_id: accountId, campaign_id: campaignId };
}

const handleTarget = (api: ApiContext) => {
  type TargetResponse = Record<string, unknown>;
  interface TargetOf {
    readonly principal: Principal;
    readonly accountId: string;
    readonly campaignId: string;
    readonly state: Awaited<ReturnType<typeof accountOf>>;
  }

  const proposeTarget = async (target: TargetOf, body: TargetBody, actionId: string): Promise<TargetResponse> => {
    const { principal, accountId, campaignId, state } = target;
    const account = connectedAccount(accountId, state);
    const campaign = isIdToken(campaignId) ? await api.platform.getCampaign(account, campaignId) : null;
    if (!campaign || campaign.status === 'removed') throw new CampaignNotFoundError(campaignId);
    const change = targetChangeDraft(
      campaign,
      body.target_cpa !== undefined ? { field: 'target_cpa', value: body.target_cpa } : { field: 'target_roas_pct', value: body.target_roas_pct! },
    );
    if (!change.ok) throw new StrategyMismatchError(campaign.id, campaign.bidding_strategy, change.field);
    const { draft, summary } = change;
    const action = await api.proposals.propose({
      workspaceId: principal.workspaceId,
      accountId,
      runId: null,
      draft,
      summary,
      reason: body.reason,
      autoApply: body.auto_apply ?? false,
      actionId,
      campaign,
      // Server-chosen: a client's X-Request-Id could name another run and join its history.
      meta: { actor: { kind: 'api_key', id: principal.keyId }, correlationId: actionId },
    });
    return targetResponse(toActionRepresentation(action, accountId, api.config.publicBaseUrl), accountId, campaign.id);
  };

  /** The answer the first attempt gave, rebuilt from the approvals read model. */
  const alreadyProposed = async (principal: Principal, accountId: string, campaignId: string, actionId: string): Promise<TargetResponse | undefined> => {
    // Not caught up: whether the first attempt proposed cannot be told; the claim is kept for a retry (see TakeoverUndecidedError).
    if (!(await api.barrier.catchUp(APPROVALS_PROJECTION))) throw new TakeoverUndecidedError();
    const row = await findApproval(api.db, principal.workspaceId, accountId, actionId);
    if (!row) return undefined;
    return targetResponse(toActionRepresentation(row, accountId, api.config.publicBaseUrl), accountId, campaignId);
  };

  const respond = (ctx: Context, status: number, body: TargetResponse, replayed: boolean): void => {
    ctx.status = status;
    if (replayed) ctx.set('Idempotent-Replayed', 'true');
    ctx.body = body;
  };

  /**
   * "Exactly one of" in words that fit this campaign: when both or neither target was sent
   * and the campaign can be read, the message says which one its strategy takes.
   */
  const explainChoice = async (error: ValidationError, target: TargetOf): Promise<ValidationError> => {
    if (!error.errors.some((e) => e.pointer === '/' && e.message.includes('exactly one of'))) return error;
    const campaign = await (async () => api.platform.getCampaign(connectedAccount(target.accountId, target.state), target.campaignId))().catch(() => null);
    const strategy = campaign?.bidding_strategy;
    const takes =
      strategy?.target_cpa != null ? 'target_cpa (this campaign bids on a target CPA)' : strategy?.target_roas_pct != null ? 'target_roas_pct (this campaign bids on a target ROAS)' : null;
    if (takes === null) return error;
    const errors = error.errors.map((e) => (e.pointer === '/' && e.message.includes('exactly one of') ? { pointer: '/', message: `the body: send ${takes}, and not the other` } : e));
    return new ValidationError(errors.map((e) => e.message).join('; '), errors);
  };

  return async (ctx: Context, request: { principal: Principal; params: Readonly<Record<string, string>>; body: () => Promise<TargetBody> }) => {
    const { principal, params } = request;
    const accountId = params.projectId!;
    const campaignId = params.campaignId!;
    const target: TargetOf = { principal, accountId, campaignId, state: await accountOf(api, principal, accountId) };
    const body = await request.body().catch(async (error: unknown) => {
      throw error instanceof ValidationError ? await explainChoice(error, target) : error;
    });
    const idempotencyKey = idempotencyKeyOf(ctx.headers);
    if (idempotencyKey === null) {
      respond(ctx, 200, await proposeTarget(target, body, uuidv7()), false);
      return;
    }
    // The route is part of the fingerprint: the same key on POST /runs is another request.
    const fingerprint = requestFingerprint({ operation: 'campaign-target', project_id: accountId, campaign_id: campaignId, body });
    const claim = await api.idempotency.claim(principal.keyId, idempotencyKey, fingerprint, uuidv7());
    if (claim.kind === 'replay') {
      respond(ctx, claim.status, claim.body, true);
      return;
    }
    const actionId = claim.runId;
    const earlier = claim.kind === 'takeover' ? await alreadyProposed(principal, accountId, campaignId, actionId) : undefined;
    try {
      const response = earlier ?? (await proposeTarget(target, body, actionId));
      await api.idempotency.complete(claim.held, 200, response);
      respond(ctx, 200, response, false);
    } catch (error) {
      await api.idempotency.giveUp(claim.held, error).catch(() => undefined);
      throw error;
    }
  };
};

export const setCampaignTargetRoute = defineRoute<ApiContext>()<Record<string, never>, TargetBody>({
  method: 'post',
  path: '/api/v1/accounts/{projectId}/campaigns/{campaignId}/target',
  operationId: 'setCampaignTarget',
  tags: ['campaigns'],
  summary: 'Propose a new target CPA or ROAS for a campaign',
  description:
    'Proposes a change of the target on the bidding strategy the campaign already uses; the proposal goes through the same ' +
    'safe-apply policy and auto-apply gates as the agent’s, and the response is the resulting action. `target_cpa` needs ' +
    '`maximize_conversions` with a target CPA, `target_roas_pct` needs `maximize_conversion_value` with a target ROAS; anything ' +
    'else is refused with 409 `strategy-mismatch` (changing the strategy type is not supported). A campaign on a portfolio ' +
    'strategy is flagged for review (the change moves every campaign on the portfolio) and never auto-applied. ' +
    '`Idempotency-Key` works exactly as on POST /api/v1/runs: a retry replays the first 200 with `Idempotent-Replayed: true` ' +
    '(the same action, never a second proposal), another body under the same key answers 422 `idempotency-key-reused`, and a ' +
    'retry while the first request runs answers 409 `idempotent-request-in-progress`.',
  access: 'write',
  backedBy: ['event-log', 'database', 'platform'],
  pathParameters: { projectId: PROJECT_ID, campaignId: CAMPAIGN_ID },
  headers: ['IdempotencyKey'],
  body: {
    component: 'SetTargetRequest',
    required: true,
    description: 'Exactly one of `target_cpa` and `target_roas_pct` (both or neither: 422). Unknown members are refused (422).',
    schema: {
      type: 'object',
      additionalProperties: false,
      required: ['reason'],
      oneOf: [{ required: ['target_cpa'] }, { required: ['target_roas_pct'] }],
      properties: {
        target_cpa: { type: 'number', ...AMOUNT_BOUNDS.target_cpa, description: 'New target CPA (rounded to cents; at least 0.01).' },
        target_roas_pct: { type: 'number', ...AMOUNT_BOUNDS.target_roas_pct, description: 'New target ROAS in percent (rounded to 0.1; at least 0.1).' },
        reason: { type: 'string', minLength: 1, maxLength: TEXT_MAX_LENGTH, pattern: '\\S', description: 'Why; shown to approvers.' },
        auto_apply: { type: 'boolean', default: false, description: 'Lets the safe-apply policy apply it if it is safe.' },
      },
    },
    messages: {
      '/': {
        oneOf:
          'send exactly one of target_cpa (for a campaign that bids on a target CPA) or target_roas_pct (for one that bids on a target ROAS), not both',
      },
    },
  },
  responses: {
    '200': {
      description: 'The proposed action (or, with `Idempotent-Replayed: true`, the replay of the first answer).',
      headers: { ...requestIdHeader, 'Idempotent-Replayed': headerRef('IdempotentReplayed') },
      content: json(ref('TargetAction')),
    },
    '400': responseRef('BadRequest'),
    '404': {
      description: 'No such account (`account-not-found`) or no such campaign in it, or a removed one (`campaign-not-found`).',
      headers: requestIdHeader,
      content: problem(),
    },
    '409': {
      description:
        'The target does not fit the campaign’s bidding strategy (`strategy-mismatch`, naming the strategy and the field it takes), ' +
        'or the account has no connected advertising platform (`account-not-connected`), or a request with the same ' +
        'Idempotency-Key is still being processed (`idempotent-request-in-progress`, with `Retry-After`).',
      headers: { ...requestIdHeader, 'Retry-After': headerRef('RetryAfterOptional') },
      content: problem('TargetConflictProblem'),
    },
    '422': {
      description:
        'The body breaks the schema (`validation-error`, with `errors[]`), the query has a parameter (it takes none), or the ' +
        'Idempotency-Key was first used with another request (`idempotency-key-reused`).',
      headers: requestIdHeader,
      content: problem(),
    },
    '502': responseRef('PlatformRefused'),
  },
  handler: handleTarget,
});

export const CAMPAIGN_TARGET_ROUTES: readonly RouteDefinition<ApiContext>[] = [setCampaignTargetRoute];

/**
 * POST /api/v1/accounts/{projectId}/campaigns/{campaignId}/target: proposes a new target
 * CPA or ROAS on the strategy the campaign already uses. The current strategy is read from
 * the platform; a mismatch is refused (409 strategy-mismatch) instead of guessed. The
 * proposal goes through the same policy and auto-apply gates as the agent's.
 *
 * `Idempotency-Key` works as on POST /runs: the action id is chosen when the key is first
 * claimed, so a retry replays the first answer and a retry after a crash finds the action
 * the first attempt may already have proposed instead of proposing a second one.
 */
export function campaignTargetRouter(api: ApiContext): Router {
  return mountRoutes(CAMPAIGN_TARGET_ROUTES, api, { limits: api.config, keys: api.keys });
}
