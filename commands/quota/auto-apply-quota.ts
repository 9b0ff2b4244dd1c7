import type { DomainEvent } from '../../src/events/catalogue/index.ts';
import { quotaAggregateId, streams } from '../../src/event-store/subjects.ts';
import { unknownCommand, type Decider } from '../shared/decider.ts';
import { newEvent, type CommandMeta } from '../shared/new-event.ts';

/** Auto-applied actions per account per UTC day. */
export const AUTO_APPLY_DAILY_CAP = 20;

/** Campaign values whose auto-applied changes are held to a band for the whole UTC day. */
export const BANDED_FIELDS = ['daily_budget', 'target_cpa', 'target_roas_pct'] as const;
export type BandedField = (typeof BANDED_FIELDS)[number];

/** The day's record for one campaign field: the first value seen that day, and the last value auto-applied. */
export interface DayBand {
  readonly baseline: number;
  readonly value: number;
}

/**
 * One quota aggregate per account and UTC day (subject `...quota.<accountId>_<yyyymmdd>`),
 * so its state stays small and a new day starts from zero. Reserving a slot appends with
 * the subject's expected sequence, so under any concurrency: at most 20 slots; the day's
 * baseline of a campaign field is recorded once, by the first reservation that touches it,
 * and every later one is measured from it; and the spend share touched by auto-applied
 * negatives and pauses adds up exactly.
 */
export interface QuotaState {
  readonly actionIds: readonly string[];
  /** Keyed by `bandKey(campaign, field)`. */
  readonly bands: Readonly<Record<string, DayBand>>;
  /**
   * When each campaign field's latest auto-applied change was decided (the reservation's
   * event time), keyed like `bands`: the next day's first hours are held apart from it.
   */
  readonly changedAt: Readonly<Record<string, string>>;
  /** Sum of the 30-day spend shares (fractions) auto-applied negatives and pauses touch today. */
  readonly spendShare: number;
}

export const bandKey = (campaignId: string, field: BandedField) => `${campaignId}/${field}`;

/** How long two auto-applied changes to different budget/target settings of one campaign are held apart. */
export const CAMPAIGN_SETTING_SPACING_MS = 86_400_000;

const quotaFold = {
  // 3: changedAt.
  stateVersion: 3,
  initialState: (): QuotaState => ({ actionIds: [], bands: {}, changedAt: {}, spendShare: 0 }),
  evolve(state: QuotaState, event: DomainEvent): QuotaState {
    if (event.type !== 'AutoApplySlotReserved') return state;
    const { band, spend_share } = event.data;
    const counted = { ...state, actionIds: [...state.actionIds, event.data.action_id], spendShare: state.spendShare + (spend_share ?? 0) };
    if (!band) return counted;
    const key = bandKey(band.campaign_id, band.field);
    return {
      ...counted,
      bands: { ...state.bands, [key]: { baseline: band.baseline, value: band.value } },
      changedAt: { ...state.changedAt, [key]: event.time },
    };
  },
};

export class AutoApplyCapReachedError extends Error {
  readonly day: string;
  readonly cap: number;

  constructor(day: string, cap: number) {
    super(`the account's ${cap} auto-apply slots of ${day} (UTC) are used`);
    this.day = day;
    this.cap = cap;
    this.name = 'AutoApplyCapReachedError';
  }
}

/** The change, measured from the day's first value of the field, leaves the safe band. */
export class DayBandExceededError extends Error {
  readonly field: BandedField;
  readonly baseline: number;
  readonly next: number;
  readonly safeMax: number;

  constructor(
    field: BandedField,
    baseline: number,
    next: number,
    safeMax: number,
  ) {
    const change = (next - baseline) / baseline;
    super(
      `${field} ${next} is ${(change * 100).toFixed(1)}% from the day's first value ${baseline}; ` +
        `auto-applied changes of one day stay within ±${(safeMax * 100).toFixed(1)}% of it`,
    );
    this.field = field;
    this.baseline = baseline;
    this.next = next;
    this.safeMax = safeMax;
    this.name = 'DayBandExceededError';
  }
}

/**
 * Another budget or target field of the campaign already has an auto-applied change today: the
 * two would go live together, before either is recorded as applied, so the learning period
 * (which counts applied changes) could not hold them apart.
 */
export class CampaignAlreadyChangedTodayError extends Error {
  readonly campaignId: string;
  readonly otherField: BandedField;

  constructor(campaignId: string, otherField: BandedField) {
    super(`the campaign's ${otherField} already has an auto-applied change today; one budget or target setting per campaign per day is auto-applied (learning period)`);
    this.campaignId = campaignId;
    this.otherField = otherField;
    this.name = 'CampaignAlreadyChangedTodayError';
  }
}

/**
 * Another budget or target field of the campaign had an auto-applied change on the previous
 * UTC day, less than 24 hours ago: a new UTC day must not let a budget change at 00:00:00.1
 * follow a target change at 23:59:59.9. A CampaignAlreadyChangedTodayError (same refusal,
 * queued as review), with the time it is measured from.
 */
export class CampaignChangedWithinADayError extends CampaignAlreadyChangedTodayError {
  readonly changedAt: string;

  constructor(campaignId: string, otherField: BandedField, changedAt: string) {
    super(campaignId, otherField);
    this.message =
      `the campaign's ${otherField} had an auto-applied change at ${changedAt}, less than 24 hours ago; ` +
      'one budget or target setting per campaign within 24 hours is auto-applied (learning period)';
    this.changedAt = changedAt;
    this.name = 'CampaignChangedWithinADayError';
  }
}

/** The account's auto-applied negatives and pauses would touch more of its 30-day spend today than the cap. */
export class DailySpendShareCapError extends Error {
  readonly used: number;
  readonly share: number;
  readonly cap: number;

  constructor(used: number, share: number, cap: number) {
    const pct = (f: number) => `${(f * 100).toFixed(1)}%`;
    super(`auto-applied negatives and pauses already touch ${pct(used)} of the account's 30-day spend today; ${pct(share)} more would exceed the daily cap of ${pct(cap)}`);
    this.used = used;
    this.share = share;
    this.cap = cap;
    this.name = 'DailySpendShareCapError';
  }
}

/** What an auto-applied action touches, besides its slot. */
export type AutoApplyTouch =
  | { readonly kind: 'none' }
  | { readonly kind: 'band'; readonly campaignId: string; readonly field: BandedField; readonly current: number; readonly next: number; readonly safeMax: number }
  | { readonly kind: 'spend'; readonly share: number; readonly dailyCap: number };

export interface ReserveAutoApplySlot {
  readonly type: 'ReserveAutoApplySlot';
  readonly workspaceId: string;
  readonly accountId: string;
  readonly day: string;
  readonly actionId: string;
  readonly cap: number;
  readonly touch: AutoApplyTouch;
  /**
   * `changedAt` of the previous UTC day's quota aggregate of the account (read by the caller;
   * a decision sees one aggregate): a band touch is refused within 24 hours of an auto-applied
   * change to another setting of the campaign recorded there. Absent: nothing recorded.
   */
  readonly previousDayChangedAt?: QuotaState['changedAt'];
  readonly meta: CommandMeta;
}


// Rounding slack: values are cents or tenths, shares are sums of fractions.
const EPSILON = 1e-9;

export function decideReserveAutoApplySlot(command: ReserveAutoApplySlot, state: QuotaState) {
  if (state.actionIds.includes(command.actionId)) return [];
  if (state.actionIds.length >= command.cap) throw new AutoApplyCapReachedError(command.day, command.cap);
  const { touch } = command;
  let band: { campaign_id: string; field: BandedField; baseline: number; value: number } | undefined;
  let spendShare: number | undefined;
  if (touch.kind === 'band') {
    assertNoOtherSettingChanged(touch, state, command.previousDayChangedAt ?? {}, command.meta.now ?? new Date());
    const baseline = state.bands[bandKey(touch.campaignId, touch.field)]?.baseline ?? touch.current;
    if (!(baseline > 0) || Math.abs((touch.next - baseline) / baseline) > touch.safeMax + EPSILON) {
      throw new DayBandExceededError(touch.field, baseline, touch.next, touch.safeMax);
    }
    band = { campaign_id: touch.campaignId, field: touch.field, baseline, value: touch.next };
  } else if (touch.kind === 'spend') {
    if (state.spendShare + touch.share > touch.dailyCap + EPSILON) throw new DailySpendShareCapError(state.spendShare, touch.share, touch.dailyCap);
    spendShare = touch.share;
  }
  return [
    newEvent(
      'AutoApplySlotReserved',
      {
        action_id: command.actionId,
        day: command.day,
        slot: state.actionIds.length + 1,
        ...(band ? { band } : {}),
        ...(spendShare !== undefined ? { spend_share: spendShare } : {}),
      },
      {
        workspaceId: command.workspaceId,
        accountId: command.accountId,
        aggregate: { type: 'quota', id: quotaAggregateId(command.accountId, command.day) },
      },
      command.meta,
    ),
  ];
}

/**
 * One budget-or-target setting of a campaign per 24 hours: any auto-applied change to another
 * of its settings today (every instant of today is within 24 hours of now), or on the previous
 * UTC day less than 24 hours before `now`, refuses the touch. Two settings changed within a day
 * of each other would both go live before either is recorded as applied, where the learning
 * period (which counts applied changes) could not hold them apart.
 */
function assertNoOtherSettingChanged(
  touch: Extract<AutoApplyTouch, { kind: 'band' }>,
  today: QuotaState,
  previousDayChangedAt: QuotaState['changedAt'],
  now: Date,
): void {
  const others = BANDED_FIELDS.filter((field) => field !== touch.field);
  const changedToday = others.find((field) => today.bands[bandKey(touch.campaignId, field)] !== undefined);
  if (changedToday) throw new CampaignAlreadyChangedTodayError(touch.campaignId, changedToday);
  for (const field of others) {
    const at = previousDayChangedAt[bandKey(touch.campaignId, field)];
    if (at !== undefined && now.getTime() - Date.parse(at) < CAMPAIGN_SETTING_SPACING_MS) {
      throw new CampaignChangedWithinADayError(touch.campaignId, field, at);
    }
  }
}

export type QuotaCommand = ReserveAutoApplySlot;

/** An account's auto-apply quota of one UTC day. */
export const quotaDecider: Decider<QuotaCommand, QuotaState> = {
  name: 'quota',
  ...quotaFold,
  // Many proposals race for the same day's slots: more attempts than usual.
  maxAttempts: 200,
  decide(command, state) {
    switch (command.type) {
      case 'ReserveAutoApplySlot':
        return decideReserveAutoApplySlot(command, state);
      default:
        return unknownCommand(command.type);
    }
  },
  streamOf: (command) => streams.quota(command.workspaceId, command.accountId, command.day),
};
