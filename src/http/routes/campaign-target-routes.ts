import Router from '@koa/router';
import type { Context } from 'koa';
import { v7 as uuidv7 } from 'uuid';
import { APPROVALS_PROJECTION } from '../../../projections/approvals/approvals-projection.ts';
import { findApproval } from '../../../projections/approvals/approval-view.ts';
import { authenticate, principalOf } from '../../auth/authenticate.ts';
import type { Principal } from '../../auth/scopes.ts';
import { requireScope } from '../../auth/scopes.ts';
import { CampaignNotFoundError } from '../../platform/platform-errors.ts';
import { targetBasisOf, type ActionDraft } from '../../policy/action-draft.ts';
import { approvalsUrl } from '../../policy/proposal-service.ts';
import { requestFingerprint, validateIdempotencyKey } from '../idempotency/idempotency-store.ts';
import { readJsonBody } from '../json-body.ts';
import { bodyValidator } from '../request-validation.ts';
import { accountOf, connectedAccount } from './account-access.ts';
import { isIdToken, type ApiContext } from './api-context.ts';
import { StrategyMismatchError } from './target-errors.ts';

interface TargetBody {
  target_cpa?: number;
  target_roas_pct?: number;
  reason: string;
  auto_apply?: boolean;
}

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
  const router = new Router();
  const validate = bodyValidator<TargetBody>({
    type: 'object',
    additionalProperties: false,
    required: ['reason'],
    oneOf: [{ required: ['target_cpa'] }, { required: ['target_roas_pct'] }],
    properties: {
      target_cpa: { type: 'number', exclusiveMinimum: 0, maximum: 1_000_000 },
      target_roas_pct: { type: 'number', exclusiveMinimum: 0, maximum: 100_000 },
      reason: { type: 'string', minLength: 1, maxLength: 2000, pattern: '\\S' },
      auto_apply: { type: 'boolean' },
    },
  });

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
    const strategy = campaign.bidding_strategy;
    const basis = targetBasisOf(campaign);
    let draft: ActionDraft;
    let summary: string;
    if (body.target_cpa !== undefined) {
      if (strategy.type !== 'maximize_conversions' || strategy.target_cpa === null) throw new StrategyMismatchError(campaign.id, strategy, 'target_cpa');
      const target = Math.round(body.target_cpa * 100) / 100;
      draft = { kind: 'set_target_cpa', params: { campaign_id: campaign.id, target_cpa: target }, based_on: { ...basis, target_cpa: strategy.target_cpa } };
      summary = `Change the target CPA of "${campaign.name}" from ${strategy.target_cpa} to ${target}`;
    } else {
      if (strategy.type !== 'maximize_conversion_value' || strategy.target_roas_pct === null) {
        throw new StrategyMismatchError(campaign.id, strategy, 'target_roas_pct');
      }
      const target = Math.round(body.target_roas_pct! * 10) / 10;
      draft = {
        kind: 'set_target_roas',
        params: { campaign_id: campaign.id, target_roas_pct: target },
        based_on: { ...basis, target_roas_pct: strategy.target_roas_pct },
      };
      summary = `Change the target ROAS of "${campaign.name}" from ${strategy.target_roas_pct}% to ${target}%`;
    }
    const action = await api.proposals.propose({
      workspaceId: principal.workspaceId,
      accountId,
      runId: null,
      draft,
      summary,
      reason: body.reason,
      autoApply: body.auto_apply ?? false,
      actionId,
      // Server-chosen: a client's X-Request-Id could name another run and join its history.
      meta: { actor: { kind: 'api_key', id: principal.keyId }, correlationId: actionId },
    });
    return { object: 'action', ...action, status: action.disposition, project_id: accountId, campaign_id: campaign.id };
  };

  /** The answer the first attempt gave, rebuilt from the approvals read model. */
  const alreadyProposed = async (principal: Principal, accountId: string, campaignId: string, actionId: string): Promise<TargetResponse | undefined> => {
    await api.barrier.catchUp(APPROVALS_PROJECTION);
    const row = await findApproval(api.db, principal.workspaceId, accountId, actionId);
    if (!row) return undefined;
    const action = {
      id: row.id,
      kind: row.kind,
      summary: row.summary,
      risk_tier: row.risk_tier,
      disposition: row.disposition,
      policy_reasons: row.policy_reasons,
      approvals_url: approvalsUrl(api.config.publicBaseUrl, accountId),
    };
    return { object: 'action', ...action, status: action.disposition, project_id: accountId, campaign_id: campaignId };
  };

  const respond = (ctx: Context, status: number, body: TargetResponse, replayed: boolean): void => {
    ctx.status = status;
    if (replayed) ctx.set('Idempotent-Replayed', 'true');
    ctx.body = body;
  };

  router.post('/api/v1/accounts/:projectId/campaigns/:campaignId/target', authenticate(api.keys), async (ctx) => {
    const principal = principalOf(ctx);
    requireScope(principal, 'write');
    const accountId = ctx.params.projectId!;
    const campaignId = ctx.params.campaignId!;
    const target: TargetOf = { principal, accountId, campaignId, state: await accountOf(api, principal, accountId) };
    const body = validate(await readJsonBody(ctx, api.config.bodyLimitBytes));
    const header = ctx.get('idempotency-key');
    if (!header) {
      respond(ctx, 200, await proposeTarget(target, body, uuidv7()), false);
      return;
    }
    const idempotencyKey = validateIdempotencyKey(header);
    // The route is part of the fingerprint: the same key on POST /runs is another request.
    const fingerprint = requestFingerprint({ operation: 'campaign-target', project_id: accountId, campaign_id: campaignId, body });
    const claim = await api.idempotency.claim(principal.keyId, idempotencyKey, fingerprint, uuidv7());
    if (claim.kind === 'replay') {
      respond(ctx, claim.status, claim.body, true);
      return;
    }
    try {
      const actionId = claim.runId;
      const earlier = claim.kind === 'takeover' ? await alreadyProposed(principal, accountId, campaignId, actionId) : undefined;
      const response = earlier ?? (await proposeTarget(target, body, actionId));
      await api.idempotency.complete(principal.keyId, idempotencyKey, 200, response);
      respond(ctx, 200, response, false);
    } catch (error) {
      await api.idempotency.release(principal.keyId, idempotencyKey).catch(() => undefined);
      throw error;
    }
  });
  return router;
}
