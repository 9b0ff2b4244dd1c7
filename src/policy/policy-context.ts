import { loadQuota } from '../../commands/queries.ts';
import type { Aggregates } from '../../commands/shared/aggregates.ts';
import { bandKey, type AutoApplyTouch, type BandedField } from '../../commands/quota/auto-apply-quota.ts';
import type { ActionDraft } from './action-draft.ts';
import type { Campaign } from '../platform/ads-platform.ts';
import { POLICY_LIMITS, spendShare, type PolicyContext } from './classify-action.ts';

const DAY_MS = 86_400_000;

/** The UTC day of an instant, YYYY-MM-DD: the day a quota aggregate counts. */
export const utcDay = (at: Date) => at.toISOString().slice(0, 10);

/** The campaign field a budget or target change sets, with its current and proposed values. */
export function bandedChange(draft: ActionDraft): { campaignId: string; field: BandedField; current: number | null; next: number; safeMax: number } | null {
  switch (draft.kind) {
    case 'set_campaign_budget':
      return { campaignId: draft.params.campaign_id, field: 'daily_budget', current: draft.based_on.daily_budget, next: draft.params.daily_budget, safeMax: POLICY_LIMITS.budgetChangeSafeMax };
    case 'set_target_cpa':
      return { campaignId: draft.params.campaign_id, field: 'target_cpa', current: draft.based_on.target_cpa, next: draft.params.target_cpa, safeMax: POLICY_LIMITS.targetChangeSafeMax };
    case 'set_target_roas':
      return {
        campaignId: draft.params.campaign_id,
        field: 'target_roas_pct',
        current: draft.based_on.target_roas_pct,
        next: draft.params.target_roas_pct,
        safeMax: POLICY_LIMITS.targetChangeSafeMax,
      };
    default:
      return null;
  }
}

/** The share (fraction) of the account's 30-day spend a negative or pause touches; null for other kinds. */
export function spendShareOf(draft: ActionDraft): number | null {
  switch (draft.kind) {
    case 'add_negative_keywords': {
      const { matched_cost_30d, account_cost_30d } = draft.based_on;
      return spendShare(matched_cost_30d, account_cost_30d);
    }
    case 'pause_keywords': {
      const { keywords, account_cost_30d } = draft.based_on;
      return spendShare(keywords.reduce((sum, k) => sum + k.cost_30d, 0), account_cost_30d);
    }
    default:
      return null;
  }
}

/** What reserving an auto-apply slot for this draft must also record and check on the day's quota aggregate. */
export function autoApplyTouch(draft: ActionDraft): AutoApplyTouch {
  const banded = bandedChange(draft);
  if (banded && banded.current !== null) return { kind: 'band', campaignId: banded.campaignId, field: banded.field, current: banded.current, next: banded.next, safeMax: banded.safeMax };
  const share = spendShareOf(draft);
  if (share !== null) return { kind: 'spend', share, dailyCap: POLICY_LIMITS.dailyAutoApplySpendShareMax };
  return { kind: 'none' };
}

/**
 * A campaign and the settings it shares with other campaigns: a target change of its portfolio
 * strategy, or a budget change of its shared budget, made through any campaign on them moves it.
 */
export interface CampaignTies {
  readonly campaignId: string;
  readonly portfolioId: string | null;
  readonly sharedBudgetId: string | null;
}

/** What of a campaign's ties the caller read from the platform (the live campaign). */
export type KnownTies = Partial<Pick<CampaignTies, 'portfolioId' | 'sharedBudgetId'>>;

/** A campaign's ties as the platform shows it. */
export function tiesOf(campaign: Campaign): KnownTies {
  return { portfolioId: campaign.bidding_strategy.portfolio?.id ?? null, sharedBudgetId: campaign.shared_budget?.id ?? null };
}

/**
 * The latest budget or target change this service applied to a campaign since a time, other
 * than `exceptActionId`: the learning period's input. Changes made through its portfolio
 * strategy or its shared budget (through another campaign on them) count too. In production the
 * approvals read model answers (projections/approvals/applied-change-lookup.ts); the policy only
 * knows this port.
 */
export interface AppliedChangeLookup {
  lastAppliedChange(accountId: string, campaign: CampaignTies, since: Date, exceptActionId: string | undefined): Promise<PolicyContext['recentChange']>;
}

/**
 * The shared settings a change writes to, from its basis: a target change of a campaign on a
 * portfolio strategy sets the portfolio's target, a budget change of a shared budget sets that
 * budget. Bases are read from events too (the approvals projection), so anything but a string
 * id is none.
 */
export function sharedSettingsOf(kind: string, basedOn: unknown): { readonly portfolioId: string | null; readonly sharedBudgetId: string | null } {
  const basis = (typeof basedOn === 'object' && basedOn !== null ? basedOn : {}) as { portfolio_id?: unknown; shared_budget?: { id?: unknown } | null };
  const portfolio = kind === 'set_target_cpa' || kind === 'set_target_roas' ? basis.portfolio_id : undefined;
  const budget = kind === 'set_campaign_budget' ? basis.shared_budget?.id : undefined;
  return { portfolioId: typeof portfolio === 'string' ? portfolio : null, sharedBudgetId: typeof budget === 'string' ? budget : null };
}


/**
 * Reads what the policy needs beyond the draft: the day's baseline of the changed field
 * (from the day's quota aggregate, exact) and the campaign's latest applied budget or target
 * change (from the approvals read model, which trails the event log by milliseconds; the
 * apply worker classifies auto-applied actions again right before they go live).
 */
export class PolicyContextReader {
  private readonly aggregates: Aggregates;
  private readonly appliedChanges: AppliedChangeLookup;

  constructor(aggregates: Aggregates, appliedChanges: AppliedChangeLookup) {
    this.aggregates = aggregates;
    this.appliedChanges = appliedChanges;
  }

  /**
   * @param now the learning period is measured back from it, and it names the UTC day of the baseline
   * @param options.day the UTC day whose baseline applies, if not now's (an action applied after its day)
   * @param options.exceptActionId an action not to count as a recent change (the one being classified)
   * @param options.ties the campaign's portfolio and shared budget as the platform shows them now;
   *   what is not given is taken from the draft's basis (which records only the one its kind sets)
   */
  async read(
    workspaceId: string,
    accountId: string,
    draft: ActionDraft,
    now: Date,
    options: { readonly day?: string; readonly exceptActionId?: string; readonly ties?: KnownTies } = {},
  ): Promise<PolicyContext> {
    const banded = bandedChange(draft);
    if (!banded) return { dayBaseline: null, recentChange: null };
    const since = new Date(now.getTime() - POLICY_LIMITS.learningPeriodDays * DAY_MS);
    const recorded = sharedSettingsOf(draft.kind, draft.based_on);
    const campaign: CampaignTies = {
      campaignId: banded.campaignId,
      portfolioId: options.ties?.portfolioId ?? recorded.portfolioId ?? null,
      sharedBudgetId: options.ties?.sharedBudgetId ?? recorded.sharedBudgetId ?? null,
    };
    const [quota, recentChange] = await Promise.all([
      loadQuota(this.aggregates, workspaceId, accountId, options.day ?? utcDay(now)),
      this.appliedChanges.lastAppliedChange(accountId, campaign, since, options.exceptActionId),
    ]);
    return { dayBaseline: quota.state.bands[bandKey(banded.campaignId, banded.field)]?.baseline ?? null, recentChange };
  }
}
