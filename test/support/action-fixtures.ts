import type { ActionProposedData } from '../../src/events/catalogue/index.ts';

/**
 * The data of an ActionProposed for decider specifications: a queued target-CPA change of
 * campaign c1 proposed by key k1, with whatever a spec needs changed.
 *
 * @example
 * ```ts
 * recorded('ActionProposed', actionProposal({ risk_tier: 'safe', disposition: 'auto_applied' }));
 * ```
 */
export function actionProposal(overrides: Partial<ActionProposedData> = {}): ActionProposedData {
  return {
    action_id: 'a1',
    run_id: null,
    kind: 'set_target_cpa',
    summary: 's',
    reason: 'r',
    params: { campaign_id: 'c1', target_cpa: 21 },
    based_on: {},
    risk_tier: 'review',
    disposition: 'queued',
    policy_reasons: [],
    auto_apply_requested: false,
    proposer_key_id: 'k1',
    ...overrides,
  };
}
