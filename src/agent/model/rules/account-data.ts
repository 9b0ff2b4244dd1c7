import type { AccountSummary, Campaign, CampaignPerformance, Keyword, SearchTerm } from '../../../platform/ads-platform.ts';
import type { ConversationEntry, FunctionCall } from '../model-port.ts';

/** What the tools returned so far in a run, read back out of the conversation. */
export interface AccountData {
  summary?: AccountSummary;
  campaigns?: Campaign[];
  performance?: CampaignPerformance[];
  keywords?: Keyword[];
  /** The account-wide overview of search terms (costliest first). */
  searchTerms?: SearchTerm[];
  /** Complete search terms of single campaigns, read before proposing negatives for them. */
  campaignSearchTerms: Map<string, SearchTerm[]>;
  /** Results of propose tools: the action, or the error the tool gave. */
  proposals: { call: FunctionCall; action?: { id: string; summary: string; risk_tier: string; disposition: string }; error?: string }[];
  /** Every tool call made so far. */
  calls: FunctionCall[];
}

export function readAccountData(conversation: readonly ConversationEntry[]): AccountData {
  const data: AccountData = { proposals: [], calls: [], campaignSearchTerms: new Map() };
  const pending: FunctionCall[] = [];
  for (const entry of conversation) {
    if (entry.role === 'model') {
      for (const part of entry.parts) if (part.kind === 'function_call') pending.push(part.call);
      continue;
    }
    if (entry.role !== 'tool') continue;
    for (const result of entry.results) {
      const index = pending.findIndex((c) => c.name === result.name);
      const call = index >= 0 ? pending.splice(index, 1)[0]! : { name: result.name, args: {} };
      data.calls.push(call);
      const r = result.response as Record<string, any>;
      switch (result.name) {
        case 'get_account_summary':
          if (r.summary) data.summary = r.summary;
          break;
        case 'list_campaigns':
          if (r.campaigns) data.campaigns = r.campaigns;
          break;
        case 'get_campaign_performance':
          if (r.campaigns) data.performance = r.campaigns;
          break;
        case 'list_keywords':
          if (r.keywords) data.keywords = r.keywords;
          break;
        case 'get_search_terms':
          if (!r.search_terms) break;
          if (typeof call.args.campaign_id === 'string') data.campaignSearchTerms.set(call.args.campaign_id, r.search_terms);
          else data.searchTerms = r.search_terms;
          break;
        default:
          data.proposals.push({ call, action: r.action, error: typeof r.error === 'string' ? r.error : undefined });
      }
    }
  }
  return data;
}
