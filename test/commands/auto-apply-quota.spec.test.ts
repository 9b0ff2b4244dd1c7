import {
  AutoApplyCapReachedError,
  CampaignAlreadyChangedTodayError,
  DailySpendShareCapError,
  DayBandExceededError,
  quotaDecider,
  type AutoApplyTouch,
  type ReserveAutoApplySlot,
} from '../../commands/quota/auto-apply-quota.ts';
import { deciderSpec, recorded } from '../support/decider-spec.ts';

/** docs/policy.md, "Bands that hold for a day" and "Daily spend-share cap": the day's quota aggregate. */
const meta = { actor: { kind: 'api_key' as const, id: 'k' }, correlationId: 'c' };
const reserve = (actionId: string, touch: AutoApplyTouch, cap = 20): ReserveAutoApplySlot => ({ type: 'ReserveAutoApplySlot',
  workspaceId: 'ws',
  accountId: 'acc',
  day: '2026-11-21',
  actionId,
  cap,
  touch,
  meta,
});
const cpa = (current: number, next: number): AutoApplyTouch => ({ kind: 'band', campaignId: 'c1', field: 'target_cpa', current, next, safeMax: 0.1 });
const spend = (share: number): AutoApplyTouch => ({ kind: 'spend', share, dailyCap: 0.1 });
const reserved = (actionId: string, slot: number, extra: Record<string, unknown> = {}) =>
  recorded('AutoApplySlotReserved', { action_id: actionId, day: '2026-11-21', slot, ...extra });

describe('auto-apply quota of a UTC day (decider specs)', () => {
  const spec = deciderSpec(quotaDecider);

  it('given a fresh day, when a target change reserves a slot, then the current value is recorded as the day baseline', () => {
    spec.given([]).when(reserve('a1', cpa(100, 108))).then([
      { type: 'AutoApplySlotReserved', data: { slot: 1, band: { campaign_id: 'c1', field: 'target_cpa', baseline: 100, value: 108 } } },
    ]);
  });

  it('given +8 % recorded from 100, when +8 % from the new 108 (116.64) reserves, then refused: 16.6 % from the day baseline', () => {
    spec.given([reserved('a1', 1, { band: { campaign_id: 'c1', field: 'target_cpa', baseline: 100, value: 108 } })]).when(reserve('a2', cpa(108, 116.64))).thenThrows(DayBandExceededError);
  });

  it('given a baseline, when a later change inside its band reserves, then the baseline is kept, not replaced by the newer current value', () => {
    spec.given([reserved('a1', 1, { band: { campaign_id: 'c1', field: 'target_cpa', baseline: 100, value: 108 } })]).when(reserve('a2', cpa(108, 92))).then([
      { type: 'AutoApplySlotReserved', data: { slot: 2, band: { campaign_id: 'c1', field: 'target_cpa', baseline: 100, value: 92 } } },
    ]);
  });

  it('bands are per campaign and field', () => {
    const other: AutoApplyTouch = { kind: 'band', campaignId: 'c2', field: 'target_cpa', current: 108, next: 116.64, safeMax: 0.1 };
    spec.given([reserved('a1', 1, { band: { campaign_id: 'c1', field: 'target_cpa', baseline: 100, value: 108 } })]).when(reserve('a2', other)).then([
      { type: 'AutoApplySlotReserved', data: { band: { campaign_id: 'c2', field: 'target_cpa', baseline: 108, value: 116.64 } } },
    ]);
  });

  it('given an auto-applied target change today, when the same campaign\'s budget reserves, then refused (learning period); another campaign\'s budget fits', () => {
    const day = [reserved('a1', 1, { band: { campaign_id: 'c1', field: 'target_cpa', baseline: 100, value: 105 } })];
    const budget = (campaignId: string): AutoApplyTouch => ({ kind: 'band', campaignId, field: 'daily_budget', current: 50, next: 52, safeMax: 0.2 });
    spec.given(day).when(reserve('a2', budget('c1'))).thenThrows(CampaignAlreadyChangedTodayError);
    spec.given(day).when(reserve('a2', budget('c2'))).then([{ type: 'AutoApplySlotReserved', data: { slot: 2 } }]);
  });

  it('given 6 % of spend touched today, when a negative touching 5 % more reserves, then refused by the daily 10 % cap; 4 % fits', () => {
    const day = [reserved('a1', 1, { spend_share: 0.06 })];
    spec.given(day).when(reserve('a2', spend(0.05))).thenThrows(DailySpendShareCapError);
    spec.given(day).when(reserve('a2', spend(0.04))).then([{ type: 'AutoApplySlotReserved', data: { slot: 2, spend_share: 0.04 } }]);
  });

  it('given the cap of slots used, when another reserves, then refused; the same action again appends nothing', () => {
    spec.given([reserved('a1', 1)]).when(reserve('a2', { kind: 'none' }, 1)).thenThrows(AutoApplyCapReachedError);
    spec.given([reserved('a1', 1)]).when(reserve('a1', { kind: 'none' }, 1)).thenNothing();
  });

  it('given v1 reservations (no band, no share), the state still counts their slots', () => {
    spec.given([reserved('a1', 1), reserved('a2', 2)]).when(reserve('a3', spend(0.1), 3)).then([{ type: 'AutoApplySlotReserved', data: { slot: 3 } }]);
  });
});
