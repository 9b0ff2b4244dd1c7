import { v7 as uuidv7 } from 'uuid';
import type { WriteModel } from '../../commands/write-model.ts';
import { AUTO_APPLY_DAILY_CAP, AutoApplyCapReachedError } from '../../commands/quota/auto-apply-quota.ts';
import type { CommandMeta } from '../../commands/shared/new-event.ts';
import type { Disposition, RiskTier } from '../events/catalogue/index.ts';
import type { ActionDraft } from './action-draft.ts';
import { classifyAction, type Classification } from './classify-action.ts';

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
 * requested, safe tier, kill switch released, a slot of the account's 20 per UTC day —
 * and the apply worker's re-check later. Otherwise it is `queued` (or `blocked`).
 */
export class ProposalService {
  constructor(
    private readonly writeModel: WriteModel,
    private readonly publicBaseUrl: string,
  ) {}

  async propose(request: ProposalRequest): Promise<ActionRepresentation> {
    const classification = classifyAction(request.draft);
    const actionId = request.actionId ?? uuidv7();
    const { disposition, reasons } = await this.decideDisposition(request, classification, actionId);
    await this.writeModel.proposeAction({
      workspaceId: request.workspaceId,
      accountId: request.accountId,
      proposal: {
        action_id: actionId,
        run_id: request.runId,
        kind: request.draft.kind,
        summary: request.summary,
        reason: request.reason,
        params: request.draft.params as unknown as Record<string, unknown>,
        based_on: request.draft.based_on as unknown as Record<string, unknown>,
        risk_tier: classification.risk_tier,
        disposition,
        policy_reasons: reasons,
        auto_apply_requested: request.autoApply,
      },
      meta: request.meta,
    });
    return {
      id: actionId,
      kind: request.draft.kind,
      summary: request.summary,
      risk_tier: classification.risk_tier,
      disposition,
      policy_reasons: reasons,
      approvals_url: approvalsUrl(this.publicBaseUrl, request.accountId),
    };
  }

  private async decideDisposition(
    request: ProposalRequest,
    classification: Classification,
    actionId: string,
  ): Promise<{ disposition: Disposition; reasons: string[] }> {
    const reasons = [...classification.policy_reasons];
    const queued = (reason: string) => ({ disposition: 'queued' as const, reasons: [...reasons, reason] });
    if (classification.risk_tier === 'blocked') return { disposition: 'blocked', reasons: [...reasons, 'blocked by policy: never applied'] };
    if (!request.autoApply) return queued('auto_apply was not requested: queued for approval');
    if (classification.risk_tier !== 'safe') return queued(`risk tier ${classification.risk_tier}: only safe actions are auto-applied`);
    const workspace = await this.writeModel.workspaces.load(this.writeModel.workspaceSubject(request.workspaceId));
    if (workspace.state.killSwitch.engaged) return queued('the workspace kill switch is engaged');
    const day = (request.meta.now ?? new Date()).toISOString().slice(0, 10);
    try {
      const reserved = await this.writeModel.reserveAutoApplySlot({
        workspaceId: request.workspaceId,
        accountId: request.accountId,
        day,
        actionId,
        cap: AUTO_APPLY_DAILY_CAP,
        meta: request.meta,
      });
      return {
        disposition: 'auto_applied',
        reasons: [...reasons, `auto-apply slot ${reserved.state.actionIds.length} of ${AUTO_APPLY_DAILY_CAP} for ${day} (UTC); the apply worker re-checks before it goes live`],
      };
    } catch (error) {
      if (error instanceof AutoApplyCapReachedError) return queued(`the daily auto-apply cap of ${AUTO_APPLY_DAILY_CAP} for ${day} (UTC) is reached`);
      throw error;
    }
  }
}
