import { expect } from 'chai';
import { actionDecider, type ActionCommand } from '../../commands/action/action-decider.ts';
import { ActionChangedError, ActionNotInQueueError } from '../../commands/action/action-lifecycle.ts';
import { actionVersion } from '../../commands/action/action-version.ts';
import { actionProposal } from '../support/action-fixtures.ts';
import { deciderSpec, recorded } from '../support/decider-spec.ts';

/** Approve and reject with `expectedVersion` (the API's `expected_version`): only the version the client saw is decided. */
const meta = { actor: { kind: 'api_key' as const, id: 'k2' }, correlationId: 'c' };
const proposal = actionProposal();
const proposed = recorded('ActionProposed', proposal, { time: '2026-11-21T10:00:00.000Z' } as never);
const approvedThenReturned = [
  recorded('ActionApproved', { note: '' }, { time: '2026-11-21T10:05:00.000Z' } as never),
  recorded('ActionReturnedToQueue', { reason: 'kill switch' }, { time: '2026-11-21T10:06:00.000Z' } as never),
];
const onAction = { workspaceId: 'ws', accountId: 'acc', actionId: 'a1', meta };
const seenWhenProposed = actionVersion({ status: 'queued', params: proposal.params, changedAt: '2026-11-21T10:00:00.000Z' });
const approve = (expectedVersion?: string): ActionCommand => ({ type: 'ApproveAction', ...onAction, note: 'ok', requireDistinctApprover: false, ...(expectedVersion ? { expectedVersion } : {}) });
const reject = (expectedVersion?: string): ActionCommand => ({ type: 'RejectAction', ...onAction, reason: 'no', ...(expectedVersion ? { expectedVersion } : {}) });

describe('action decider: expected version (specs)', () => {
  const spec = deciderSpec(actionDecider);
  it('given a queued action, when approved with the version it has, then approved', () =>
    spec.given([proposed]).when(approve(seenWhenProposed)).then([{ type: 'ActionApproved', data: { note: 'ok' } }]));
  it('given a queued action, when rejected with the version it has, then rejected', () =>
    spec.given([proposed]).when(reject(seenWhenProposed)).then([{ type: 'ActionRejected', data: { reason: 'no' } }]));
  it('given an action approved and returned to the queue since, when approved with the version seen before, then refused with 409 action-changed', () =>
    spec.given([proposed, ...approvedThenReturned]).when(approve(seenWhenProposed)).thenThrows(ActionChangedError, 409));
  it('given an action approved and returned to the queue since, when rejected with the version seen before, then refused', () =>
    spec.given([proposed, ...approvedThenReturned]).when(reject(seenWhenProposed)).thenThrows(ActionChangedError, 409));
  it('given an action returned to the queue, when approved with its version now, then approved', () => {
    const now = actionVersion({ status: 'returned', params: proposal.params, changedAt: '2026-11-21T10:06:00.000Z' });
    spec.given([proposed, ...approvedThenReturned]).when(approve(now)).then([{ type: 'ActionApproved' }]);
  });
  it('given an action returned to the queue, when approved without a version, then approved (as before)', () =>
    spec.given([proposed, ...approvedThenReturned]).when(approve()).then([{ type: 'ActionApproved' }]));
  it('given an approved action, when approved with the version seen before, then still action-not-in-queue (someone else decided)', () =>
    spec.given([proposed, recorded('ActionApproved', { note: '' })]).when(approve(seenWhenProposed)).thenThrows(ActionNotInQueueError, 409));
  it('given an action being applied, a heartbeat does not change its version', () => {
    const started = recorded('ActionApplyStarted', { worker_id: 'w', attempt: 1, claim_id: 'x', lease_until: '2026-11-21T10:31:00.000Z' }, { time: '2026-11-21T10:30:00.000Z' } as never);
    const heartbeat = recorded('ActionApplyHeartbeat', { worker_id: 'w', claim_id: 'x', lease_until: '2026-11-21T11:00:00.000Z' }, { time: '2026-11-21T10:40:00.000Z' } as never);
    const state = [proposed, recorded('ActionApproved', { note: '' }), started].reduce((s, e) => actionDecider.evolve(s, e), actionDecider.initialState());
    expect(state.changedAt).to.equal('2026-11-21T10:30:00.000Z');
    const after = actionDecider.evolve(state, heartbeat);
    expect(after.claim?.leaseUntil).to.equal('2026-11-21T11:00:00.000Z');
    expect(after.changedAt).to.equal('2026-11-21T10:30:00.000Z');
  });
});
