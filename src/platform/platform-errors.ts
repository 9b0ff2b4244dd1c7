import { AppError, ErrorKind } from '../errors/app-error.ts';

export class AccountNotConnectedError extends AppError {
  readonly kind = ErrorKind.IllegalState;

  constructor(accountId: string) {
    super('account-not-connected', `Account ${accountId} is not connected to an advertising platform; connect it first.`);
  }
}

export class CampaignNotFoundError extends AppError {
  readonly kind = ErrorKind.NotFound;

  constructor(campaignId: string) {
    super('campaign-not-found', `No campaign ${campaignId} in this account.`);
  }
}

/** A platform call failed for a reason on the platform's side: retryable after a few seconds. */
export class PlatformUnavailableError extends AppError {
  readonly kind = ErrorKind.Unavailable;

  constructor(message: string, options?: { cause?: unknown }) {
    super('platform-unavailable', message, { retryAfterSeconds: 5, cause: options?.cause });
  }
}
