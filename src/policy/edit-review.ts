import { editedParams, type ActionEdit, type ReviewedEdit } from '../../commands/action/action-edit.ts';
import type { ActionState } from '../../commands/action/action-state.ts';
import type { Aggregates } from '../../commands/shared/aggregates.ts';
import { last30Days } from '../agent/tools/date-range.ts';
import type { AdsPlatform, Campaign, MatchType, PlatformAccountRef } from '../platform/ads-platform.ts';
import { CampaignNotFoundError } from '../platform/platform-errors.ts';
import { budgetBasisOf, type ActionDraft } from './action-draft.ts';
import { classifyAction } from './classify-action.ts';
import { negativeKeywordBasis } from './negative-keyword-basis.ts';
import { PolicyContextReader, tiesOf, type AppliedChangeLookup, type KnownTies } from './policy-context.ts';
import { targetChangeDraft } from './target-change-draft.ts';
import { clipText } from '../text/clip-text.ts';

/** The edited action as a draft, measured on the platform as a proposal would be, with the summary people see. */
async function editedDraft(
  platform: AdsPlatform,
  account: PlatformAccountRef,
  action: ActionState,
  params: Record<string, unknown>,
  now: Date,
): Promise<{ draft: ActionDraft; summary: string; ties: KnownTies }> {
  const campaignId = String(params.campaign_id);
  const campaign: Campaign | null = await platform.getCampaign(account, campaignId);
  if (!campaign) throw new CampaignNotFoundError(campaignId);
  return { ...(await measuredDraft(platform, account, action, params, now, campaign)), ties: tiesOf(campaign) };
}

async function measuredDraft(
  platform: AdsPlatform,
  account: PlatformAccountRef,
  action: ActionState,
  params: Record<string, unknown>,
  now: Date,
  campaign: Campaign,
): Promise<{ draft: ActionDraft; summary: string }> {
  const campaignId = campaign.id;
  switch (action.kind) {
    case 'add_negative_keywords': {
      const keywords = params.keywords as { text: string; match_type: MatchType }[];
      return {
        draft: { kind: 'add_negative_keywords', params: { campaign_id: campaign.id, keywords }, based_on: await negativeKeywordBasis(platform, account, campaign, keywords, last30Days(now)) },
        summary: clipText(`Add ${keywords.length} negative keyword(s) to "${campaign.name}": ${keywords.map((k) => `${k.text} (${k.match_type})`).join(', ')}`, 500),
      };
    }
    case 'set_campaign_budget': {
      const budget = params.daily_budget as number;
      return {
        draft: { kind: 'set_campaign_budget', params: { campaign_id: campaign.id, daily_budget: budget }, based_on: budgetBasisOf(campaign) },
        summary: clipText(`Change the daily budget of "${campaign.name}" from ${campaign.daily_budget} to ${budget}`, 500),
      };
    }
    case 'set_target_cpa':
    case 'set_target_roas': {
      const request = action.kind === 'set_target_cpa'
        ? { field: 'target_cpa' as const, value: params.target_cpa as number }
        : { field: 'target_roas_pct' as const, value: params.target_roas_pct as number };
      const change = targetChangeDraft(campaign, request);
      if (!change.ok) throw new CampaignNotFoundError(campaignId);
      return { draft: change.draft, summary: clipText(change.summary, 500) };
    }
    default:
      throw new Error(`action kind ${String(action.kind)} is not editable`);
  }
}

/**
 * Puts an approver's edit through the policy the proposal went through: the edited change
 * is measured on the platform now (for negatives, the spend and conversions of the terms the
 * kept keywords block; for budgets and targets, the live value), with the day's band and the
 * learning period, and classified. An edit can make an action riskier: the new tier and
 * reasons are recorded with it, and the decider refuses a blocked one.
 *
 * @example
 * ```ts
 * const reviewed = await review.review({ workspaceId, accountId, actionId, action, account, edit: { daily_budget: 130 } });
 * await approveAction(commands, { ...target, note: '', edit: reviewed });
 * ```
 */
export class EditReview {
  private readonly platform: AdsPlatform;
  private readonly context: PolicyContextReader;
  private readonly clock: () => Date;

  constructor(platform: AdsPlatform, aggregates: Aggregates, appliedChanges: AppliedChangeLookup, clock: () => Date = () => new Date()) {
    this.platform = platform;
    this.context = new PolicyContextReader(aggregates, appliedChanges);
    this.clock = clock;
  }

  /** @throws ValidationError for an edit that is not allowed (editedParams), CampaignNotFoundError when the campaign is gone. */
  async review(input: {
    readonly workspaceId: string;
    readonly accountId: string;
    readonly actionId: string;
    readonly action: ActionState;
    readonly account: PlatformAccountRef;
    readonly edit: ActionEdit;
  }): Promise<ReviewedEdit> {
    const { action, edit } = input;
    // Refuses a forbidden edit before anything is read from the platform.
    const params = editedParams(action.kind, action.params, edit);
    const now = this.clock();
    const { draft, summary, ties } = await editedDraft(this.platform, input.account, action, params, now);
    const context = await this.context.read(input.workspaceId, input.accountId, draft, now, { exceptActionId: input.actionId, ties });
    const classification = classifyAction(draft, context);
    return {
      edit,
      after: {
        summary,
        params: draft.params as unknown as Record<string, unknown>,
        based_on: draft.based_on as unknown as Record<string, unknown>,
        risk_tier: classification.risk_tier,
        policy_reasons: [...classification.policy_reasons, 'edited by an approver: classified again, and applied only through this approval'],
      },
    };
  }
}
