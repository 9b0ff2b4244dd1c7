import type { AgentTool } from './agent-tool.ts';
import { DATE_RANGE_PROPERTIES, rangeFrom } from './date-range.ts';

interface RangeInput {
  date_from?: string;
  date_to?: string;
  campaign_id?: string;
}

export const getAccountSummary: AgentTool = {
  name: 'get_account_summary',
  kind: 'read',
  description: 'Account name, currency, time zone, campaign counts and 30-day totals (impressions, clicks, cost, conversions, value).',
  parameters: { type: 'object', properties: {} },
  run: async (_input, { platform, account }) => ({ summary: await platform.accountSummary(account) }),
};

export const listCampaigns: AgentTool = {
  name: 'list_campaigns',
  kind: 'read',
  description:
    'Every campaign with status, daily budget and bidding strategy (type, target CPA, target ROAS percent, portfolio it belongs to).',
  parameters: { type: 'object', properties: {} },
  run: async (_input, { platform, account }) => ({ campaigns: await platform.listCampaigns(account) }),
};

export const getCampaignPerformance: AgentTool<RangeInput> = {
  name: 'get_campaign_performance',
  kind: 'read',
  description: 'Per-campaign impressions, clicks, cost, conversions, value, CTR, CPC, CPA and ROAS over a date range.',
  parameters: {
    type: 'object',
    properties: { ...DATE_RANGE_PROPERTIES, campaign_id: { type: 'string', description: 'Only this campaign.' } },
  },
  run: async (input, { platform, account, today }) => {
    const range = rangeFrom(input, today);
    return { range, campaigns: await platform.campaignPerformance(account, range, input.campaign_id) };
  },
};

export const listKeywords: AgentTool<RangeInput> = {
  name: 'list_keywords',
  kind: 'read',
  description: 'Keywords with match type, status, max CPC and their metrics over a date range.',
  parameters: {
    type: 'object',
    properties: { ...DATE_RANGE_PROPERTIES, campaign_id: { type: 'string', description: 'Only this campaign.' } },
  },
  run: async (input, { platform, account, today }) => {
    const range = rangeFrom(input, today);
    return { range, keywords: await platform.listKeywords(account, range, input.campaign_id) };
  },
};

export const getSearchTerms: AgentTool<RangeInput & { limit?: number }> = {
  name: 'get_search_terms',
  kind: 'read',
  description: 'Search terms that triggered ads, with impressions, clicks, cost and conversions, most expensive first.',
  parameters: {
    type: 'object',
    properties: {
      ...DATE_RANGE_PROPERTIES,
      campaign_id: { type: 'string', description: 'Only this campaign.' },
      limit: { type: 'integer', minimum: 1, maximum: 500, description: 'At most this many rows (default 100).' },
    },
  },
  run: async (input, { platform, account, today }) => {
    const range = rangeFrom(input, today);
    const terms = await platform.searchTerms(account, range, { campaignId: input.campaign_id, limit: input.limit ?? 100 });
    return { range, search_terms: terms };
  },
};

export const READ_TOOLS: readonly AgentTool<any>[] = [getAccountSummary, listCampaigns, getCampaignPerformance, listKeywords, getSearchTerms];
