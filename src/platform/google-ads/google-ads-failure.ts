import { platformText, type GoogleAdsErrorDetail } from './google-ads-errors.ts';

/**
 * Reading Google's error bodies: google.rpc.Status `{ error: { code, message, status,
 * details: [GoogleAdsFailure] } }` for a refused request, and the same Status as
 * `partialFailureError` inside a 200 mutate answer. Everything is hostile text: only known
 * shapes are read, strings are bounded.
 */
export interface ParsedFailure {
  readonly message: string;
  readonly status: string;
  readonly errors: readonly GoogleAdsErrorDetail[];
  readonly requestId: string | null;
  /** quotaErrorDetails.retryDelay of the first quota error, in ms. */
  readonly retryDelayMs: number | null;
}

const isRecord = (value: unknown): value is Record<string, unknown> => typeof value === 'object' && value !== null && !Array.isArray(value);

/** "30s", "1.5s" (google.protobuf.Duration in JSON) -> ms; anything else null. */
export function durationMs(value: unknown): number | null {
  const match = typeof value === 'string' ? /^(\d{1,6})(\.\d{1,9})?s$/.exec(value) : null;
  return match ? Math.round(Number(`${match[1]}${match[2] ?? ''}`) * 1000) : null;
}

/** The Status object itself (the `error` member of a refused request, or a partialFailureError). */
export function parseStatus(status: unknown): ParsedFailure {
  const record = isRecord(status) ? status : {};
  const errors: GoogleAdsErrorDetail[] = [];
  let requestId: string | null = null;
  let retryDelayMs: number | null = null;
  for (const detail of Array.isArray(record.details) ? record.details : []) {
    if (!isRecord(detail) || !String(detail['@type'] ?? '').endsWith('.GoogleAdsFailure')) continue;
    if (typeof detail.requestId === 'string') requestId = platformText(detail.requestId).slice(0, 64);
    for (const error of Array.isArray(detail.errors) ? detail.errors.slice(0, 100) : []) {
      if (!isRecord(error)) continue;
      const code = isRecord(error.errorCode) ? Object.entries(error.errorCode)[0] : undefined;
      const path = isRecord(error.location) && Array.isArray(error.location.fieldPathElements) ? error.location.fieldPathElements : [];
      const operation = path.find((p): p is Record<string, unknown> => isRecord(p) && p.fieldName === 'operations');
      errors.push({
        errorCode: code ? `${platformText(code[0])}.${platformText(String(code[1]))}`.slice(0, 120) : 'unknown',
        message: platformText(error.message) || 'no message',
        operationIndex: operation && Number.isInteger(operation.index) ? (operation.index as number) : null,
      });
      const quota = isRecord(error.details) && isRecord(error.details.quotaErrorDetails) ? error.details.quotaErrorDetails : null;
      if (quota && retryDelayMs === null) retryDelayMs = durationMs(quota.retryDelay);
    }
  }
  return { message: platformText(record.message), status: platformText(record.status), errors, requestId, retryDelayMs };
}

/** A refused request's body. */
export function parseErrorBody(body: unknown): ParsedFailure {
  return parseStatus(isRecord(body) ? body.error : undefined);
}
