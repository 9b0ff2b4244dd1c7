import { MATCH_TYPES, normaliseNegativeKeyword, type MatchType } from '../../platform/ads-platform.ts';
import { CampaignNotFoundError } from '../../platform/platform-errors.ts';
import { negativeKeywordBasis } from '../../policy/negative-keyword-basis.ts';
import { targetChangeDraft, type TargetRequest } from '../../policy/target-change-draft.ts';
import type { AgentTool, ToolContext } from './agent-tool.ts';
import { ToolInputError } from './agent-tool.ts';
import { last30Days } from './date-range.ts';
import { clipText } from '../../text/clip-text.ts';
import { AMOUNT_BOUNDS } from '../../policy/amount-bounds.ts';

const REASON = { type: 'string', description: 'Why the change is made; shown to the approver.' } as const;

async function campaignOf(context: ToolContext, campaignId: string) {
  const campaign = await context.platform.getCampaign(context.account, campaignId);
  if (!campaign) throw new CampaignNotFoundError(campaignId);
  return campaign;
}

async function accountCost30d(context: ToolContext): Promise<number> {
  return (await context.platform.accountSummary(context.account)).last_30_days.cost;
}

const money = (value: number) => Math.round(value * 100) / 100;

/** Broadest first: a broad negative blocks every search a phrase one blocks, and a phrase one every search an exact one does. */
const BLOCKING_ORDER: readonly MatchType[] = ['broad', 'phrase', 'exact'];

/**
 * Each text once, as the platforms compare texts (normaliseNegativeKeyword), with the broadest
 * match type it was given: the narrower ones would block nothing more. The platform stores a
 * repeat once, the summary and the policy would count it twice, and the approver's edit names
 * a kept keyword by its text alone.
 */
function oneNegativePerText(keywords: readonly { text: string; match_type: MatchType }[]): { text: string; match_type: MatchType }[] {
  const byText = new Map<string, { text: string; match_type: MatchType }>();
  for (const keyword of keywords) {
    const kept = byText.get(keyword.text);
    if (!kept || BLOCKING_ORDER.indexOf(keyword.match_type) < BLOCKING_ORDER.indexOf(kept.match_type)) byText.set(keyword.text, keyword);
  }
  return [...byText.values()];
}

export const addNegativeKeywords: AgentTool<{ campaign_id: string; keywords: { text: string; match_type?: MatchType }[]; reason?: string }> = {
  name: 'add_negative_keywords',
  kind: 'propose',
  description: 'Propose negative keywords for a campaign, to stop ads showing on irrelevant search terms. Queued for approval.',
  parameters: {
    type: 'object',
    required: ['campaign_id', 'keywords'],
    properties: {
      campaign_id: { type: 'string' },
      keywords: {
        type: 'array',
        minItems: 1,
        items: {
          type: 'object',
          required: ['text'],
          properties: { text: { type: 'string', minLength: 1, maxLength: 80 }, match_type: { type: 'string', enum: [...MATCH_TYPES] } },
        },
      },
      reason: REASON,
    },
  },
  run: async (input, context) => {
    const campaign = await campaignOf(context, input.campaign_id);
    const keywords = oneNegativePerText(input.keywords.map((k) => ({ text: normaliseNegativeKeyword(k.text), match_type: k.match_type ?? 'phrase' })));
    const action = await context.propose(
      {
        kind: 'add_negative_keywords',
        params: { campaign_id: campaign.id, keywords },
        based_on: await negativeKeywordBasis(context.platform, context.account, campaign, keywords, last30Days(context.today)),
      },
      clipText(`Add ${keywords.length} negative keyword(s) to "${campaign.name}": ${keywords.map((k) => k.text).join(', ')}`, 500),
      input.reason ?? '',
    );
    return { action };
  },
};

export const pauseKeywords: AgentTool<{ keyword_ids: string[]; reason?: string }> = {
  name: 'pause_keywords',
  kind: 'propose',
  description: 'Propose pausing keywords (by id, from list_keywords). Queued for approval.',
  parameters: {
    type: 'object',
    required: ['keyword_ids'],
    properties: { keyword_ids: { type: 'array', minItems: 1, items: { type: 'string' } }, reason: REASON },
  },
  run: async (input, context) => {
    const all = await context.platform.listKeywords(context.account, last30Days(context.today));
    // Each keyword once: a repeat would be counted twice by the policy and make the apply-time
    // re-check, which finds it once, take the action for one whose keywords no longer exist.
    const chosen = [...new Set(input.keyword_ids)].map((id) => {
      const keyword = all.find((k) => k.id === id);
      if (!keyword) throw new ToolInputError(`no keyword ${id} in this account`);
      return keyword;
    });
    const action = await context.propose(
      {
        kind: 'pause_keywords',
        params: { keyword_ids: chosen.map((k) => k.id) },
        based_on: {
          keywords: chosen.map((k) => ({ id: k.id, text: k.text, status: k.status, cost_30d: k.cost, conversions_30d: k.conversions })),
          account_cost_30d: await accountCost30d(context),
        },
      },
      clipText(`Pause ${chosen.length} keyword(s): ${chosen.map((k) => `"${k.text}"`).join(', ')}`, 500),
      input.reason ?? '',
    );
    return { action };
  },
};

export const setCampaignBudget: AgentTool<{ campaign_id: string; daily_budget: number; reason?: string }> = {
  name: 'set_campaign_budget',
  kind: 'propose',
  description: "Propose a new daily budget for a campaign, in the account's currency. Queued for approval.",
  parameters: {
    type: 'object',
    required: ['campaign_id', 'daily_budget'],
    properties: { campaign_id: { type: 'string' }, daily_budget: { type: 'number', ...AMOUNT_BOUNDS.daily_budget }, reason: REASON },
  },
  run: async (input, context) => {
    const campaign = await campaignOf(context, input.campaign_id);
    const budget = money(input.daily_budget);
    const action = await context.propose(
      {
        kind: 'set_campaign_budget',
        params: { campaign_id: campaign.id, daily_budget: budget },
        based_on: { campaign_status: campaign.status, daily_budget: campaign.daily_budget },
      },
      `Change the daily budget of "${campaign.name}" from ${campaign.daily_budget} to ${budget}`,
      input.reason ?? '',
      campaign,
    );
    return { action };
  },
};

/** Proposes a target change through the draft the target endpoint uses too (src/policy/target-change-draft.ts). */
async function proposeTarget(context: ToolContext, campaignId: string, request: TargetRequest, reason: string | undefined) {
  const campaign = await campaignOf(context, campaignId);
  const change = targetChangeDraft(campaign, request);
  if (!change.ok) {
    const label = request.field === 'target_cpa' ? 'target CPA' : 'target ROAS';
    throw new ToolInputError(`campaign ${campaign.id} uses ${campaign.bidding_strategy.type} without a ${label}; it cannot take one`);
  }
  return { action: await context.propose(change.draft, change.summary, reason ?? '', campaign) };
}

/** A tool that proposes a new value of one target; the two differ only in the field and wording. */
function targetTool<F extends TargetRequest['field']>(name: string, field: F, description: string): AgentTool<{ campaign_id: string; reason?: string } & Record<F, number>> {
  return {
    name,
    kind: 'propose',
    description,
    parameters: {
      type: 'object',
      required: ['campaign_id', field],
      properties: { campaign_id: { type: 'string' }, [field]: { type: 'number', ...AMOUNT_BOUNDS[field] }, reason: REASON },
    },
    run: (input, context) => proposeTarget(context, input.campaign_id, { field, value: input[field] } as TargetRequest, input.reason),
  };
}

export const setTargetCpa = targetTool(
  'set_target_cpa',
  'target_cpa',
  'Propose a new target CPA for a campaign whose strategy already has one (maximize conversions). Queued for approval.',
);

export const setTargetRoas = targetTool(
  'set_target_roas',
  'target_roas_pct',
  'Propose a new target ROAS (percent; 150 = 1.5x) for a campaign whose strategy already has one. Queued for approval.',
);

export const PROPOSE_TOOLS: readonly AgentTool<any>[] = [addNegativeKeywords, pauseKeywords, setCampaignBudget, setTargetCpa, setTargetRoas];
