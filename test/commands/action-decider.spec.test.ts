import { expect } from 'chai';
import { actionDecider, type ActionCommand } from '../../commands/action/action-decider.ts';
import { ActionNotFoundError, ActionNotInQueueError } from '../../commands/action/action-lifecycle.ts';
import { actionProposal } from '../support/action-fixtures.ts';
import { deciderSpec, recorded } from '../support/decider-spec.ts';

/** Proposal, approval and rejection; claims and apply attempts are in apply-claim.spec.test.ts, the distinct-approver rule in test/safe-apply/distinct-approver.test.ts. */
const meta = { actor: { kind: 'api_key' as const, id: 'k2' }, correlationId: 'c' };
const proposal = actionProposal();
const proposed = recorded('ActionProposed', proposal);
const onAction = { workspaceId: 'ws', accountId: 'acc', actionId: 'a1', meta };
const propose: ActionCommand = { type: 'ProposeAction', workspaceId: 'ws', accountId: 'acc', proposal, meta };
const approve: ActionCommand = { type: 'ApproveAction', ...onAction, note: 'ok', requireDistinctApprover: false };
const reject: ActionCommand = { type: 'RejectAction', ...onAction, reason: 'no' };

describe('action decider: proposal and approval (specs)', () => {
  const spec = deciderSpec(actionDecider);
  it('records a proposal as the action’s first event', () => spec.given([]).when(propose).then([{ type: 'ActionProposed', data: { action_id: 'a1', disposition: 'queued' } }]));
  it('a retried proposal of the same action appends nothing', () => spec.given([proposed]).when(propose).thenNothing());
  it('approves a queued action with its note', () => spec.given([proposed]).when(approve).then([{ type: 'ActionApproved', data: { note: 'ok' } }]));
  it('approves an action returned to the queue', () =>
    spec.given([proposed, recorded('ActionApproved', { note: '' }), recorded('ActionReturnedToQueue', { reason: 'r' })]).when(approve).then([{ type: 'ActionApproved' }]));
  it('rejects a queued action with its reason', () => spec.given([proposed]).when(reject).then([{ type: 'ActionRejected', data: { reason: 'no' } }]));
  it('refuses to approve an unknown action', () => spec.given([]).when(approve).thenThrows(ActionNotFoundError));
  it('refuses to approve a rejected action', () => spec.given([proposed, recorded('ActionRejected', { reason: 'no' })]).when(approve).thenThrows(ActionNotInQueueError));
  it('refuses to reject an approved action', () => spec.given([proposed, recorded('ActionApproved', { note: '' })]).when(reject).thenThrows(ActionNotInQueueError));
  it('refuses to approve an auto-applied action (not waiting for approval)', () =>
    spec.given([recorded('ActionProposed', { ...proposal, risk_tier: 'safe', disposition: 'auto_applied' })]).when(approve).thenThrows(ActionNotInQueueError));
  it('decides a proposal and every later command on the action’s subject', () => {
    const address = { workspaceId: 'ws', accountId: 'acc', aggregate: { type: 'action', id: 'a1' } };
    expect(actionDecider.streamOf(propose)).to.deep.equal(address);
    expect(actionDecider.streamOf(reject)).to.deep.equal(address);
  });
});
