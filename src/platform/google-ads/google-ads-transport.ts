import type { GoogleAdsConfig } from '../../config/config.ts';
import { PlatformUnavailableError } from '../platform-errors.ts';
import { platformDeadline } from '../platform-deadline.ts';
import type { AccessTokenCache } from './access-token-cache.ts';
import { GoogleAdsNotConnectedError, GoogleAdsQuotaExhaustedError, GoogleAdsRequestError } from './google-ads-errors.ts';
import { parseErrorBody, parseStatus, type ParsedFailure } from './google-ads-failure.ts';

/** Which Google Ads customer a call is for, and the manager it goes through. */
export interface GoogleAdsTarget {
  readonly accountId: string;
  readonly customerId: string;
  readonly loginCustomerId: string | null;
}

export type GoogleAdsRow = Record<string, unknown>;

export type MutateService = 'campaignCriteria' | 'adGroupCriteria' | 'campaignBudgets' | 'campaigns';

export interface MutateAnswer {
  readonly results: readonly Record<string, unknown>[];
  /** Operations refused under partialFailure; null when every operation was applied. */
  readonly partialFailure: ParsedFailure | null;
}

export interface TransportOptions {
  /** Longest a call waits out rate limits and 5xx retries outside a run (inside one, the run's deadline rules). Default 30 s. */
  readonly maxWaitMs?: number;
  readonly sleep?: (ms: number) => Promise<void>;
  /** Per-request timeout. Default 60 s. */
  readonly requestTimeoutMs?: number;
  /** Told of every HTTP request to Google Ads (metrics): `search` or `mutate:<service>`, the status (or `network_error`), seconds. */
  readonly onRequest?: (method: string, status: string, seconds: number) => void;
}

const MAX_SERVER_RETRIES = 4;
/**
 * Google's "the request was aborted, retry it" (HTTP 409 ABORTED, sometimes 400): another
 * request changed the same resource at once. Nothing of the aborted request was applied.
 */
const TRANSIENT_ERROR_CODES = new Set(['databaseError.CONCURRENT_MODIFICATION']);

/**
 * A mutate that creates resources is not idempotent: sent again after a lost answer, it
 * would find what the first one created (RESOURCE_ALREADY_EXISTS) and look refused.
 */
function createsResources(body: unknown): boolean {
  const operations = typeof body === 'object' && body !== null ? (body as { operations?: unknown }).operations : undefined;
  return Array.isArray(operations) && operations.some((op) => typeof op === 'object' && op !== null && 'create' in op);
}
/** 429s one call waits out; past them it fails even with time left, so a 429 without retryDelay cannot loop until the deadline. */
const MAX_QUOTA_RETRIES = 5;
const MAX_PAGES = 50;

/**
 * The Google Ads REST API over `fetch`: `googleAds:search` (paged) and the per-service
 * `:mutate` endpoints, with the OAuth bearer, developer-token and login-customer-id
 * headers. Errors become what a user can act on: a refused grant -> GoogleAdsNotConnected
 * (after one token refresh), 429 -> wait out quotaErrorDetails.retryDelay while the run's
 * deadline allows, 5xx, network errors and databaseError.CONCURRENT_MODIFICATION -> retried
 * with backoff (except a lost answer to a mutate that creates: PlatformUnavailable at once),
 * any other refusal -> GoogleAdsRequestError carrying the GoogleAdsFailure's codes and messages.
 */
export class GoogleAdsTransport {
  private readonly sleep: (ms: number) => Promise<void>;

  private readonly config: GoogleAdsConfig;
  private readonly tokens: AccessTokenCache;
  private readonly options: TransportOptions;

  constructor(
    config: GoogleAdsConfig,
    tokens: AccessTokenCache,
    options: TransportOptions = {},
  ) {
    this.config = config;
    this.tokens = tokens;
    this.options = options;
    this.sleep = options.sleep ?? ((ms) => new Promise((resolve) => setTimeout(resolve, ms)));
  }

  /** Every row of a GAQL query, following nextPageToken. */
  async search(target: GoogleAdsTarget, query: string): Promise<GoogleAdsRow[]> {
    const rows: GoogleAdsRow[] = [];
    let pageToken: string | undefined;
    for (let page = 0; page < MAX_PAGES; page++) {
      const answer = (await this.call(target, 'googleAds:search', { query, ...(pageToken ? { pageToken } : {}) })) as { results?: unknown; nextPageToken?: unknown };
      if (Array.isArray(answer.results)) rows.push(...(answer.results as GoogleAdsRow[]));
      pageToken = typeof answer.nextPageToken === 'string' && answer.nextPageToken !== '' ? answer.nextPageToken : undefined;
      if (!pageToken) return rows;
    }
    throw new PlatformUnavailableError(`a Google Ads query returned more than ${MAX_PAGES} pages`);
  }

  async mutate(target: GoogleAdsTarget, service: MutateService, body: { operations: unknown[]; validateOnly?: boolean; partialFailure?: boolean }): Promise<MutateAnswer> {
    const answer = (await this.call(target, `${service}:mutate`, body)) as { results?: unknown; partialFailureError?: unknown };
    const failure = answer.partialFailureError ? parseStatus(answer.partialFailureError) : null;
    return { results: Array.isArray(answer.results) ? (answer.results as Record<string, unknown>[]) : [], partialFailure: failure && failure.errors.length > 0 ? failure : null };
  }

  private async call(target: GoogleAdsTarget, method: string, body: unknown): Promise<unknown> {
    const url = `${this.config.apiBaseUrl}/${this.config.apiVersion}/customers/${target.customerId}/${method}`;
    // A run's own deadline bounds its waits (a 60 s retryDelay fits a run with 2 minutes left);
    // the fixed cap applies only where there is no run: HTTP routes and the apply worker.
    const deadline = platformDeadline() ?? Date.now() + (this.options.maxWaitMs ?? 30_000);
    let token = await this.tokens.get(target.accountId);
    let refreshed = false;
    let serverFailures = 0;
    let quotaRefusals = 0;
    const label = method === 'googleAds:search' ? 'search' : `mutate:${method.slice(0, -':mutate'.length)}`;
    // A lost answer (network error, timeout, 5xx) to a create may hide a create Google applied:
    // it is not sent again here but surfaces as the platform being unavailable, and the apply
    // worker re-plans from a fresh read, which skips what already exists (docs/operations.md).
    const resendable = !(method.endsWith(':mutate') && createsResources(body));
    const answerLost = async (message: string) => {
      if (!resendable) throw new PlatformUnavailableError(`${message}; the change was not sent again, as Google may have applied it`);
      await this.backoff(++serverFailures, deadline, message);
    };
    for (;;) {
      let response: Response;
      const started = performance.now();
      try {
        response = await fetch(url, {
          method: 'POST',
          headers: this.headers(target, token),
          body: JSON.stringify(body),
          signal: AbortSignal.timeout(this.options.requestTimeoutMs ?? 60_000),
        });
      } catch (error) {
        this.options.onRequest?.(label, 'network_error', (performance.now() - started) / 1000);
        await answerLost(`Google Ads cannot be reached (${(error as Error).name})`);
        continue;
      }
      this.options.onRequest?.(label, String(response.status), (performance.now() - started) / 1000);
      if (response.ok) {
        try {
          return await response.json();
        } catch {
          // A gateway's HTML page or a cut body: the answer is lost, whatever Google did.
          await answerLost('Google Ads answered HTTP 200 with a body that is not JSON');
          continue;
        }
      }
      const failure = parseErrorBody(await response.json().catch(() => null));
      const firstCode = failure.errors[0]?.errorCode ?? '';
      if (response.status === 401 && !refreshed) {
        refreshed = true;
        token = await this.tokens.refresh(target.accountId, token);
        continue;
      }
      if (response.status === 401 || (response.status === 403 && /^(authorizationError|authenticationError)\./.test(firstCode))) {
        throw new GoogleAdsNotConnectedError(target.accountId, failure.errors[0]?.message || failure.message || `HTTP ${response.status}`);
      }
      if (response.status === 429) {
        quotaRefusals += 1;
        const wait = failure.retryDelayMs ?? 1000 * 2 ** (quotaRefusals - 1);
        const message = failure.errors[0]?.message || failure.message || 'rate limited';
        if (quotaRefusals > MAX_QUOTA_RETRIES || Date.now() + wait > deadline) throw new GoogleAdsQuotaExhaustedError(message, failure.retryDelayMs);
        await this.sleep(wait);
        continue;
      }
      // Aborted, not applied: safe to send again whatever it does, with backoff like a 5xx.
      if (failure.errors.length > 0 && failure.errors.every((e) => TRANSIENT_ERROR_CODES.has(e.errorCode))) {
        await this.backoff(++serverFailures, deadline, `Google Ads: ${failure.errors[0]!.message} (${firstCode})`);
        continue;
      }
      if (response.status >= 500) {
        await answerLost(`Google Ads answered HTTP ${response.status}: ${failure.message}`);
        continue;
      }
      throw new GoogleAdsRequestError(response.status, failure.errors, failure.requestId);
    }
  }

  private headers(target: GoogleAdsTarget, token: string): Record<string, string> {
    return {
      authorization: `Bearer ${token}`,
      'content-type': 'application/json',
      accept: 'application/json',
      ...(this.config.developerToken ? { 'developer-token': this.config.developerToken } : {}),
      ...(target.loginCustomerId ? { 'login-customer-id': target.loginCustomerId } : {}),
    };
  }

  /** Exponential backoff with jitter (250 ms, 500 ms, 1 s, ...), at most MAX_SERVER_RETRIES and never past the deadline. */
  private async backoff(failures: number, deadline: number, message: string): Promise<void> {
    const wait = 250 * 2 ** (failures - 1) * (0.75 + Math.random() * 0.5);
    if (failures > MAX_SERVER_RETRIES || Date.now() + wait > deadline) throw new PlatformUnavailableError(message);
    await this.sleep(wait);
  }
}
