import { AppError, ErrorKind } from '../../src/errors/app-error.ts';

export class RunNotFoundError extends AppError {
  readonly kind = ErrorKind.NotFound;

  constructor(runId: string) {
    super('run-not-found', `No run ${runId} in this workspace.`);
  }
}
