import { randomBytes } from 'node:crypto';

/** The error shapes of the Google Ads REST API, as the fake server and its mutate handling send them. */
export function requestId(): string {
  return randomBytes(11).toString('base64url');
}

export interface FailureError {
  readonly errorCode: Record<string, string>;
  readonly message: string;
  readonly location?: { fieldPathElements: { fieldName: string; index?: number }[] };
  readonly details?: Record<string, unknown>;
}

export function googleAdsFailure(version: string, errors: readonly FailureError[]) {
  return { '@type': `type.googleapis.com/google.ads.googleads.${version}.errors.GoogleAdsFailure`, errors, requestId: requestId() };
}

/** google.rpc.Status as the REST API wraps it: { error: { code, message, status, details } }. */
export function rpcError(code: number, status: string, message: string, version: string, errors?: readonly FailureError[]) {
  return { error: { code, message, status, ...(errors ? { details: [googleAdsFailure(version, errors)] } : {}) } };
}

