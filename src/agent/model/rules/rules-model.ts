import type { AgentIdentity } from '../../../events/catalogue/index.ts';
import type { FunctionCall, ModelClient, ModelPart, ModelRequest, ModelTurn } from '../model-port.ts';
import { readAccountData, type AccountData } from './account-data.ts';
import { intentsOf, type Intent } from './brief-intent.ts';
import {
  budgetProposals,
  negativeKeywordProposals,
  poorKeywordProposals,
  targetProposals,
  topWasteCampaigns,
  wastedSearchTerms,
  type Finding,
} from './heuristics.ts';

const READS: Readonly<Record<Intent, readonly FunctionCall[]>> = {
  waste: [
    { name: 'get_account_summary', args: {} },
    { name: 'list_campaigns', args: {} },
    { name: 'get_search_terms', args: { limit: 500 } },
    { name: 'list_keywords', args: {} },
  ],
  keywords: [{ name: 'get_account_summary', args: {} }, { name: 'list_keywords', args: {} }],
  budget: [{ name: 'get_account_summary', args: {} }, { name: 'list_campaigns', args: {} }, { name: 'get_campaign_performance', args: {} }],
  targets: [{ name: 'get_account_summary', args: {} }, { name: 'list_campaigns', args: {} }, { name: 'get_campaign_performance', args: {} }],
  health: [{ name: 'get_account_summary', args: {} }, { name: 'get_campaign_performance', args: {} }, { name: 'get_search_terms', args: { limit: 500 } }],
  question: [{ name: 'get_account_summary', args: {} }, { name: 'get_campaign_performance', args: {} }],
};

/**
 * The built-in rules agent: a deterministic model behind the same port as Gemini. It reads
 * the brief for intent, calls the read tools that intent needs in one turn, proposes what
 * the heuristics justify (if propose tools are offered) in the next, and then answers
 * with figures. Same tools, limits and events as a real model.
 */
export class RulesModel implements ModelClient {
  readonly identity: AgentIdentity = { kind: 'rules', model: 'rules-v1' };

  async generate(request: ModelRequest): Promise<ModelTurn> {
    request.signal.throwIfAborted();
    const brief = request.conversation.find((e) => e.role === 'user');
    const intents = intentsOf(brief?.role === 'user' ? brief.text : '');
    const data = readAccountData(request.conversation);
    // Tools it may not call are not offered: it answers.
    const offered = new Set(request.toolChoice === 'none' ? [] : request.tools.map((t) => t.name));
    const budgetLeft = 10 - data.calls.length;

    const parts = this.nextCalls(intents, data, offered, budgetLeft);
    const output: ModelPart[] = parts.length > 0 ? parts.map((call) => ({ kind: 'function_call', call })) : [{ kind: 'text', text: this.answer(intents, data) }];
    return { parts: output, usage: { input_tokens: estimateTokens(request), output_tokens: Math.ceil(JSON.stringify(output).length / 4) } };
  }

  private nextCalls(intents: readonly Intent[], data: AccountData, offered: ReadonlySet<string>, budgetLeft: number): FunctionCall[] {
    if (offered.size === 0 || budgetLeft <= 0) return [];
    // Account-wide reads: a campaign-scoped get_search_terms does not count as the overview.
    const done = new Set(data.calls.filter((c) => c.args.campaign_id === undefined).map((c) => c.name));
    const reads = dedupe(intents.flatMap((i) => READS[i])).filter((c) => !done.has(c.name) && offered.has(c.name));
    if (reads.length > 0) return reads.slice(0, budgetLeft);
    // Before proposing negatives, read the complete search terms of the campaigns concerned.
    if (intents.includes('waste') && offered.has('add_negative_keywords') && data.searchTerms) {
      const detail = topWasteCampaigns(data.searchTerms, enabledCampaigns(data))
        .filter((id) => !data.campaignSearchTerms.has(id))
        .map((id) => ({ name: 'get_search_terms', args: { campaign_id: id, limit: 500 } }));
      if (detail.length > 0) return detail.slice(0, Math.max(0, budgetLeft - 1));
    }
    if (data.proposals.length > 0) return [];
    return findings(intents, data)
      .flatMap((f) => f.calls)
      .filter((c) => offered.has(c.name))
      .slice(0, budgetLeft);
  }

  private answer(intents: readonly Intent[], data: AccountData): string {
    const money = moneyFormat(data.summary?.currency ?? 'EUR');
    const lines: string[] = [];
    const s = data.summary;
    if (s) {
      const t = s.last_30_days;
      const cpa = t.conversions > 0 ? money(t.cost / t.conversions) : 'n/a';
      lines.push(
        `${s.name}: in the last 30 days ${t.impressions.toLocaleString('en')} impressions, ${t.clicks.toLocaleString('en')} clicks, ` +
          `${money(t.cost)} spent, ${round1(t.conversions)} conversions (CPA ${cpa}), ${t.cost > 0 ? round1((t.conversion_value / t.cost) * 100) : 0}% ROAS, ` +
          `${s.enabled_campaigns} of ${s.campaigns} campaigns enabled.`,
      );
    }
    if (data.performance && (intents.includes('question') || intents.includes('health'))) {
      const sorted = [...data.performance].sort((a, b) => b.cost - a.cost);
      lines.push('', 'Campaigns by spend:');
      for (const p of sorted) {
        lines.push(`  - ${p.campaign_name}: ${money(p.cost)}, ${round1(p.conversions)} conv., CPA ${p.cpa === null ? 'n/a' : money(p.cpa)}, ROAS ${p.roas === null ? 'n/a' : `${round1(p.roas * 100)}%`}`);
      }
    }
    if (intents.includes('health') && data.searchTerms) {
      const wasted = wastedSearchTerms(data.searchTerms);
      const cost = wasted.reduce((sum, t) => sum + t.cost, 0);
      lines.push('', `Wasted spend: ${wasted.length} search terms cost ${money(cost)} without converting.`);
    }
    for (const finding of findings(intents.filter((i) => i !== 'health' && i !== 'question'), data)) lines.push('', ...finding.lines);
    if (data.proposals.length > 0) {
      lines.push('', 'Proposed changes (nothing is live until approved or auto-applied by the safe-apply policy):');
      for (const p of data.proposals) {
        lines.push(p.action ? `  - ${p.action.summary} [risk ${p.action.risk_tier}, ${p.action.disposition}]` : `  - ${p.call.name} was refused: ${p.error ?? 'unknown error'}`);
      }
    }
    if (lines.length === 0) lines.push('I could not read the account, so I have no figures to report.');
    return lines.join('\n');
  }
}

function findings(intents: readonly Intent[], data: AccountData): Finding[] {
  const money = moneyFormat(data.summary?.currency ?? 'EUR');
  const totals = data.summary?.last_30_days;
  const accountCpa = totals && totals.conversions > 0 ? totals.cost / totals.conversions : null;
  const result: Finding[] = [];
  for (const intent of intents) {
    if (intent === 'waste' && data.searchTerms) {
      result.push(negativeKeywordProposals(data.searchTerms, data.campaignSearchTerms, data.keywords ?? [], enabledCampaigns(data), money));
    }
    if (intent === 'keywords' && data.keywords) result.push(poorKeywordProposals(data.keywords, accountCpa, money));
    if (intent === 'budget' && data.campaigns && data.performance) result.push(budgetProposals(data.campaigns, data.performance, accountCpa, 30, money));
    if (intent === 'targets' && data.campaigns && data.performance) result.push(targetProposals(data.campaigns, data.performance, money));
  }
  return result;
}

/** Campaigns that serve ads; changes to paused ones would not go live (the apply worker re-checks). Null when unknown. */
function enabledCampaigns(data: AccountData): ReadonlySet<string> | null {
  return data.campaigns ? new Set(data.campaigns.filter((c) => c.status === 'enabled').map((c) => c.id)) : null;
}

function dedupe(calls: readonly FunctionCall[]): FunctionCall[] {
  const seen = new Set<string>();
  return calls.filter((c) => !seen.has(c.name) && seen.add(c.name));
}

function moneyFormat(currency: string): (n: number) => string {
  const format = new Intl.NumberFormat('en', { style: 'currency', currency });
  return (n: number) => format.format(n);
}

const round1 = (n: number) => Math.round(n * 10) / 10;

/** Roughly 4 characters a token, so usage figures stay meaningful without a tokenizer. */
function estimateTokens(request: ModelRequest): number {
  return Math.ceil((request.system.length + JSON.stringify(request.conversation).length + JSON.stringify(request.tools).length) / 4);
}
