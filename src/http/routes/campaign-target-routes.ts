import Router from '@koa/router';
import { authenticate, principalOf } from '../../auth/authenticate.ts';
import { requireScope } from '../../auth/scopes.ts';
import { CampaignNotFoundError } from '../../platform/platform-errors.ts';
import type { ActionDraft } from '../../policy/action-draft.ts';
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

  router.post('/api/v1/accounts/:projectId/campaigns/:campaignId/target', authenticate(api.keys), async (ctx) => {
    const principal = principalOf(ctx);
    requireScope(principal, 'write');
    const accountId = ctx.params.projectId!;
    const campaignId = ctx.params.campaignId!;
    const state = await accountOf(api, principal, accountId);
    const body = validate(await readJsonBody(ctx, api.config.bodyLimitBytes));
    const account = connectedAccount(accountId, state);
    const campaign = isIdToken(campaignId) ? await api.platform.getCampaign(account, campaignId) : null;
    if (!campaign || campaign.status === 'removed') throw new CampaignNotFoundError(campaignId);
    const strategy = campaign.bidding_strategy;
    const basis = {
      campaign_status: campaign.status,
      strategy_type: strategy.type,
      portfolio_id: strategy.portfolio?.id ?? null,
      campaigns_affected: strategy.portfolio ? strategy.portfolio.campaign_ids.length : 1,
    };
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
      meta: { actor: { kind: 'api_key', id: principal.keyId }, correlationId: String(ctx.state.requestId ?? campaign.id) },
    });
    ctx.status = 200;
    ctx.body = { object: 'action', ...action, status: action.disposition, project_id: accountId, campaign_id: campaign.id };
  });
  return router;
}
