import { ProblemError } from '../../errors/problem-error.ts';

/**
 * Errors of the sandbox platform beyond the port's own (platform-errors.ts). They are
 * ProblemErrors so the agent sees the message as a tool error and HTTP maps them.
 */
export class KeywordNotFoundError extends ProblemError {
  constructor(keywordIds: readonly string[]) {
    super({ type: 'keyword-not-found', status: 404, title: 'Keyword not found', detail: `No keyword ${keywordIds.join(', ')} in this account.` });
  }
}

/** A change that cannot apply to its target as it is (a target CPA on a manual-CPC campaign, a budget of 0, ...). */
export class ChangeNotApplicableError extends ProblemError {
  constructor(detail: string) {
    super({ type: 'change-not-applicable', status: 422, title: 'The change does not apply to its target', detail });
  }
}

export class InvalidDateRangeError extends ProblemError {
  constructor(detail: string) {
    super({ type: 'invalid-date-range', status: 400, title: 'Invalid date range', detail });
  }
}
