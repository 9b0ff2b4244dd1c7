import type { Kysely } from 'kysely';
import { v7 as uuidv7 } from 'uuid';
import type { WriteModel } from '../../commands/write-model.ts';
import {
  AUTO_APPLY_DAILY_CAP,
  AutoApplyCapReachedError,
  CampaignAlreadyChangedTodayError,
  DailySpendShareCapError,
  DayBandExceededError,
} from '../../commands/quota/auto-apply-quota.ts';
import { newEvent, type CommandMeta } from '../../commands/shared/new-event.ts';
import { ValidationError } from '../errors/common-errors.ts';
import { isProblemError } from '../errors/problem-error.ts';
import type { AdsPlatform, PlatformChange } from '../platform/ads-platform.ts';
import type { ActionProposedData, Disposition, RiskTier } from '../events/catalogue/index.ts';
import { EventSchemaError, eventValidator } from '../events/event-validator.ts';
import type { Database } from '../db/schema.ts';
import type { ActionDraft } from './action-draft.ts';
import { classifyAction, type Classification } from './classify-action.ts';
import { autoApplyTouch, PolicyContextReader, utcDay } from './policy-context.ts';

/** Refusals of a dry run that make a proposal blocked; anything else (not connected, unavailable) fails the proposal. */
const DRY_RUN_REFUSALS = new Set(['platform-request-refused', 'change-not-applicable', 'campaign-not-found', 'keyword-not-found']);

/** The Action resource of the specification. */
export interface ActionRepresentation {
  readonly id: string;
  readonly kind: string;
  readonly summary: string;
  readonly risk_tier: RiskTier;
  readonly disposition: Disposition;
  readonly policy_reasons: readonly string[];
  readonly approvals_url: string;
}

export interface ProposalRequest {
  readonly workspaceId: string;
  readonly accountId: string;
  readonly runId: string | null;
  readonly draft: ActionDraft;
  readonly summary: string;
  readonly reason: string;
  readonly autoApply: boolean;
  readonly meta: CommandMeta;
  /** Chosen by the caller when a retry must find the same action (Idempotency-Key); new otherwise. */
  readonly actionId?: string;
}

export function approvalsUrl(publicBaseUrl: string, accountId: string): string {
  return `${publicBaseUrl}/api/v1/accounts/${accountId}/approvals`;
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

  constructor(
    private readonly writeModel: WriteModel,
    private readonly publicBaseUrl: string,
    db: Kysely<Database>,
    options: { readonly clock?: () => Date; readonly platform?: AdsPlatform } = {},
  ) {
    this.context = new PolicyContextReader(writeModel, db);
    this.clock = options.clock ?? (() => new Date());
    this.platform = options.platform;
  }

  private readonly platform: AdsPlatform | undefined;

  /**
   * The platform's dry run (Google Ads' validateOnly): the refusal's message when the
   * platform would refuse the change, null when it would take it or has no dry run.
   */
  private async dryRun(request: ProposalRequest): Promise<string | null> {
    if (!this.platform?.validateChange) return null;
    const account = await this.writeModel.accounts.load(this.writeModel.accountSubject(request.workspaceId, request.accountId));
    const state = account.state;
    if (state.platform !== 'google-ads') return null;
    const ref = { accountId: request.accountId, name: state.name, platform: state.platform, sandboxSeed: state.sandboxSeed, googleAds: state.googleAds };
    try {
      await this.platform.validateChange(ref, { kind: request.draft.kind, ...request.draft.params } as PlatformChange);
      return null;
    } catch (error) {
      if (isProblemError(error) && DRY_RUN_REFUSALS.has(error.problem.type)) return error.message;
      throw error;
    }
  }

  async propose(request: ProposalRequest): Promise<ActionRepresentation> {
    const now = request.meta.now ?? this.clock();
    const meta = { ...request.meta, now };
    const context = await this.context.read(request.workspaceId, request.accountId, request.draft, now);
    const classified = classifyAction(request.draft, context);
    const actionId = request.actionId ?? uuidv7();
    const proposerKeyId = await this.proposerKeyOf(request);
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
    const refused = classified.risk_tier === 'blocked' ? null : await this.dryRun(request);
    const { riskTier, disposition, reasons } = refused
      ? { riskTier: 'blocked' as const, disposition: 'blocked' as const, reasons: [...classified.policy_reasons, `the platform refused the change in a dry run (validateOnly): ${refused}`, 'blocked: never queued or applied'] }
      : await this.decideDisposition({ ...request, meta }, classified, actionId, now);
    await this.writeModel.proposeAction({
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
      approvals_url: approvalsUrl(this.publicBaseUrl, request.accountId),
    };
  }

  /**
   * The API key behind a proposal, for the distinct-approver rule: the key that called the
   * endpoint, or the key that started the run (read from the account aggregate, where the
   * proposing run is the active one).
   */
  private async proposerKeyOf(request: ProposalRequest): Promise<string | null> {
    if (request.meta.actor.kind === 'api_key') return request.meta.actor.id;
    if (request.runId === null) return null;
    const account = await this.writeModel.accounts.load(this.writeModel.accountSubject(request.workspaceId, request.accountId));
    const active = account.state.activeRun;
    return active && active.runId === request.runId ? active.keyId : null;
  }

  private async decideDisposition(
    request: ProposalRequest,
    classification: Classification,
    actionId: string,
    now: Date,
  ): Promise<{ riskTier: RiskTier; disposition: Disposition; reasons: string[] }> {
    const riskTier = classification.risk_tier;
    const reasons = [...classification.policy_reasons];
    const queued = (reason: string, tier: RiskTier = riskTier) => ({ riskTier: tier, disposition: 'queued' as const, reasons: [...reasons, reason] });
    if (riskTier === 'blocked') return { riskTier, disposition: 'blocked', reasons: [...reasons, 'blocked by policy: never applied'] };
    if (!request.autoApply) return queued('auto_apply was not requested: queued for approval');
    if (riskTier !== 'safe') return queued(`risk tier ${riskTier}: only safe actions are auto-applied`);
    const workspace = await this.writeModel.workspaces.load(this.writeModel.workspaceSubject(request.workspaceId));
    if (workspace.state.killSwitch.engaged) return queued('the workspace kill switch is engaged');
    const day = utcDay(now);
    try {
      const reserved = await this.writeModel.reserveAutoApplySlot({
        workspaceId: request.workspaceId,
        accountId: request.accountId,
        day,
        actionId,
        cap: AUTO_APPLY_DAILY_CAP,
        touch: autoApplyTouch(request.draft),
        meta: request.meta,
      });
      return {
        riskTier,
        disposition: 'auto_applied',
        reasons: [...reasons, `auto-apply slot ${reserved.state.actionIds.length} of ${AUTO_APPLY_DAILY_CAP} for ${day} (UTC); the apply worker re-checks before it goes live`],
      };
    } catch (error) {
      if (error instanceof AutoApplyCapReachedError) return queued(`the daily auto-apply cap of ${AUTO_APPLY_DAILY_CAP} for ${day} (UTC) is reached`);
      // A concurrent proposal recorded the day's first value before this one: measured from it, the change is not safe.
      if (error instanceof DayBandExceededError) return queued(`${error.message}; not safe, queued for approval`, 'review');
      if (error instanceof CampaignAlreadyChangedTodayError) return queued(`${error.message}; not safe, queued for approval`, 'review');
      if (error instanceof DailySpendShareCapError) return queued(`${error.message}; queued for approval`);
      throw error;
    }
  }
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
