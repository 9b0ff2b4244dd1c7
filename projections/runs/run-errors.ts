import { ProblemError } from '../../src/errors/problem-error.ts';

export class RunNotFoundError extends ProblemError {
  constructor(runId: string) {
    super({ type: 'run-not-found', status: 404, title: 'Run not found', detail: `No run ${runId} in this workspace.` });
  }
}
