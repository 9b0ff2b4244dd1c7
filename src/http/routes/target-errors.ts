import { AppError, ErrorKind } from '../../errors/app-error.ts';
import type { BiddingStrategy } from '../../platform/ads-platform.ts';

/** A target that does not match the campaign's current strategy (409: the request conflicts with the campaign's state). */
export class StrategyMismatchError extends AppError {
  readonly kind = ErrorKind.Conflict;

  constructor(campaignId: string, strategy: BiddingStrategy, sent: 'target_cpa' | 'target_roas_pct') {
    const expected = strategy.target_cpa !== null ? 'target_cpa' : strategy.target_roas_pct !== null ? 'target_roas_pct' : null;
    super(
      'strategy-mismatch',
      expected === null
        ? `Campaign ${campaignId} uses ${strategy.type} without a target; it takes neither target_cpa nor target_roas_pct, and changing the strategy type is not supported in v1.`
        : `Campaign ${campaignId} uses ${strategy.type} with a ${expected === 'target_cpa' ? 'target CPA' : 'target ROAS'}; send ${expected}, not ${sent}. Changing the strategy type is not supported in v1.`,
      {
        details: {
          campaign_id: campaignId,
          bidding_strategy: strategy.type,
          target_cpa: strategy.target_cpa,
          target_roas_pct: strategy.target_roas_pct,
          expected_field: expected,
        },
      },
    );
  }
}
