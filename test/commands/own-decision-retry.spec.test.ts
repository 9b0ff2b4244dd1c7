import { actionDecider, type ActionCommand } from '../../commands/action/action-decider.ts';
import { ActionChangedError, ActionNotInQueueError } from '../../commands/action/action-lifecycle.ts';
import { actionVersion } from '../../commands/action/action-version.ts';
import { actionProposal } from '../support/action-fixtures.ts';
import { deciderSpec, recorded } from '../support/decider-spec.ts';

/**
 * A decision sent again after its append's acknowledgement was lost (the client was told 503,
 * the log holds the decision): the same request (decision, actor, note or reason, edit) records
 * nothing, and the API answers with the action as it is. Anyone else's, or another decision
 * (another note or edit included), is refused as before.
 */
const k2 = { kind: 'api_key' as const, id: 'k2' };
const k3 = { kind: 'api_key' as const, id: 'k3' };
const proposal = actionProposal();
const proposed = recorded('ActionProposed', proposal, { time: '2026-11-21T10:00:00.000Z' } as never);
const seenWhenProposed = actionVersion({ status: 'queued', params: proposal.params, changedAt: '2026-11-21T10:00:00.000Z' });
const approvedBy = (actor: typeof k2) => recorded('ActionApproved', { note: 'ok' }, { actor, time: '2026-11-21T10:05:00.000Z' } as never);
const rejectedBy = (actor: typeof k2) => recorded('ActionRejected', { reason: 'no' }, { actor, time: '2026-11-21T10:05:00.000Z' } as never);
const started = recorded('ActionApplyStarted', { worker_id: 'w', attempt: 1, claim_id: 'x', lease_until: '2026-11-21T10:31:00.000Z' }, { time: '2026-11-21T10:30:00.000Z' } as never);
const applied = recorded('ActionApplied', { worker_id: 'w', claim_id: 'x' } as never, { time: '2026-11-21T10:30:05.000Z' } as never);
const returned = recorded('ActionReturnedToQueue', { reason: 'kill switch' }, { time: '2026-11-21T10:06:00.000Z' } as never);

const onAction = (actor: typeof k2) => ({ workspaceId: 'ws', accountId: 'acc', actionId: 'a1', meta: { actor, correlationId: 'c' } });
const approve = (actor: typeof k2, expectedVersion?: string, note = 'ok'): ActionCommand => ({
  type: 'ApproveAction', ...onAction(actor), note, requireDistinctApprover: false, ...(expectedVersion ? { expectedVersion } : {}),
});
const reject = (actor: typeof k2, expectedVersion?: string): ActionCommand => ({ type: 'RejectAction', ...onAction(actor), reason: 'no', ...(expectedVersion ? { expectedVersion } : {}) });

describe('action decider: one\'s own decision sent again (specs)', () => {
  const spec = deciderSpec(actionDecider);

  it('given an action k2 approved, when k2 approves again with the version it saw, then nothing is recorded', () =>
    spec.given([proposed, approvedBy(k2)]).when(approve(k2, seenWhenProposed)).thenNothing());
  it('given an action k2 approved, when k2 approves again without a version, then nothing is recorded', () =>
    spec.given([proposed, approvedBy(k2)]).when(approve(k2)).thenNothing());
  it('given an action k2 approved and the worker applied, when k2 approves again, then nothing is recorded', () =>
    spec.given([proposed, approvedBy(k2), started, applied]).when(approve(k2, seenWhenProposed)).thenNothing());
  it('given an action k2 rejected, when k2 rejects again, then nothing is recorded', () =>
    spec.given([proposed, rejectedBy(k2)]).when(reject(k2, seenWhenProposed)).thenNothing());

  it('given an action k3 approved, when k2 approves, then refused: someone else decided (409 action-not-in-queue)', () =>
    spec.given([proposed, approvedBy(k3)]).when(approve(k2, seenWhenProposed)).thenThrows(ActionNotInQueueError, 409));
  it('given an action k2 rejected, when k2 approves, then refused: another decision stands (409)', () =>
    spec.given([proposed, rejectedBy(k2)]).when(approve(k2)).thenThrows(ActionNotInQueueError, 409));
  it('given an action k2 approved, when k2 rejects, then refused (409)', () =>
    spec.given([proposed, approvedBy(k2)]).when(reject(k2)).thenThrows(ActionNotInQueueError, 409));
  it('given an action k2 approved, when k2 approves naming a version the action never had before it, then refused (409)', () =>
    spec.given([proposed, approvedBy(k2)]).when(approve(k2, 'v-other')).thenThrows(ActionNotInQueueError, 409));
  it('given an action k2 approved with the note "ok", when k2 approves with another note, then refused: a new decision (409)', () =>
    spec.given([proposed, approvedBy(k2)]).when(approve(k2, seenWhenProposed, 'another')).thenThrows(ActionNotInQueueError, 409));
  it('given an action k2 rejected for "no", when k2 rejects for another reason, then refused (409)', () =>
    spec.given([proposed, rejectedBy(k2)]).when({ type: 'RejectAction', ...onAction(k2), reason: 'other' }).thenThrows(ActionNotInQueueError, 409));
  it('given an action k2 approved that was returned to the queue since, when k2 approves with the old version, then refused: it changed', () =>
    spec.given([proposed, approvedBy(k2), returned]).when(approve(k2, seenWhenProposed)).thenThrows(ActionChangedError, 409));
});
