import { v7 as uuidv7 } from 'uuid';
import type { WriteModel } from '../../commands/write-model.ts';
import type { CommandMeta } from '../../commands/shared/new-event.ts';
import type { Disposition, RiskTier } from '../events/catalogue/index.ts';
import type { ActionDraft } from './action-draft.ts';
import { classifyAction } from './classify-action.ts';

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
}

export function approvalsUrl(publicBaseUrl: string, accountId: string): string {
  return `${publicBaseUrl}/api/v1/accounts/${accountId}/approvals`;
}

/**
 * Turns a draft into a recorded proposal: the policy classifies it, the disposition is
 * decided, and ActionProposed is appended on the action's own subject. Whatever the
 * model asked for, this is the only way an action comes to exist.
 */
export class ProposalService {
  constructor(
    private readonly writeModel: WriteModel,
    private readonly publicBaseUrl: string,
  ) {}

  async propose(request: ProposalRequest): Promise<ActionRepresentation> {
    const classification = classifyAction(request.draft);
    const disposition: Disposition = classification.risk_tier === 'blocked' ? 'blocked' : 'queued';
    const actionId = uuidv7();
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
        policy_reasons: [...classification.policy_reasons],
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
      policy_reasons: classification.policy_reasons,
      approvals_url: approvalsUrl(this.publicBaseUrl, request.accountId),
    };
  }
}
