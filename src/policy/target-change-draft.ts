import type { Campaign } from '../platform/ads-platform.ts';
import { targetBasisOf, type ActionDraftOf } from './action-draft.ts';

/** A new target on the bidding strategy a campaign already uses. */
export type TargetRequest = { readonly field: 'target_cpa'; readonly value: number } | { readonly field: 'target_roas_pct'; readonly value: number };

export type TargetChange =
  | { readonly ok: true; readonly draft: ActionDraftOf<'set_target_cpa'> | ActionDraftOf<'set_target_roas'>; readonly summary: string }
  /** The campaign's strategy has no such target (the caller words the refusal: a tool error, a 409). */
  | { readonly ok: false; readonly field: TargetRequest['field'] };

/** Targets are kept to the platform's precision: CPA in cents, ROAS in tenths of a percent. */
const ROUNDING = { target_cpa: 100, target_roas_pct: 10 } as const;

/**
 * The draft and summary of a target change, the same for the agent's target tools and the
 * target endpoint: the strategy check (a target CPA only on maximize conversions with one,
 * a target ROAS only on maximize conversion value with one), the rounding and the summary.
 *
 * @example
 * ```ts
 * const change = targetChangeDraft(campaign, { field: 'target_cpa', value: 21.456 });
 * if (change.ok) await proposals.propose({ ..., draft: change.draft, summary: change.summary });
 * ```
 */
export function targetChangeDraft(campaign: Campaign, request: TargetRequest): TargetChange {
  const strategy = campaign.bidding_strategy;
  const target = Math.round(request.value * ROUNDING[request.field]) / ROUNDING[request.field];
  const basis = targetBasisOf(campaign);
  if (request.field === 'target_cpa') {
    const current = strategy.target_cpa;
    if (strategy.type !== 'maximize_conversions' || current === null) return { ok: false, field: request.field };
    return {
      ok: true,
      draft: { kind: 'set_target_cpa', params: { campaign_id: campaign.id, target_cpa: target }, based_on: { ...basis, target_cpa: current } },
      summary: `Change the target CPA of "${campaign.name}" from ${current} to ${target}`,
    };
  }
  const current = strategy.target_roas_pct;
  if (strategy.type !== 'maximize_conversion_value' || current === null) return { ok: false, field: request.field };
  return {
    ok: true,
    draft: { kind: 'set_target_roas', params: { campaign_id: campaign.id, target_roas_pct: target }, based_on: { ...basis, target_roas_pct: current } },
    summary: `Change the target ROAS of "${campaign.name}" from ${current}% to ${target}%`,
  };
}
