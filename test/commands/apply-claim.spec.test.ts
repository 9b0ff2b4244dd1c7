import {
  ApplyClaimHeldError,
  ApplyClaimLostError,
  NothingToApplyError,
  type FinishApply,
  type HeartbeatApply,
  type StartApply,
} from '../../commands/action/action-lifecycle.ts';
import { actionDecider } from '../../commands/action/action-decider.ts';
import { deciderSpec, recorded } from '../support/decider-spec.ts';
import { actionProposal } from '../support/action-fixtures.ts';

/** docs/policy.md, "Apply worker": one live claim per action; only its holder heartbeats and finishes. */
const T0 = Date.parse('2026-11-21T10:00:00.000Z');
const at = (seconds: number) => ({ actor: { kind: 'worker' as const, id: 'w' }, correlationId: 'c', now: new Date(T0 + seconds * 1000) });
const iso = (seconds: number) => new Date(T0 + seconds * 1000).toISOString();

const proposed = recorded('ActionProposed', actionProposal({ risk_tier: 'safe', disposition: 'auto_applied', auto_apply_requested: true }), { actor: { kind: 'api_key', id: 'k1' } } as never);
const claimed = (claimId: string, worker: string, attempt: number, leaseUntilSeconds: number) =>
  recorded('ActionApplyStarted', { worker_id: worker, attempt, claim_id: claimId, lease_until: iso(leaseUntilSeconds) });
const heartbeat = (claimId: string, worker: string, leaseUntilSeconds: number) =>
  recorded('ActionApplyHeartbeat', { worker_id: worker, claim_id: claimId, lease_until: iso(leaseUntilSeconds) });

const start = (claimId: string, seconds: number, workerId = 'w2'): StartApply => ({ type: 'StartApply',
  workspaceId: 'ws',
  accountId: 'acc',
  actionId: 'a1',
  workerId,
  claimId,
  leaseMs: 30_000,
  meta: at(seconds),
});
const beat = (claimId: string, seconds: number): HeartbeatApply => ({ type: 'HeartbeatApply', workspaceId: 'ws', accountId: 'acc', actionId: 'a1', workerId: 'w1', claimId, leaseMs: 30_000, meta: at(seconds) });
const finish = (claimId: string | null, result: FinishApply['result'], seconds = 5): FinishApply => ({ type: 'FinishApply',
  workspaceId: 'ws',
  accountId: 'acc',
  actionId: 'a1',
  workerId: 'w1',
  claimId,
  result,
  meta: at(seconds),
});

describe('apply claims (decider specs)', () => {
  const spec = deciderSpec(actionDecider);
  const beats = deciderSpec(actionDecider);
  const finishes = deciderSpec(actionDecider);

  it('given an auto_applied action, when a worker claims it, then the claim has an id and a lease', () => {
    spec.given([proposed]).when(start('k1', 0)).then([{ type: 'ActionApplyStarted', data: { attempt: 1, claim_id: 'k1', lease_until: iso(30) } }]);
  });

  it('given a live claim, when another worker claims the action, then it is refused', () => {
    spec.given([proposed, claimed('k1', 'w1', 1, 30)]).when(start('k2', 29)).thenThrows(ApplyClaimHeldError);
  });

  it('given a claim kept alive by heartbeats, when claimed after the first lease, then still refused', () => {
    spec.given([proposed, claimed('k1', 'w1', 1, 30), heartbeat('k1', 'w1', 50)]).when(start('k2', 40)).thenThrows(ApplyClaimHeldError);
  });

  it('given a claim stored though its worker never heard so (a lost acknowledgement), when that worker decides the same claim again, then nothing is appended: it holds the claim', () => {
    spec.given([proposed, claimed('k1', 'w2', 1, 30)]).when(start('k1', 5)).then([]);
    // Also once its lease ran out, as long as nobody took over: a new attempt would count one platform call twice.
    spec.given([proposed, claimed('k1', 'w2', 1, 30)]).when(start('k1', 31)).then([]);
    spec.given([proposed, claimed('k1', 'w2', 1, 30), claimed('k2', 'w1', 2, 70)]).when(start('k1', 40)).thenThrows(ApplyClaimHeldError);
  });

  it('given a claim whose lease ran out (its worker died), when another worker claims, then it takes over as attempt 2', () => {
    spec.given([proposed, claimed('k1', 'w1', 1, 30)]).when(start('k2', 31)).then([{ type: 'ActionApplyStarted', data: { attempt: 2, claim_id: 'k2' } }]);
  });

  it('given a pre-lease claim (ActionApplyStarted v1), when claimed, then it may be taken over', () => {
    spec.given([proposed, recorded('ActionApplyStarted', { worker_id: 'old', attempt: 1 })]).when(start('k2', 0)).then([{ type: 'ActionApplyStarted', data: { attempt: 2 } }]);
  });

  it('given an applied action, when claimed, then there is nothing to apply', () => {
    spec.given([proposed, claimed('k1', 'w1', 1, 30), recorded('ActionApplied', { worker_id: 'w1', attempt: 1 })]).when(start('k2', 1)).thenThrows(NothingToApplyError);
  });

  it('heartbeats extend only the own, current claim', () => {
    beats.given([proposed, claimed('k1', 'w1', 1, 30)]).when(beat('k1', 20)).then([{ type: 'ActionApplyHeartbeat', data: { claim_id: 'k1', lease_until: iso(50) } }]);
    beats.given([proposed, claimed('k1', 'w1', 1, 30), claimed('k2', 'w2', 2, 70)]).when(beat('k1', 45)).thenThrows(ApplyClaimLostError);
    beats.given([proposed]).when(beat('k1', 1)).thenThrows(ApplyClaimLostError);
  });

  it('given a takeover, when the old worker finishes with its stale claim, then it is refused', () => {
    const takenOver = [proposed, claimed('k1', 'w1', 1, 30), claimed('k2', 'w2', 2, 70)];
    finishes.given(takenOver).when(finish('k1', { kind: 'applied' }, 45)).thenThrows(ApplyClaimLostError);
    finishes.given(takenOver).when(finish('k1', { kind: 'failed', error: 'x', willRetry: true }, 45)).thenThrows(ApplyClaimLostError);
    finishes.given(takenOver).when(finish('k2', { kind: 'applied' }, 45)).then([{ type: 'ActionApplied', data: { attempt: 2 } }]);
  });

  it('a finish without a claim can only return the action, and not from under a live claim', () => {
    finishes.given([proposed]).when(finish(null, { kind: 'applied' })).thenThrows(ApplyClaimLostError);
    finishes.given([proposed, claimed('k1', 'w1', 1, 30)]).when(finish(null, { kind: 'returned', reason: 'kill switch' }, 10)).thenThrows(ApplyClaimHeldError);
    finishes.given([proposed, claimed('k1', 'w1', 1, 30)]).when(finish(null, { kind: 'returned', reason: 'kill switch' }, 31)).then([{ type: 'ActionReturnedToQueue' }]);
    finishes.given([proposed]).when(finish(null, { kind: 'returned', reason: 'kill switch' })).then([{ type: 'ActionReturnedToQueue', data: { reason: 'kill switch' } }]);
  });

  it('a failed attempt ends its claim: the retry claims afresh at once', () => {
    const failed = recorded('ActionApplyFailed', { worker_id: 'w1', attempt: 1, error: '503', will_retry: true });
    spec.given([proposed, claimed('k1', 'w1', 1, 30), failed]).when(start('k2', 2)).then([{ type: 'ActionApplyStarted', data: { attempt: 2 } }]);
  });

  it('given a claim, when the platform definitely refused the change, then the failure is final and the action returns saying so', () => {
    const error = 'Google Ads: Too high. (rangeError.TOO_HIGH)';
    finishes
      .given([proposed, claimed('k1', 'w1', 1, 30)])
      .when(finish('k1', { kind: 'failed', error, willRetry: false, refused: true }))
      .then([
        { type: 'ActionApplyFailed', data: { attempt: 1, error, will_retry: false } },
        { type: 'ActionReturnedToQueue', data: { reason: `the platform refused the change: ${error}` } },
      ]);
    finishes
      .given([proposed, claimed('k1', 'w1', 5, 30)])
      .when(finish('k1', { kind: 'failed', error: 'HTTP 503', willRetry: false }))
      .then([{ type: 'ActionApplyFailed' }, { type: 'ActionReturnedToQueue', data: { reason: 'the platform kept failing: HTTP 503' } }]);
  });

  it('given a claim, when a change applied in part, then ActionApplied records each applied operation and each refusal', () => {
    const appliedOperations = [{ subject: 'keyword 1-2', resource_name: 'customers/1/adGroupCriteria/1~2' }];
    const partialFailures = [{ subject: 'keyword 1-3', error_code: 'mutateError.RESOURCE_NOT_FOUND', message: 'gone' }];
    finishes
      .given([proposed, claimed('k1', 'w1', 1, 30)])
      .when(finish('k1', { kind: 'applied', appliedOperations, partialFailures }))
      .then([{ type: 'ActionApplied', data: { attempt: 1, applied_operations: appliedOperations, partial_failures: partialFailures } }]);
  });

  it('after the action left the apply path, a finish under another claim is refused and a claimless return records nothing', () => {
    const applied = [proposed, claimed('k1', 'w1', 1, 30), recorded('ActionApplied', { worker_id: 'w1', attempt: 1 })];
    finishes.given(applied).when(finish('k9', { kind: 'applied' })).thenThrows(ApplyClaimLostError);
    finishes.given(applied).when(finish(null, { kind: 'returned', reason: 'late re-check' })).thenNothing();
  });

  describe('a finish decided again after its acknowledgement was lost (the events were stored)', () => {
    const failedOnce = recorded('ActionApplyFailed', { worker_id: 'w1', attempt: 1, error: '503', will_retry: true });
    const failedFinally = recorded('ActionApplyFailed', { worker_id: 'w1', attempt: 1, error: '503', will_retry: false });

    it('given the retryable failure stored, when the same claim finishes it again, then nothing more is recorded (the retry claims afresh)', () => {
      finishes.given([proposed, claimed('k1', 'w1', 1, 30), failedOnce]).when(finish('k1', { kind: 'failed', error: '503', willRetry: true })).thenNothing();
      spec.given([proposed, claimed('k1', 'w1', 1, 30), failedOnce]).when(start('k2', 2)).then([{ type: 'ActionApplyStarted', data: { attempt: 2 } }]);
    });

    it('given only the ActionApplyFailed of a final failure stored, when the same claim finishes it again, then the missing return is recorded', () => {
      finishes
        .given([proposed, claimed('k1', 'w1', 1, 30), failedFinally])
        .when(finish('k1', { kind: 'failed', error: '503', willRetry: false }))
        .then([{ type: 'ActionReturnedToQueue', data: { reason: 'the platform kept failing: 503' } }]);
      finishes
        .given([proposed, claimed('k1', 'w1', 1, 30), failedFinally, recorded('ActionReturnedToQueue', { reason: 'the platform kept failing: 503' })])
        .when(finish('k1', { kind: 'failed', error: '503', willRetry: false }))
        .thenNothing();
    });

    it('given the change applied, when the same claim finishes it again, then nothing more is recorded; a return or another claim is refused', () => {
      const applied = [proposed, claimed('k1', 'w1', 1, 30), recorded('ActionApplied', { worker_id: 'w1', attempt: 1 })];
      finishes.given(applied).when(finish('k1', { kind: 'applied' })).thenNothing();
      finishes.given(applied).when(finish('k1', { kind: 'failed', error: '503', willRetry: true })).thenThrows(ApplyClaimLostError);
      finishes.given(applied).when(finish('k1', { kind: 'returned', reason: 'x' })).thenThrows(ApplyClaimLostError);
    });

    it('given a failure stored and another worker claimed since, when the first claim finishes again, then it is refused', () => {
      finishes.given([proposed, claimed('k1', 'w1', 1, 30), failedOnce, claimed('k2', 'w2', 2, 60)]).when(finish('k1', { kind: 'failed', error: '503', willRetry: true })).thenThrows(ApplyClaimLostError);
    });
  });
});
