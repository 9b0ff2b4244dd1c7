import { AppError, ErrorKind } from '../../errors/app-error.ts';

/** One error of a GoogleAdsFailure, as the API reports it (errorCode is a one-key object, e.g. { quotaError: 'RESOURCE_EXHAUSTED' }). */
export interface GoogleAdsErrorDetail {
  /** "quotaError.RESOURCE_EXHAUSTED": the errorCode object flattened to one readable token. */
  readonly errorCode: string;
  readonly message: string;
  /** Index of the mutate operation it is about, when the API says (location.fieldPathElements). */
  readonly operationIndex: number | null;
}

const MAX_PLATFORM_TEXT = 500;

/** Text from Google is hostile like any other: bounded, and kept on one line. */
export function platformText(value: unknown): string {
  const text = typeof value === 'string' ? value : '';
  // eslint-disable-next-line no-control-regex
  const clean = text.replace(/[\u0000-\u001f\u007f]|[\ud800-\udfff]/g, ' ').trim();
  return clean.length > MAX_PLATFORM_TEXT ? `${clean.slice(0, MAX_PLATFORM_TEXT)}…` : clean;
}

/**
 * Google Ads answered a value the service cannot take as what it claims to be: a count or an
 * amount that is not a finite, non-negative number within range ("NaN", -999000000, 1e307).
 * Nothing is computed from it (a 0 in its place could make a change look safe), so the read
 * fails: a bad gateway for the client, the tool's error in a run, a return to the queue for
 * the apply worker's re-check.
 */
export class GoogleAdsAnswerError extends AppError {
  readonly kind = ErrorKind.Unavailable;

  constructor(field: string, value: unknown) {
    const shown = platformText(typeof value === 'string' ? value : JSON.stringify(value) ?? String(value)).slice(0, 40);
    super('platform-answer-invalid', `Google Ads answered ${field} = ${shown}, which is not a count or amount the service can use; nothing was computed from it.`);
  }
}

/**
 * Google refused the account's grant (revoked, expired, or issued to another client).
 * Nothing the service can retry: a person has to reconnect the account.
 */
export class GoogleAdsNotConnectedError extends AppError {
  readonly kind = ErrorKind.IllegalState;

  /**
   * @param source `google-refused`: Google refused the grant; `credential-unreadable`: the
   *   service cannot read the stored grant (CREDENTIALS_KEY missing or not the one it was sealed with).
   */
  constructor(accountId: string, reason: string, source: 'google-refused' | 'credential-unreadable' = 'google-refused') {
    const reconnect = '`adsagent account reconnect ' + accountId + ' --refresh-token-file PATH`';
    super(
      'account-not-connected',
      source === 'google-refused'
        ? `Google refused the authorisation of account ${accountId} (${reason}); reconnect it with ${reconnect}.`
        : `The stored Google Ads grant of account ${accountId} cannot be read (${reason}); start the service with the CREDENTIALS_KEY it was stored with, or reconnect it with ${reconnect}.`,
    );
  }
}

/**
 * Google Ads refused a request (a GoogleAdsFailure): the first error's code and message
 * are what the user reads, in the tool result, the action's outcome and problem details.
 */
export class GoogleAdsRequestError extends AppError {
  // The platform refused a call the service made: for the client, whose own request was fine, a bad gateway.
  readonly kind = ErrorKind.Unavailable;
  readonly httpStatus: number;
  readonly errors: readonly GoogleAdsErrorDetail[];
  readonly requestId: string | null;

  constructor(
    httpStatus: number,
    errors: readonly GoogleAdsErrorDetail[],
    requestId: string | null,
  ) {
    const first = errors[0];
    super('platform-request-refused', first ? `Google Ads: ${first.message} (${first.errorCode})` : `Google Ads answered HTTP ${httpStatus}`, {
      details: {
        platform_errors: errors.map((e) => ({ error_code: e.errorCode, message: e.message })),
        ...(requestId ? { platform_request_id: requestId } : {}),
      },
    });
    this.httpStatus = httpStatus;
    this.errors = errors;
    this.requestId = requestId;
  }
}

/** The account's Google Ads quota is spent for longer than the run can wait. */
export class GoogleAdsQuotaExhaustedError extends AppError {
  readonly kind = ErrorKind.Unavailable;

  constructor(message: string, retryDelayMs: number | null) {
    super('platform-rate-limited', `Google Ads: ${message}${retryDelayMs !== null ? ` (retry after ${Math.ceil(retryDelayMs / 1000)} s)` : ''}`, {
      retryAfterSeconds: retryDelayMs !== null ? Math.max(1, Math.ceil(retryDelayMs / 1000)) : 60,
    });
  }
}
