import {
  GoogleGenerativeAIError,
  GoogleGenerativeAIFetchError,
  GoogleGenerativeAIRequestInputError,
  GoogleGenerativeAIResponseError,
  type ErrorDetails,
} from '@google/generative-ai';

/** What to do about one failed SDK call. */
export type GeminiFailure =
  | { readonly retry: true; readonly message: string; readonly status?: number; readonly retryAfterMs?: number }
  | { readonly retry: false; readonly message: string; readonly status?: number };

/**
 * Sorts an error thrown by `generateContent` into "try again" (429, 5xx, the network) and
 * "give up" (other HTTP statuses, requests the SDK refused to send). The caller has already
 * ruled out its own abort signal.
 */
export function classifyGeminiFailure(error: unknown): GeminiFailure {
  if (error instanceof GoogleGenerativeAIFetchError && error.status !== undefined) {
    const message = apiMessage(error);
    if (error.status === 429 || error.status >= 500) {
      const retryAfterMs = retryDelayMs(error.errorDetails);
      return { retry: true, message, status: error.status, ...(retryAfterMs !== undefined ? { retryAfterMs } : {}) };
    }
    return { retry: false, message, status: error.status };
  }
  if (error instanceof GoogleGenerativeAIRequestInputError || error instanceof GoogleGenerativeAIResponseError) {
    return { retry: false, message: stripPrefix(error.message) };
  }
  // Everything else — the SDK's plain GoogleGenerativeAIError wrapping a failed fetch, a body
  // that broke off or was not JSON — is the network's fault and worth another attempt.
  const message = error instanceof GoogleGenerativeAIError ? stripPrefix(error.message) : error instanceof Error ? error.message : String(error);
  return { retry: true, message: `network error: ${message}` };
}

/**
 * The API's own message. The SDK folds it into "Error fetching from <url>: [400 Bad Request]
 * <message> <details JSON>"; the URL and details are noise in a run's failure detail.
 */
function apiMessage(error: GoogleGenerativeAIFetchError): string {
  let message = stripPrefix(error.message);
  const afterStatus = /\[\d{3}[^\]]*\]\s?(.*)$/s.exec(message);
  if (afterStatus?.[1] !== undefined) message = afterStatus[1];
  if (error.errorDetails) {
    const details = ` ${JSON.stringify(error.errorDetails)}`;
    if (message.endsWith(details)) message = message.slice(0, -details.length);
  }
  message = message.trim();
  return message || `HTTP ${error.status}${error.statusText ? ` ${error.statusText}` : ''}`;
}

function stripPrefix(message: string): string {
  return message.replace(/^\[GoogleGenerativeAI Error\]:\s*/, '');
}

/**
 * Gemini's 429s carry a google.rpc.RetryInfo ("retryDelay": "27s") saying when the quota
 * refills; retrying sooner only burns attempts.
 */
function retryDelayMs(details: readonly ErrorDetails[] | undefined): number | undefined {
  for (const detail of details ?? []) {
    if (detail['@type'] !== 'type.googleapis.com/google.rpc.RetryInfo' || typeof detail.retryDelay !== 'string') continue;
    const seconds = /^(\d+(?:\.\d+)?)s$/.exec(detail.retryDelay);
    if (seconds?.[1] !== undefined) return Math.round(Number(seconds[1]) * 1000);
  }
  return undefined;
}
