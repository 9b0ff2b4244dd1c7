import { v7 as uuidv7 } from 'uuid';
import type { AccountState } from '../../commands/account/account-state.ts';
import type { Commands } from '../../commands/command-bus.ts';
import {
  autoApplyGates,
  settleAutoApplySlot,
  slotRefusalOf,
  type DispositionDecision,
  type SlotOutcome,
} from '../../commands/action/auto-apply-disposition.ts';
import { AUTO_APPLY_DAILY_CAP } from '../../commands/quota/auto-apply-quota.ts';
import { platformAccountOf } from '../../commands/account/platform-account.ts';
import { newEvent, type CommandMeta } from '../../commands/shared/new-event.ts';
import { ValidationError } from '../errors/common-errors.ts';
import { isAppError } from '../errors/app-error.ts';
import type { AdsPlatform, Campaign, PlatformAccountRef, PlatformChange } from '../platform/ads-platform.ts';
import type { ActionProposedData, Disposition, RiskTier } from '../events/catalogue/index.ts';
import { EventSchemaError, eventValidator } from '../events/event-validator.ts';
import type { ActionDraft } from './action-draft.ts';
import { classifyAction, type Classification } from './classify-action.ts';
import { autoApplyTouch, bandedChange, PolicyContextReader, tiesOf, utcDay, type AppliedChangeLookup, type KnownTies } from './policy-context.ts';
import { actionDecider } from '../../commands/action/action-decider.ts';
import { quotaDecider } from '../../commands/quota/auto-apply-quota.ts';
import { loadFromLeader, loadWorkspaceFromLeader, loadAccount, loadQuota } from '../../commands/queries.ts';
import { streams } from '../event-store/subjects.ts';

const DAY_MS = 86_400_000;

/** Refusals of a dry run that make a proposal blocked; anything else (not connected, unavailable) fails the proposal. */
const DRY_RUN_REFUSALS = new Set(['platform-request-refused', 'change-not-applicable', 'campaign-not-found', 'keyword-not-found']);

/** What the policy decided about a proposed action (the HTTP edge adds its URL to show it). */
export interface ActionRepresentation {
  readonly id: string;
  readonly kind: string;
  readonly summary: string;
  readonly risk_tier: RiskTier;
  readonly disposition: Disposition;
  readonly policy_reasons: readonly string[];
}

interface ProposalFields {
  readonly workspaceId: string;
  readonly accountId: string;
  readonly draft: ActionDraft;
  readonly summary: string;
  readonly reason: string;
  readonly autoApply: boolean;
  readonly meta: CommandMeta;
  /** Chosen by the caller when a retry must find the same action (Idempotency-Key); new otherwise. */
  readonly actionId?: string;
  /**
   * The draft's campaign as the proposer just read it from the platform (the agent's tools, the
   * target endpoint): its ties and budget sharing are taken from it instead of reading every
   * campaign of the account again (a Google Ads read of the whole campaign list and its
   * portfolios). Ignored when it is another campaign than the draft's.
   */
  readonly campaign?: Campaign;
}

/** The run proposing, as the worker running it holds it. */
export interface ProposingRun {
  /** The key that started the run: the proposer the distinct-approver rule compares the approver with. */
  readonly keyId: string;
  /** The worker that claimed the run, which must still hold it when the action is recorded. */
  readonly workerId: string;
  /** Fires when the run's time is up (or its worker stops): nothing is proposed after that. */
  readonly signal: AbortSignal;
}

/** A proposal of an API caller (`runId: null`), or of a run with what its worker knows of it. */
export type ProposalRequest = ProposalFields & ({ readonly runId: null } | { readonly runId: string; readonly run: ProposingRun });

/**
 * The proposing run ended (its time ran out, it was failed or taken over) while one of its
 * tools was still working: an action of a run that is no longer running is not recorded.
 */
export class ProposingRunEndedError extends Error {
  constructor(runId: string, why: string) {
    super(`run ${runId} ${why}; nothing was proposed`);
    this.name = 'ProposingRunEndedError';
  }
}

/**
 * Turns a draft into a recorded proposal: the policy classifies it, the disposition is
 * decided, and ActionProposed is appended on the action's own subject. Whatever the
 * model asked for, this is the only way an action comes to exist.
 *
 * An action is `auto_applied` only through every gate decided here — auto_apply
 * requested, safe tier (which, for budgets and targets, includes the day's band and the
 * learning period), kill switch released, a slot of the account's 20 per UTC day that also
 * keeps the day's band and spend-share cap exact — and the apply worker's re-classification
 * later. Otherwise it is `queued` (or `blocked`).
 */
export class ProposalService {
  private readonly context: PolicyContextReader;
  private readonly clock: () => Date;

  private readonly commands: Commands;

  constructor(
    commands: Commands,
    appliedChanges: AppliedChangeLookup,
    options: { readonly clock?: () => Date; readonly platform?: AdsPlatform } = {},
  ) {
    this.commands = commands;
    this.context = new PolicyContextReader(commands.aggregates, appliedChanges);
    this.clock = options.clock ?? (() => new Date());
    this.platform = options.platform;
  }

  private readonly platform: AdsPlatform | undefined;

  /**
   * The platform's dry run (Google Ads' validateOnly): the refusal's message when the
   * platform would refuse the change, null when it would take it or has no dry run.
   */
  private async dryRun(request: ProposalRequest, ref: PlatformAccountRef | null): Promise<string | null> {
    // Only Google Ads has a dry run.
    if (!this.platform?.validateChange || ref?.platform !== 'google-ads') return null;
    try {
      await this.platform.validateChange(ref, { kind: request.draft.kind, ...request.draft.params } as PlatformChange);
      return null;
    } catch (error) {
      if (isAppError(error) && DRY_RUN_REFUSALS.has(error.code)) return error.message;
      throw error;
    }
  }

  /**
   * The draft as the policy must see it, with the campaign's ties (its portfolio and shared
   * budget, read from the platform once for a budget or target change: the learning period
   * counts changes made through them). A budget draft gets whether its budget is shared, read
   * from the platform when the proposer did not read it (the agent's tool): a shared budget's
   * change moves every campaign on it, so the policy must never take a budget for the
   * campaign's own without asking. Sandbox budgets are never shared (`SandboxCampaign`);
   * anything that cannot be read stays unread, which the policy classifies `review`.
   */
  private async measured(request: ProposalRequest, ref: PlatformAccountRef | null): Promise<{ draft: ActionDraft; summary: string; ties: KnownTies }> {
    const { draft, summary } = request;
    const banded = bandedChange(draft);
    if (!banded || !ref) return { draft, summary, ties: {} };
    if (!this.platform) {
      const unshared = draft.kind === 'set_campaign_budget' && draft.based_on.shared_budget === undefined && ref.platform === 'sandbox';
      return { draft: unshared ? { ...draft, based_on: { ...draft.based_on, shared_budget: null } } : draft, summary, ties: {} };
    }
    const known = request.campaign?.id === banded.campaignId ? request.campaign : undefined;
    const [campaign, inCurrency] = await Promise.all([known ?? this.platform.getCampaign(ref, banded.campaignId), this.inAccountCurrency(ref, draft, summary)]);
    if (!campaign) return { ...inCurrency, ties: {} };
    const rounded = inCurrency.draft;
    const withSharing = rounded.kind === 'set_campaign_budget' && rounded.based_on.shared_budget === undefined ? { ...rounded, based_on: { ...rounded.based_on, shared_budget: campaign.shared_budget } } : rounded;
    return { draft: withSharing, summary: inCurrency.summary, ties: tiesOf(campaign) };
  }

  /**
   * A budget or target CPA in the amount the platform will apply: drafts hold cents, and a
   * currency without minor units (JPY, KRW…) takes whole units, so Google would apply 116 for a
   * proposed 115.5. Classified on 115.5 (+10.0 %), the change would go live at +10.5 %: the
   * policy must judge what goes live. The summary's "to 115.5" says the applied amount too.
   */
  private async inAccountCurrency(ref: PlatformAccountRef, draft: ActionDraft, summary: string): Promise<{ draft: ActionDraft; summary: string }> {
    const field = draft.kind === 'set_campaign_budget' ? 'daily_budget' : draft.kind === 'set_target_cpa' ? 'target_cpa' : null;
    if (field === null || !this.platform?.moneyUnit) return { draft, summary };
    const unit = await this.platform.moneyUnit(ref);
    const value = (draft.params as unknown as Record<string, number>)[field]!;
    if (!(unit > 0.01) || !Number.isFinite(value)) return { draft, summary };
    const amount = Math.round(value / unit) * unit;
    if (amount === value) return { draft, summary };
    const spelled = ` to ${value}`;
    return {
      draft: { ...draft, params: { ...draft.params, [field]: amount } } as ActionDraft,
      summary: summary.endsWith(spelled) ? `${summary.slice(0, -spelled.length)} to ${amount}` : `${summary} (${amount} in the account's currency)`,
    };
  }

  async propose(proposed: ProposalRequest): Promise<ActionRepresentation> {
    // Classified and recorded with what the platform says of the budget, which the apply re-check compares.
    // The account's platform, read once for the measuring and the dry run.
    const ref = platformAccountOf(proposed.accountId, (await loadAccount(this.commands.aggregates, proposed.workspaceId, proposed.accountId)).state);
    const { draft, summary, ties } = await this.measured(proposed, ref);
    const request: ProposalRequest = { ...proposed, draft, summary };
    const now = request.meta.now ?? this.clock();
    const meta = { ...request.meta, now };
    const context = await this.context.read(request.workspaceId, request.accountId, request.draft, now, { ties });
    const classified = classifyAction(request.draft, context);
    const actionId = request.actionId ?? uuidv7();
    const proposerKeyId = proposerKeyOf(request);
    const proposal = (riskTier: RiskTier, disposition: Disposition, reasons: readonly string[]): ActionProposedData => ({
      action_id: actionId,
      run_id: request.runId,
      kind: request.draft.kind,
      summary: request.summary,
      reason: request.reason,
      params: request.draft.params as unknown as Record<string, unknown>,
      based_on: request.draft.based_on as unknown as Record<string, unknown>,
      risk_tier: riskTier,
      disposition,
      policy_reasons: [...reasons],
      auto_apply_requested: request.autoApply,
      proposer_key_id: proposerKeyId,
    });
    // Validated before any slot is reserved: a proposal that could never be recorded must
    // not use up one of the account's auto-apply slots of the day.
    assertRecordable(request, proposal(classified.risk_tier, 'queued', classified.policy_reasons));
    const refused = classified.risk_tier === 'blocked' ? null : await this.dryRun(request, ref);
    // After the slow part (the platform's dry run), before a slot of the day is reserved.
    await this.assertRunStillRunning(request);
    const { riskTier, disposition, reasons } = refused
      ? { riskTier: 'blocked' as const, disposition: 'blocked' as const, reasons: [...classified.policy_reasons, `the platform refused the change in a dry run (validateOnly): ${refused}`, 'blocked: never queued or applied'] }
      : await this.decideDisposition({ ...request, meta }, classified, actionId, now);
    await this.commands.handle(actionDecider, {
      type: 'ProposeAction',
      workspaceId: request.workspaceId,
      accountId: request.accountId,
      proposal: proposal(riskTier, disposition, reasons),
      meta,
    });
    return {
      id: actionId,
      kind: request.draft.kind,
      summary: request.summary,
      risk_tier: riskTier,
      disposition,
      policy_reasons: reasons,
    };
  }

  /**
   * @throws ProposingRunEndedError when the proposing run is no longer the account's running
   *   run under its worker: it timed out, its worker stopped and it was failed, or it was taken
   *   over. A refusal read from a replica behind the stream leader is confirmed first, as
   *   handle() confirms one (right after a failover the run's RunStarted may be missing there).
   */
  private async assertRunStillRunning(request: ProposalRequest): Promise<void> {
    if (request.runId === null) return;
    assertRunNotStopped(request);
    const { runId, run } = request;
    const { aggregates } = this.commands;
    const running = (state: AccountState) => state.activeRun?.runId === runId && state.activeRun.status === 'running' && state.activeRun.workerId === run.workerId;
    const account = await loadFromLeader(aggregates, streams.account(request.workspaceId, request.accountId), () => loadAccount(aggregates, request.workspaceId, request.accountId), running);
    if (!running(account.state)) throw new ProposingRunEndedError(runId, 'is no longer running');
  }

  /**
   * The auto-apply disposition (commands/action/auto-apply-disposition.ts, pure) around its
   * two reads and one write: the workspace (kill switch) and the day's slot, reserved on the
   * quota aggregate so the cap, bands and spend share hold under any concurrency.
   */
  private async decideDisposition(request: ProposalRequest, classification: Classification, actionId: string, now: Date): Promise<DispositionDecision> {
    // The kill switch as the leader has it: an engage acknowledged a moment ago holds here.
    const workspace = await loadWorkspaceFromLeader(this.commands.aggregates, request.workspaceId);
    const step = autoApplyGates({
      riskTier: classification.risk_tier,
      policyReasons: classification.policy_reasons,
      autoApplyRequested: request.autoApply,
      workspace: workspace.state,
    });
    if (step.kind === 'decided') return step.decision;
    const day = utcDay(now);
    const touch = autoApplyTouch(request.draft);
    let outcome: SlotOutcome;
    try {
      const reserved = await this.commands.handle(quotaDecider, {
        type: 'ReserveAutoApplySlot',
        workspaceId: request.workspaceId,
        accountId: request.accountId,
        day,
        actionId,
        cap: AUTO_APPLY_DAILY_CAP,
        touch,
        previousDayChangedAt: touch.kind === 'band' ? await this.previousDayChangedAt(request, now) : undefined,
        meta: request.meta,
      });
      outcome = { kind: 'reserved', slot: reserved.state.actionIds.length };
    } catch (error) {
      const refusal = slotRefusalOf(error);
      if (!refusal) throw error;
      outcome = { kind: 'refused', refusal };
    }
    return settleAutoApplySlot(step, outcome, { day, cap: AUTO_APPLY_DAILY_CAP });
  }

  /**
   * When the previous UTC day's auto-applied budget and target changes were decided: the slot
   * is reserved on today's aggregate alone, so the rule "one setting per campaign within 24
   * hours" needs yesterday's record handed to it, or it would start afresh at midnight. A
   * reservation landing on yesterday's aggregate while this one runs (a proposal a few
   * milliseconds before midnight) can be missed here; the apply worker's re-classification
   * counts it (docs/policy.md, "Learning period").
   */
  private async previousDayChangedAt(request: ProposalRequest, now: Date) {
    const previousDay = utcDay(new Date(now.getTime() - DAY_MS));
    return (await loadQuota(this.commands.aggregates, request.workspaceId, request.accountId, previousDay)).state.changedAt;
  }
}

/**
 * The API key behind a proposal, for the distinct-approver rule: the key that called the
 * endpoint, or the key that started the run, as the run's worker has it. (Read back from the
 * account it was lost as soon as the run had ended, and a late proposal had no proposer.)
 */
function proposerKeyOf(request: ProposalRequest): string | null {
  if (request.meta.actor.kind === 'api_key') return request.meta.actor.id;
  return request.runId === null ? null : request.run.keyId;
}

/** @throws ProposingRunEndedError once the proposing run's signal fired. */
function assertRunNotStopped(request: ProposalRequest): void {
  if (request.runId !== null && request.run.signal.aborted) throw new ProposingRunEndedError(request.runId, 'ended before its proposal was recorded (its time ran out or its worker stopped)');
}

/** @throws ValidationError when the ActionProposed event could not be stored (e.g. a reason over 2000 characters). */
function assertRecordable(request: ProposalRequest, proposal: ActionProposedData): void {
  const address = { workspaceId: request.workspaceId, accountId: request.accountId, aggregate: { type: 'action' as const, id: proposal.action_id } };
  try {
    eventValidator().assertValid(newEvent('ActionProposed', proposal, address, request.meta));
  } catch (error) {
    if (!(error instanceof EventSchemaError)) throw error;
    throw new ValidationError(
      'The proposal cannot be recorded as it is.',
      error.errors.map((message) => ({ pointer: message.split(' ')[0]!.replace(/^\/data/, '') || '/', message })),
    );
  }
}
