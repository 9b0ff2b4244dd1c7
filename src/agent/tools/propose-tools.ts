import { MATCH_TYPES, type MatchType } from '../../platform/ads-platform.ts';
import { CampaignNotFoundError } from '../../platform/platform-errors.ts';
import { negativeKeywordBasis } from '../../policy/negative-keyword-basis.ts';
import { targetBasisOf } from '../../policy/action-draft.ts';
import type { AgentTool, ToolContext } from './agent-tool.ts';
import { ToolInputError } from './agent-tool.ts';
import { last30Days } from './date-range.ts';

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
    const keywords = input.keywords.map((k) => ({ text: k.text.trim().toLowerCase(), match_type: k.match_type ?? 'phrase' }));
    const action = await context.propose(
      {
        kind: 'add_negative_keywords',
        params: { campaign_id: campaign.id, keywords },
        based_on: await negativeKeywordBasis(context.platform, context.account, campaign, keywords, last30Days(context.today)),
      },
      `Add ${keywords.length} negative keyword(s) to "${campaign.name}": ${keywords.map((k) => k.text).join(', ')}`.slice(0, 500),
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
    const chosen = input.keyword_ids.map((id) => {
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
      `Pause ${chosen.length} keyword(s): ${chosen.map((k) => `"${k.text}"`).join(', ')}`.slice(0, 500),
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
    properties: { campaign_id: { type: 'string' }, daily_budget: { type: 'number', exclusiveMinimum: 0 }, reason: REASON },
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
    );
    return { action };
  },
};

export const setTargetCpa: AgentTool<{ campaign_id: string; target_cpa: number; reason?: string }> = {
  name: 'set_target_cpa',
  kind: 'propose',
  description: 'Propose a new target CPA for a campaign whose strategy already has one (maximize conversions). Queued for approval.',
  parameters: {
    type: 'object',
    required: ['campaign_id', 'target_cpa'],
    properties: { campaign_id: { type: 'string' }, target_cpa: { type: 'number', exclusiveMinimum: 0 }, reason: REASON },
  },
  run: async (input, context) => {
    const campaign = await campaignOf(context, input.campaign_id);
    const current = campaign.bidding_strategy.target_cpa;
    if (campaign.bidding_strategy.type !== 'maximize_conversions' || current === null) {
      throw new ToolInputError(`campaign ${campaign.id} uses ${campaign.bidding_strategy.type} without a target CPA; it cannot take one`);
    }
    const target = money(input.target_cpa);
    const action = await context.propose(
      { kind: 'set_target_cpa', params: { campaign_id: campaign.id, target_cpa: target }, based_on: { ...targetBasisOf(campaign), target_cpa: current } },
      `Change the target CPA of "${campaign.name}" from ${current} to ${target}`,
      input.reason ?? '',
    );
    return { action };
  },
};

export const setTargetRoas: AgentTool<{ campaign_id: string; target_roas_pct: number; reason?: string }> = {
  name: 'set_target_roas',
  kind: 'propose',
  description: 'Propose a new target ROAS (percent; 150 = 1.5x) for a campaign whose strategy already has one. Queued for approval.',
  parameters: {
    type: 'object',
    required: ['campaign_id', 'target_roas_pct'],
    properties: { campaign_id: { type: 'string' }, target_roas_pct: { type: 'number', exclusiveMinimum: 0 }, reason: REASON },
  },
  run: async (input, context) => {
    const campaign = await campaignOf(context, input.campaign_id);
    const current = campaign.bidding_strategy.target_roas_pct;
    if (campaign.bidding_strategy.type !== 'maximize_conversion_value' || current === null) {
      throw new ToolInputError(`campaign ${campaign.id} uses ${campaign.bidding_strategy.type} without a target ROAS; it cannot take one`);
    }
    const target = Math.round(input.target_roas_pct * 10) / 10;
    const action = await context.propose(
      {
        kind: 'set_target_roas',
        params: { campaign_id: campaign.id, target_roas_pct: target },
        based_on: { ...targetBasisOf(campaign), target_roas_pct: current },
      },
      `Change the target ROAS of "${campaign.name}" from ${current}% to ${target}%`,
      input.reason ?? '',
    );
    return { action };
  },
};

export const PROPOSE_TOOLS: readonly AgentTool<any>[] = [addNegativeKeywords, pauseKeywords, setCampaignBudget, setTargetCpa, setTargetRoas];
