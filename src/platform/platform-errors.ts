import { ProblemError } from '../errors/problem-error.ts';

export class AccountNotConnectedError extends ProblemError {
  constructor(accountId: string) {
    super({
      type: 'account-not-connected',
      status: 409,
      title: 'The account has no connected advertising-platform account',
      detail: `Account ${accountId} is not connected to an advertising platform; connect it first.`,
    });
  }
}

export class CampaignNotFoundError extends ProblemError {
  constructor(campaignId: string) {
    super({ type: 'campaign-not-found', status: 404, title: 'Campaign not found', detail: `No campaign ${campaignId} in this account.` });
  }
}

/** A platform call failed for a reason on the platform's side (retryable): 503 with Retry-After over HTTP. */
export class PlatformUnavailableError extends ProblemError {
  constructor(message: string, options?: { cause?: unknown }) {
    super(
      { type: 'platform-unavailable', status: 503, title: 'The advertising platform is unavailable', detail: message, headers: { 'retry-after': '5' } },
      options,
    );
  }
}
