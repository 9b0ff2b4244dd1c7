import { expect } from 'chai';
import {
  autoApplyGates,
  settleAutoApplySlot,
  slotRefusalOf,
  type DispositionInput,
  type DispositionStep,
} from '../../commands/action/auto-apply-disposition.ts';
import { AutoApplyCapReachedError, CampaignAlreadyChangedTodayError, DailySpendShareCapError, DayBandExceededError } from '../../commands/quota/auto-apply-quota.ts';

/** docs/policy.md, "Auto-apply": the gates a proposal passes before it is auto-applied, as a pure process. */
const released = { killSwitch: { engaged: false, reason: '', since: null } };
const engaged = { killSwitch: { engaged: true, reason: 'incident', since: '2026-11-21T09:00:00.000Z' } };
const input = (overrides: Partial<DispositionInput> = {}): DispositionInput => ({
  riskTier: 'safe',
  policyReasons: ['small change'],
  autoApplyRequested: true,
  workspace: released,
  ...overrides,
});
const decided = (step: DispositionStep) => {
  if (step.kind !== 'decided') throw new Error(`expected a decision, got ${step.kind}`);
  return step.decision;
};
const pending = (step: DispositionStep) => {
  if (step.kind !== 'reserve-slot') throw new Error(`expected a slot to reserve, got ${step.kind}`);
  return step;
};
const quota = { day: '2026-11-21', cap: 20 };

describe('auto-apply disposition (process specs)', () => {
  describe('gates before the slot', () => {
    it('given a blocked tier, then blocked, never applied, whatever else holds', () => {
      const decision = decided(autoApplyGates(input({ riskTier: 'blocked', workspace: engaged })));
      expect(decision).to.deep.include({ riskTier: 'blocked', disposition: 'blocked' });
      expect(decision.reasons).to.deep.equal(['small change', 'blocked by policy: never applied']);
    });
    it('given auto_apply not requested, then queued for approval', () => {
      const decision = decided(autoApplyGates(input({ autoApplyRequested: false })));
      expect(decision).to.deep.include({ riskTier: 'safe', disposition: 'queued' });
      expect(decision.reasons.at(-1)).to.equal('auto_apply was not requested: queued for approval');
    });
    it('given a review tier, then queued: only safe actions are auto-applied', () => {
      const decision = decided(autoApplyGates(input({ riskTier: 'review' })));
      expect(decision).to.deep.include({ riskTier: 'review', disposition: 'queued' });
      expect(decision.reasons.at(-1)).to.equal('risk tier review: only safe actions are auto-applied');
    });
    it('given the kill switch engaged, then a safe requested action is queued', () => {
      const decision = decided(autoApplyGates(input({ workspace: engaged })));
      expect(decision).to.deep.include({ disposition: 'queued' });
      expect(decision.reasons.at(-1)).to.equal('the workspace kill switch is engaged');
    });
    it('given every gate open, then a slot of the day must be reserved', () => {
      expect(pending(autoApplyGates(input()))).to.deep.equal({ kind: 'reserve-slot', riskTier: 'safe', reasons: ['small change'] });
    });
  });

  describe('settling the slot', () => {
    const step = pending(autoApplyGates(input()));
    it('given the slot reserved, then auto_applied, naming the slot and the day', () => {
      const decision = settleAutoApplySlot(step, { kind: 'reserved', slot: 3 }, quota);
      expect(decision).to.deep.include({ riskTier: 'safe', disposition: 'auto_applied' });
      expect(decision.reasons.at(-1)).to.equal('auto-apply slot 3 of 20 for 2026-11-21 (UTC); the apply worker re-checks before it goes live');
    });
    it('given the cap reached, then queued, tier unchanged', () => {
      const decision = settleAutoApplySlot(step, { kind: 'refused', refusal: new AutoApplyCapReachedError('2026-11-21', 20) }, quota);
      expect(decision).to.deep.include({ riskTier: 'safe', disposition: 'queued' });
      expect(decision.reasons.at(-1)).to.equal('the daily auto-apply cap of 20 for 2026-11-21 (UTC) is reached');
    });
    it('given the day band exceeded (measured from an earlier baseline), then queued as review', () => {
      const refusal = new DayBandExceededError('target_cpa', 20, 23, 0.1);
      const decision = settleAutoApplySlot(step, { kind: 'refused', refusal }, quota);
      expect(decision).to.deep.include({ riskTier: 'review', disposition: 'queued' });
      expect(decision.reasons.at(-1)).to.equal(`${refusal.message}; not safe, queued for approval`);
    });
    it('given another field of the campaign changed today, then queued as review', () => {
      const decision = settleAutoApplySlot(step, { kind: 'refused', refusal: new CampaignAlreadyChangedTodayError('c1', 'daily_budget') }, quota);
      expect(decision).to.deep.include({ riskTier: 'review', disposition: 'queued' });
    });
    it('given the spend-share cap reached, then queued, tier unchanged', () => {
      const refusal = new DailySpendShareCapError(0.08, 0.05, 0.1);
      const decision = settleAutoApplySlot(step, { kind: 'refused', refusal }, quota);
      expect(decision).to.deep.include({ riskTier: 'safe', disposition: 'queued' });
      expect(decision.reasons.at(-1)).to.equal(`${refusal.message}; queued for approval`);
    });
  });

  it('takes only the quota refusals as refusals: anything else fails the proposal', () => {
    expect(slotRefusalOf(new AutoApplyCapReachedError('d', 1))).to.be.instanceOf(AutoApplyCapReachedError);
    expect(slotRefusalOf(new Error('NATS down'))).to.equal(null);
    expect(slotRefusalOf('text')).to.equal(null);
  });
});
