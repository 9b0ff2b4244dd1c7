import { AppError, ErrorKind } from '../../errors/app-error.ts';

/**
 * Errors of the sandbox platform beyond the port's own (platform-errors.ts). They are
 * AppErrors so the agent sees the message as a tool error and the HTTP edge maps them.
 */
export class KeywordNotFoundError extends AppError {
  readonly kind = ErrorKind.NotFound;

  constructor(keywordIds: readonly string[]) {
    super('keyword-not-found', `No keyword ${keywordIds.join(', ')} in this account.`, { details: { keyword_ids: keywordIds } });
  }
}

/** A change that cannot apply to its target as it is (a target CPA on a manual-CPC campaign, a budget of 0, ...). */
export class ChangeNotApplicableError extends AppError {
  readonly kind = ErrorKind.Validation;

  constructor(detail: string) {
    super('change-not-applicable', detail);
  }
}

export class InvalidDateRangeError extends AppError {
  readonly kind = ErrorKind.Validation;

  constructor(detail: string) {
    super('invalid-date-range', detail);
  }
}
