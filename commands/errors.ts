import { ProblemError } from '../src/errors/problem-error.ts';

/** Refusals decided on the write side. Each maps to one problem type. */
export class WorkspaceNotFoundError extends ProblemError {
  constructor(workspaceId: string) {
    super({ type: 'workspace-not-found', status: 404, title: 'Workspace not found', detail: `No workspace ${workspaceId}.` });
  }
}

export class AccountNotFoundError extends ProblemError {
  constructor(accountId: string) {
    super({ type: 'account-not-found', status: 404, title: 'Account not found', detail: `No account ${accountId} in this workspace.` });
  }
}

export class AlreadyExistsError extends ProblemError {
  constructor(what: string, id: string) {
    super({ type: 'already-exists', status: 409, title: `${what} already exists`, detail: `${what} ${id} already exists.` });
  }
}

export class KeyNotFoundError extends ProblemError {
  constructor(keyId: string) {
    super({ type: 'key-not-found', status: 404, title: 'API key not found', detail: `No API key ${keyId}.` });
  }
}

export class RunInProgressError extends ProblemError {
  constructor(accountId: string, activeRunId: string, activeStatus: string) {
    super({
      type: 'run-in-progress',
      status: 409,
      title: 'Another run is in progress for this account',
      detail: `Run ${activeRunId} is ${activeStatus} on account ${accountId}; one run per account at a time.`,
      extensions: { active_run_id: activeRunId },
    });
  }
}

export class RunNotCancelableError extends ProblemError {
  constructor(runId: string, status: string) {
    const running = status === 'running';
    super({
      type: running ? 'run-not-cancelable' : 'run-already-finished',
      status: 409,
      title: running ? 'A running run cannot be canceled' : 'The run has already finished',
      detail: running
        ? `Run ${runId} is running; the agent cannot be interrupted, and anything it proposes stays in the approval queue.`
        : `Run ${runId} is ${status}; only a queued run can be canceled.`,
      extensions: { run_status: status },
    });
  }
}
