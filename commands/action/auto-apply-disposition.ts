import type { Disposition, RiskTier } from '../../src/events/catalogue/index.ts';
import {
  AutoApplyCapReachedError,
  CampaignAlreadyChangedTodayError,
  DailySpendShareCapError,
  DayBandExceededError,
} from '../quota/auto-apply-quota.ts';
import { killSwitchStop } from '../workspace/kill-switch.ts';
import type { WorkspaceState } from '../workspace/workspace-decider.ts';

/** How a proposal ends up: its tier (a slot refusal can raise it to review), disposition and the reasons shown to people. */
export interface DispositionDecision {
  readonly riskTier: RiskTier;
  readonly disposition: Disposition;
  readonly reasons: readonly string[];
}

/** What the auto-apply gates look at before a slot of the day is reserved. */
export interface DispositionInput {
  readonly riskTier: RiskTier;
  readonly policyReasons: readonly string[];
  readonly autoApplyRequested: boolean;
  readonly workspace: Pick<WorkspaceState, 'killSwitch'>;
}

/**
 * The gates' verdict: decided, or auto-applicable if a slot of the account's UTC day can be
 * reserved (the quota aggregate decides that, atomically; see {@link settleAutoApplySlot}).
 */
export type DispositionStep =
  | { readonly kind: 'decided'; readonly decision: DispositionDecision }
  | { readonly kind: 'reserve-slot'; readonly riskTier: RiskTier; readonly reasons: readonly string[] };

/** How reserving the slot went. */
export type SlotOutcome =
  | { readonly kind: 'reserved'; readonly slot: number }
  | { readonly kind: 'refused'; readonly refusal: SlotRefusal };

/** Refusals of the quota aggregate that queue the proposal instead of failing it. */
export type SlotRefusal = AutoApplyCapReachedError | DayBandExceededError | CampaignAlreadyChangedTodayError | DailySpendShareCapError;

/** The refusal, if `error` is one a proposal survives (queued); null for anything else (which fails the proposal). */
export function slotRefusalOf(error: unknown): SlotRefusal | null {
  return error instanceof AutoApplyCapReachedError ||
    error instanceof DayBandExceededError ||
    error instanceof CampaignAlreadyChangedTodayError ||
    error instanceof DailySpendShareCapError
    ? error
    : null;
}

/**
 * The auto-apply gates, in order: blocked by policy, auto_apply not requested, not safe,
 * kill switch engaged; a proposal through all of them still needs a slot of the day.
 * Pure: the caller reads the workspace and reserves the slot.
 *
 * @example
 * ```ts
 * const step = autoApplyGates({ riskTier: 'safe', policyReasons: [], autoApplyRequested: true, workspace });
 * if (step.kind === 'reserve-slot') decision = settleAutoApplySlot(step, await reserve(), { day, cap: 20 });
 * ```
 */
export function autoApplyGates(input: DispositionInput): DispositionStep {
  const { riskTier } = input;
  const reasons = [...input.policyReasons];
  const decided = (decision: DispositionDecision): DispositionStep => ({ kind: 'decided', decision });
  const queued = (reason: string) => decided({ riskTier, disposition: 'queued', reasons: [...reasons, reason] });
  if (riskTier === 'blocked') return decided({ riskTier, disposition: 'blocked', reasons: [...reasons, 'blocked by policy: never applied'] });
  if (!input.autoApplyRequested) return queued('auto_apply was not requested: queued for approval');
  if (riskTier !== 'safe') return queued(`risk tier ${riskTier}: only safe actions are auto-applied`);
  const stopped = killSwitchStop(input.workspace);
  if (stopped) return queued(stopped);
  return { kind: 'reserve-slot', riskTier, reasons };
}

/**
 * The disposition once the slot was reserved or refused. A concurrent proposal that recorded
 * the day's first value of a field first (band) or changed another budget/target field of the
 * campaign today (learning period) makes the change not safe: queued as review.
 */
export function settleAutoApplySlot(
  pending: Extract<DispositionStep, { kind: 'reserve-slot' }>,
  outcome: SlotOutcome,
  quota: { readonly day: string; readonly cap: number },
): DispositionDecision {
  const { riskTier, reasons } = pending;
  const { day, cap } = quota;
  if (outcome.kind === 'reserved') {
    return {
      riskTier,
      disposition: 'auto_applied',
      reasons: [...reasons, `auto-apply slot ${outcome.slot} of ${cap} for ${day} (UTC); the apply worker re-checks before it goes live`],
    };
  }
  const { refusal } = outcome;
  const queued = (reason: string, tier: RiskTier = riskTier): DispositionDecision => ({ riskTier: tier, disposition: 'queued', reasons: [...reasons, reason] });
  if (refusal instanceof AutoApplyCapReachedError) return queued(`the daily auto-apply cap of ${cap} for ${day} (UTC) is reached`);
  if (refusal instanceof DayBandExceededError || refusal instanceof CampaignAlreadyChangedTodayError) {
    return queued(`${refusal.message}; not safe, queued for approval`, 'review');
  }
  return queued(`${refusal.message}; queued for approval`);
}
