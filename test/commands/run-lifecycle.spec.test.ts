import { accountDecider } from '../../commands/account/account-decider.ts';
import {
  RunNotClaimableError,
  type CancelRun,
  type ClaimRun,
  type FinishRun,
  type StartRun,
} from '../../commands/account/run-lifecycle.ts';
import { AccountNotFoundError, RunInProgressError, RunNotCancelableError } from '../../commands/errors.ts';
import { deciderSpec, recorded } from '../support/decider-spec.ts';

const meta = { actor: { kind: 'api_key' as const, id: 'key-1' }, correlationId: 'c' };
const created = recorded('AccountCreated', { name: 'Acme', platform: 'sandbox', sandbox_seed: 7 });
const queued = (runId = 'run-1') => recorded('RunQueued', { run_id: runId, brief: 'b', auto_apply: false, key_id: 'key-1', scope: 'write' });
const started = (runId = 'run-1', worker = 'w1') => recorded('RunStarted', { run_id: runId, worker_id: worker, agent: { kind: 'rules', model: 'r' } });
const succeeded = (runId = 'run-1') =>
  recorded('RunSucceeded', { run_id: runId, text: 't', truncated: false, usage: { input_tokens: 1, output_tokens: 1, steps: 1 }, duration_ms: 5 });

const start = (runId = 'run-2', workspaceId = 'ws'): StartRun => ({ type: 'StartRun',
  workspaceId,
  accountId: 'acc',
  runId,
  brief: 'find waste',
  autoApply: false,
  keyId: 'key-1',
  scope: 'write',
  meta,
});
const cancel = (runId = 'run-1', knownStatus = 'queued'): CancelRun => ({ type: 'CancelRun', workspaceId: 'ws', accountId: 'acc', runId, knownStatus, meta });
const claim = (runId = 'run-1', workerId = 'w1'): ClaimRun => ({ type: 'ClaimRun', workspaceId: 'ws', accountId: 'acc', runId, workerId, agent: { kind: 'rules', model: 'r' }, meta });
const finish = (workerId: string | null = 'w1'): FinishRun => ({ type: 'FinishRun',
  workspaceId: 'ws',
  accountId: 'acc',
  runId: 'run-1',
  workerId,
  outcome: { kind: 'succeeded', text: 'done', truncated: false, usage: { input_tokens: 1, output_tokens: 2, steps: 1 }, durationMs: 10 },
  meta,
});

describe('run lifecycle decisions (account aggregate)', () => {
  describe('start', () => {
    const spec = deciderSpec(accountDecider);
    it('queues a run on an idle account', () => spec.given([created]).when(start()).then([{ type: 'RunQueued', data: { run_id: 'run-2' } }]));
    it('queues again once the previous run ended', () => spec.given([created, queued(), started(), succeeded()]).when(start()).then([{ type: 'RunQueued' }]));
    it('refuses a second run while one is queued', () => spec.given([created, queued()]).when(start()).thenThrows(RunInProgressError, 409));
    it('refuses a second run while one is running', () => spec.given([created, queued(), started()]).when(start()).thenThrows(RunInProgressError, 409));
    it('appends nothing for a retry of the active run', () => spec.given([created, queued('run-2')]).when(start('run-2')).thenNothing());
    it('appends nothing for a run queued before that has ended since (a takeover of a request that was only slow)', () =>
      spec.given([created, queued('run-2'), started('run-2'), succeeded('run-2')]).when(start('run-2')).thenNothing());
    it('remembers the last 16 runs queued: a 17th-oldest id is queued anew', () => {
      const history = Array.from({ length: 17 }, (_, i) => [queued(`r${i}`), started(`r${i}`), succeeded(`r${i}`)]).flat();
      spec.given([created, ...history]).when(start('r1')).thenNothing();
      spec.given([created, ...history]).when(start('r0')).then([{ type: 'RunQueued', data: { run_id: 'r0' } }]);
    });
    it('treats an unknown account as not found', () => spec.given([]).when(start()).thenThrows(AccountNotFoundError, 404));
    it("treats another workspace's account as not found", () => spec.given([created]).when(start('run-2', 'other-ws')).thenThrows(AccountNotFoundError, 404));
  });

  describe('cancel', () => {
    const spec = deciderSpec(accountDecider);
    it('cancels a queued run', () => spec.given([created, queued()]).when(cancel()).then([{ type: 'RunCanceled', data: { run_id: 'run-1' } }]));
    it('refuses a running run with 409', () => spec.given([created, queued(), started()]).when(cancel()).thenThrows(RunNotCancelableError, 409));
    it('refuses a finished run with 409', () => spec.given([created, queued(), started(), succeeded()]).when(cancel('run-1', 'succeeded')).thenThrows(RunNotCancelableError, 409));
  });

  describe('claim by a worker', () => {
    const spec = deciderSpec(accountDecider);
    it('starts a queued run', () => spec.given([created, queued()]).when(claim()).then([{ type: 'RunStarted', data: { worker_id: 'w1' } }]));
    it('loses to a cancel', () => spec.given([created, queued(), recorded('RunCanceled', { run_id: 'run-1' })]).when(claim()).thenThrows(RunNotClaimableError));
    it('never starts a run twice: another worker cannot take a running run', () =>
      spec.given([created, queued(), started('run-1', 'w2')]).when(claim('run-1', 'w1')).thenThrows(RunNotClaimableError));
    it('appends nothing for a claim by the worker that already holds the run (its RunStarted stored, the acknowledgement lost)', () =>
      spec.given([created, queued(), started('run-1', 'w1')]).when(claim('run-1', 'w1')).thenNothing());
    it('refuses the holder of a run that already ended', () => spec.given([created, queued(), started(), succeeded()]).when(claim()).thenThrows(RunNotClaimableError));
  });

  describe('finish', () => {
    const spec = deciderSpec(accountDecider);
    it('ends the running run of its worker', () => spec.given([created, queued(), started()]).when(finish()).then([{ type: 'RunSucceeded', data: { text: 'done' } }]));
    it('ignores a worker that no longer owns the run', () => spec.given([created, queued(), started('run-1', 'w2')]).when(finish('w1')).thenNothing());
    it('ignores a run that already ended', () => spec.given([created, queued(), started(), succeeded()]).when(finish()).thenNothing());
    it('lets a queued run fail without a worker (pre-flight failures)', () => spec.given([created, queued()]).when(finish(null)).then([{ type: 'RunSucceeded' }]));
  });
});
