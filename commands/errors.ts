import { AppError, ErrorKind } from '../src/errors/app-error.ts';

/** Refusals decided on the write side. Each has one code (the problem type's slug at the HTTP edge). */
export class WorkspaceNotFoundError extends AppError {
  readonly kind = ErrorKind.NotFound;

  constructor(workspaceId: string) {
    super('workspace-not-found', `No workspace ${workspaceId}.`);
  }
}

export class AccountNotFoundError extends AppError {
  readonly kind = ErrorKind.NotFound;

  constructor(accountId: string) {
    super('account-not-found', `No account ${accountId} in this workspace.`);
  }
}

export class AlreadyExistsError extends AppError {
  readonly kind = ErrorKind.Conflict;

  constructor(what: string, id: string) {
    super('already-exists', `${what} ${id} already exists.`);
  }
}

/** A pause of run starts must end in the future. */
export class PauseInThePastError extends AppError {
  readonly kind = ErrorKind.Validation;

  constructor(until: string) {
    super('pause-in-the-past', `A pause of run starts must end in the future; ${until} has passed.`, { details: { until } });
  }
}

export class KeyNotFoundError extends AppError {
  readonly kind = ErrorKind.NotFound;

  constructor(keyId: string) {
    super('key-not-found', `No API key ${keyId}.`);
  }
}

export class RunInProgressError extends AppError {
  readonly kind = ErrorKind.Conflict;

  constructor(accountId: string, activeRunId: string, activeStatus: string) {
    super('run-in-progress', `Run ${activeRunId} is ${activeStatus} on account ${accountId}; one run per account at a time.`, {
      details: { active_run_id: activeRunId },
    });
  }
}

export class RunNotCancelableError extends AppError {
  readonly kind = ErrorKind.IllegalState;
  /** `running`, a terminal status, or `finished` when the deciding side knew only that the run is no longer active. */
  readonly runStatus: string;

  constructor(runId: string, status: string) {
    const running = status === 'running';
    super(
      running ? 'run-not-cancelable' : 'run-already-finished',
      running
        ? `Run ${runId} is running; the agent cannot be interrupted, and anything it proposes stays in the approval queue.`
        : `Run ${runId} is ${status}; only a queued run can be canceled.`,
      { details: { run_status: status } },
    );
    this.runStatus = status;
  }
}
