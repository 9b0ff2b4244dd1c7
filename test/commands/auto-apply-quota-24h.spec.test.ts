import { expect } from 'chai';
import {
  CampaignAlreadyChangedTodayError,
  CampaignChangedWithinADayError,
  quotaDecider,
  type AutoApplyTouch,
  type QuotaState,
  type ReserveAutoApplySlot,
} from '../../commands/quota/auto-apply-quota.ts';
import { settleAutoApplySlot, slotRefusalOf } from '../../commands/action/auto-apply-disposition.ts';
import { deciderSpec, recorded } from '../support/decider-spec.ts';

/**
 * docs/policy.md, "Learning period": one budget-or-target setting per campaign within 24 hours,
 * across UTC midnight too. The previous day's record is handed to the decision by the caller.
 */
const TODAY = '2026-11-22';
const at = (iso: string) => ({ actor: { kind: 'api_key' as const, id: 'k' }, correlationId: 'c', now: new Date(iso) });
const reserve = (actionId: string, touch: AutoApplyTouch, now: string, previousDayChangedAt?: QuotaState['changedAt']): ReserveAutoApplySlot => ({
  type: 'ReserveAutoApplySlot',
  workspaceId: 'ws',
  accountId: 'acc',
  day: TODAY,
  actionId,
  cap: 20,
  touch,
  previousDayChangedAt,
  meta: at(now),
});
const budget = (campaignId = 'c1'): AutoApplyTouch => ({ kind: 'band', campaignId, field: 'daily_budget', current: 50, next: 60, safeMax: 0.2 });
const cpa = (current = 20, next = 21): AutoApplyTouch => ({ kind: 'band', campaignId: 'c1', field: 'target_cpa', current, next, safeMax: 0.1 });
/** Yesterday's quota state after a target change of campaign c1 decided at `time`. */
const yesterdayWithTarget = (time: string): QuotaState => {
  const event = recorded('AutoApplySlotReserved', { action_id: 'a1', day: '2026-11-21', slot: 1, band: { campaign_id: 'c1', field: 'target_cpa', baseline: 20, value: 21 } }, { time });
  return quotaDecider.evolve(quotaDecider.initialState(), event);
};

describe('auto-apply quota: one budget or target setting per campaign within 24 hours (decider specs)', () => {
  const spec = deciderSpec(quotaDecider);

  it('given a reservation, then the state records when the campaign field was changed (the event time)', () => {
    expect(yesterdayWithTarget('2026-11-21T23:59:59.900Z').changedAt).to.deep.equal({ 'c1/target_cpa': '2026-11-21T23:59:59.900Z' });
  });

  it('given a target change at 23:59:59.9 yesterday, when a budget change of the campaign reserves at 00:00:00.1, then refused (queued as review)', () => {
    const yesterday = yesterdayWithTarget('2026-11-21T23:59:59.900Z').changedAt;
    spec.given([]).when(reserve('a2', budget(), '2026-11-22T00:00:00.100Z', yesterday)).thenThrows(CampaignChangedWithinADayError);
    // The proposal path maps it like today's refusal: review, queued, with the message.
    spec.given([]).when(reserve('a2', budget(), '2026-11-22T00:00:00.100Z', yesterday)).thenThrows(CampaignAlreadyChangedTodayError);
    let thrown: Error | undefined;
    try {
      quotaDecider.decide(reserve('a2', budget(), '2026-11-22T00:00:00.100Z', yesterday), quotaDecider.initialState());
    } catch (error) {
      thrown = error as Error;
    }
    expect(thrown?.message).to.equal(
      "the campaign's target_cpa had an auto-applied change at 2026-11-21T23:59:59.900Z, less than 24 hours ago; one budget or target setting per campaign within 24 hours is auto-applied (learning period)",
    );
  });

  it('given that refusal, then the proposal is queued as review with its reason, not failed', () => {
    const refusal = slotRefusalOf(new CampaignChangedWithinADayError('c1', 'target_cpa', '2026-11-21T23:59:59.900Z'));
    expect(refusal).to.be.instanceOf(CampaignChangedWithinADayError);
    const decision = settleAutoApplySlot({ kind: 'reserve-slot', riskTier: 'safe', reasons: ['budget change of 20.0% is within the safe ±20.0%'] }, { kind: 'refused', refusal: refusal! }, { day: TODAY, cap: 20 });
    expect(decision.riskTier).to.equal('review');
    expect(decision.disposition).to.equal('queued');
    expect(decision.reasons.at(-1)).to.match(/target_cpa had an auto-applied change at 2026-11-21T23:59:59.900Z, less than 24 hours ago.*not safe, queued for approval$/);
  });

  it('given a target change yesterday 24 hours or more ago, when a budget change reserves, then it is reserved', () => {
    const yesterday = yesterdayWithTarget('2026-11-21T00:30:00.000Z').changedAt;
    spec.given([]).when(reserve('a2', budget(), '2026-11-22T00:30:00.000Z', yesterday)).then([
      { type: 'AutoApplySlotReserved', data: { slot: 1, band: { campaign_id: 'c1', field: 'daily_budget', baseline: 50, value: 60 } } },
    ]);
  });

  it('given a target change just before midnight, when another campaign\'s budget or the same target reserves after it, then reserved (the day band governs the same setting)', () => {
    const yesterday = yesterdayWithTarget('2026-11-21T23:59:59.900Z').changedAt;
    spec.given([]).when(reserve('a2', budget('c2'), '2026-11-22T00:00:00.100Z', yesterday)).then([{ type: 'AutoApplySlotReserved', data: { slot: 1 } }]);
    spec.given([]).when(reserve('a3', cpa(), '2026-11-22T00:00:00.100Z', yesterday)).then([{ type: 'AutoApplySlotReserved', data: { slot: 1 } }]);
  });

  it('given no previous day\'s record, when a budget change reserves, then reserved as before', () => {
    spec.given([]).when(reserve('a2', budget(), '2026-11-22T00:00:00.100Z')).then([{ type: 'AutoApplySlotReserved', data: { slot: 1 } }]);
  });
});
