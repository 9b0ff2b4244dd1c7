import type { Campaign, MatchType, SharedBudget } from '../platform/ads-platform.ts';

/**
 * A proposed change before the policy classified it: the change itself (`params`) and the
 * platform state it was based on (`based_on`), which the policy reads now and the apply
 * worker re-checks at apply time.
 */
export type ActionDraft =
  | {
      readonly kind: 'add_negative_keywords';
      readonly params: { readonly campaign_id: string; readonly keywords: readonly { text: string; match_type: MatchType }[] };
      readonly based_on: {
        readonly campaign_status: string;
        readonly matched_cost_30d: number;
        /** Net conversions of the matched terms (a retraction counts negative). */
        readonly matched_conversions_30d: number;
        /**
         * Matched terms whose conversions are not 0. Absent in proposals recorded before it was;
         * the apply-time re-classification reads it afresh.
         */
        readonly converting_terms_30d?: number;
        readonly account_cost_30d: number;
        /** Keywords of the campaign, all but paused ones, that the negatives would block. */
        readonly blocked_keywords: readonly string[];
      };
    }
  | {
      readonly kind: 'pause_keywords';
      readonly params: { readonly keyword_ids: readonly string[] };
      readonly based_on: {
        readonly keywords: readonly { id: string; text: string; status: string; cost_30d: number; conversions_30d: number }[];
        readonly account_cost_30d: number;
      };
    }
  | {
      readonly kind: 'set_campaign_budget';
      readonly params: { readonly campaign_id: string; readonly daily_budget: number };
      readonly based_on: BudgetBasis;
    }
  | {
      readonly kind: 'set_target_cpa';
      readonly params: { readonly campaign_id: string; readonly target_cpa: number };
      readonly based_on: TargetBasis & { readonly target_cpa: number | null };
    }
  | {
      readonly kind: 'set_target_roas';
      readonly params: { readonly campaign_id: string; readonly target_roas_pct: number };
      readonly based_on: TargetBasis & { readonly target_roas_pct: number | null };
    };

export interface BudgetBasis {
  readonly campaign_status: string;
  readonly daily_budget: number;
  /**
   * The shared budget the campaign draws on (a change moves every campaign on it), null when
   * the budget is the campaign's own. Absent when the proposer did not read it: the proposal
   * service reads it from the platform before the policy classifies (`withBudgetSharing`).
   */
  readonly shared_budget?: SharedBudget | null;
}

/** What a budget change on `campaign` is based on: the same for proposals, edits and the apply-time classification. */
export function budgetBasisOf(campaign: Campaign): Required<BudgetBasis> {
  return { campaign_status: campaign.status, daily_budget: campaign.daily_budget, shared_budget: campaign.shared_budget };
}

export interface TargetBasis {
  readonly campaign_status: string;
  readonly strategy_type: string;
  readonly portfolio_id: string | null;
  /** Campaigns a change would move: 1, or every campaign on the portfolio strategy. */
  readonly campaigns_affected: number;
}

/** What a target change on `campaign` is based on: the same for the agent's tools, the target endpoint and the apply-time check. */
export function targetBasisOf(campaign: Campaign): TargetBasis {
  const portfolio = campaign.bidding_strategy.portfolio;
  return {
    campaign_status: campaign.status,
    strategy_type: campaign.bidding_strategy.type,
    portfolio_id: portfolio?.id ?? null,
    campaigns_affected: portfolio ? portfolio.campaign_ids.length : 1,
  };
}

export type ActionDraftOf<K extends ActionDraft['kind']> = Extract<ActionDraft, { kind: K }>;
