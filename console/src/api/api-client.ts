import { revealHiddenCharacters } from '../text/hidden-characters.ts';
import { readApiKey } from '../session/api-key-store.ts';

/** An RFC 9457 problem (or a network failure) from the API, in a form views can show. */
export class ApiProblem extends Error {
  readonly status: number;
  /** The last path segment of the problem `type` (e.g. `action-not-in-queue`); `network` when no answer came. */
  readonly slug: string;
  /** Seconds from `Retry-After`, when the answer carried one. */
  readonly retryAfterSeconds: number | null;
  /** The problem's `title` (what kind of failure), when the answer had one. */
  readonly title: string | null;
  /** The problem's `detail` (this occurrence), when the answer had one. */
  readonly detail: string | null;

  constructor(status: number, slug: string, message: string, retryAfterSeconds: number | null, problem: { title?: string | null; detail?: string | null } = {}) {
    super(message);
    this.name = 'ApiProblem';
    this.status = status;
    this.slug = slug;
    this.retryAfterSeconds = retryAfterSeconds;
    this.title = problem.title ?? null;
    this.detail = problem.detail ?? null;
  }
}

export interface ApiAnswer<T> {
  readonly body: T;
  readonly headers: Headers;
}

type UnauthorizedListener = () => void;
let onUnauthorized: UnauthorizedListener = () => {};

/** Called when any request answers 401: the stored key is no longer valid. */
export function whenUnauthorized(listener: UnauthorizedListener): void {
  onUnauthorized = listener;
}

/** Seconds of a `Retry-After` header (delta-seconds or HTTP date), or null. */
export function retryAfterSeconds(headers: Headers): number | null {
  const value = headers.get('retry-after');
  if (value === null) return null;
  if (/^\d+$/.test(value.trim())) return Number(value.trim());
  const date = Date.parse(value);
  return Number.isNaN(date) ? null : Math.max(0, Math.ceil((date - Date.now()) / 1000));
}

/** How long a request may go unanswered before it counts as failed (`timeout`), unless the caller says otherwise. */
export const REQUEST_TIMEOUT_MS = 30_000;

/**
 * Calls the public API with the signed-in key (or `key` when given, for sign-in).
 * Non-2xx answers become an ApiProblem carrying the problem's detail; no answer within
 * `timeoutMs` (default REQUEST_TIMEOUT_MS) becomes an ApiProblem with status 0 and slug
 * `timeout`, no answer at all one with slug `network`. Aborting `signal` rejects with its
 * AbortError, as fetch does. Problem texts come from the service, so their hidden characters
 * (bidirectional controls, zero-width, tags) are shown (revealHiddenCharacters), never obeyed.
 *
 * @example
 * const { body } = await apiRequest<ListPage<Account>>('GET', '/api/v1/accounts');
 */
export async function apiRequest<T>(
  method: 'GET' | 'POST',
  path: string,
  options: { body?: unknown; key?: string; signal?: AbortSignal; timeoutMs?: number } = {},
): Promise<ApiAnswer<T>> {
  const key = options.key ?? readApiKey();
  const headers: Record<string, string> = { accept: 'application/json, application/problem+json' };
  if (key) headers.authorization = `Bearer ${key}`;
  if (options.body !== undefined) headers['content-type'] = 'application/json';
  // A timer (not AbortSignal.timeout), so a test's fake clock can move it forward.
  const timeoutMs = options.timeoutMs ?? REQUEST_TIMEOUT_MS;
  const controller = new AbortController();
  let timedOut = false;
  const timer = setTimeout(() => {
    timedOut = true;
    controller.abort();
  }, timeoutMs);
  const stop = () => controller.abort();
  options.signal?.addEventListener('abort', stop);
  if (options.signal?.aborted) controller.abort();
  const failed = (error: unknown): never => {
    if (timedOut && !options.signal?.aborted) {
      throw new ApiProblem(0, 'timeout', `The service did not answer within ${Math.round(timeoutMs / 1000)} s.`, null);
    }
    if (error instanceof DOMException && error.name === 'AbortError') throw error;
    throw new ApiProblem(0, 'network', 'The service could not be reached (no answer came back).', null);
  };
  try {
    let response: Response;
    try {
      response = await fetch(path, {
        method,
        headers,
        body: options.body === undefined ? null : JSON.stringify(options.body),
        signal: controller.signal,
        credentials: 'omit',
        cache: 'no-store',
      });
    } catch (error) {
      return failed(error);
    }
    if (response.ok) {
      let body: T;
      try {
        body = response.status === 204 ? (null as T) : ((await response.json()) as T);
      } catch (error) {
        if (controller.signal.aborted) return failed(error);
        throw new ApiProblem(response.status, 'unreadable', `The service answered ${response.status} with a body the console cannot read.`, null);
      }
      return { body, headers: response.headers };
    }
    const problem = await response.json().catch(() => ({})) as { type?: string; title?: string; detail?: string };
    if (controller.signal.aborted) return failed(new DOMException('aborted', 'AbortError'));
    const slug = typeof problem.type === 'string' ? (problem.type.split('/').pop() ?? 'unknown') : 'unknown';
    const title = typeof problem.title === 'string' ? revealHiddenCharacters(problem.title) : null;
    const detail = typeof problem.detail === 'string' ? revealHiddenCharacters(problem.detail) : null;
    const message = detail ?? title ?? unexplained(response.status);
    const failure = new ApiProblem(response.status, slug, message, retryAfterSeconds(response.headers), { title, detail });
    if (response.status === 401 && options.key === undefined) onUnauthorized();
    throw failure;
  } finally {
    clearTimeout(timer);
    options.signal?.removeEventListener('abort', stop);
  }
}

/** What an answer without a problem body (say a proxy's HTML error page) most likely means. */
function unexplained(status: number): string {
  if (status === 502 || status === 504) {
    return `A gateway in front of the service answered ${status} (${status === 502 ? 'bad gateway' : 'gateway timeout'}): the service itself did not answer it, ` +
      'because it is down, restarting or overloaded.';
  }
  if (status === 503) return 'The service is unavailable (503), probably restarting or overloaded.';
  if (status === 429) return 'Too many requests (429): the service asks the console to slow down.';
  if (status >= 500) return `The service failed with ${status} without saying why.`;
  return `The service answered ${status} without saying why.`;
}

/**
 * A failure that may pass by itself, so trying again later makes sense: no answer, a timeout,
 * a rate limit, a server (or gateway) error, or an answer that could not be read.
 */
export function mayPass(error: unknown): boolean {
  if (!(error instanceof ApiProblem)) return true;
  return error.status === 0 || error.status === 408 || error.status === 429 || error.status >= 500 || error.slug === 'unreadable';
}

/** The sentence to show for a failure (an ApiProblem's message, or any error's). */
export function describeError(error: unknown): string {
  return error instanceof Error ? error.message : String(error);
}

/** Follows `next_cursor` until the end (or `maxPages`), returning every row. */
export async function fetchAllPages<T>(
  pathWithQuery: (cursor: string | null) => string,
  options: { signal?: AbortSignal; maxPages?: number } = {},
): Promise<{ rows: T[]; complete: boolean; waiting?: boolean }> {
  const rows: T[] = [];
  let cursor: string | null = null;
  for (let page = 0; page < (options.maxPages ?? 20); page += 1) {
    const { body }: ApiAnswer<{ data: T[]; next_cursor?: string | number | null }> = await apiRequest<{ data: T[]; next_cursor?: string | number | null }>('GET', pathWithQuery(cursor), { signal: options.signal });
    rows.push(...body.data);
    if (body.next_cursor === null || body.next_cursor === undefined) return { rows, complete: true };
    // An empty page that sends the walk back where it was: the server cannot list more yet
    // (the history waits for the projections to judge the newest events). Show what there is.
    if (body.data.length === 0 && String(body.next_cursor) === cursor) return { rows, complete: false, waiting: true };
    cursor = String(body.next_cursor);
  }
  return { rows, complete: false };
}

export const apiPaths = {
  accounts: () => '/api/v1/accounts',
  approvals: (projectId: string, query: URLSearchParams) => {
    const text = query.toString();
    return `/api/v1/accounts/${encodeURIComponent(projectId)}/approvals${text ? `?${text}` : ''}`;
  },
  approve: (projectId: string, actionId: string) =>
    `/api/v1/accounts/${encodeURIComponent(projectId)}/approvals/${encodeURIComponent(actionId)}/approve`,
  reject: (projectId: string, actionId: string) =>
    `/api/v1/accounts/${encodeURIComponent(projectId)}/approvals/${encodeURIComponent(actionId)}/reject`,
  history: (projectId: string, query: URLSearchParams) => {
    const text = query.toString();
    return `/api/v1/accounts/${encodeURIComponent(projectId)}/history${text ? `?${text}` : ''}`;
  },
  run: (runId: string) => `/api/v1/runs/${encodeURIComponent(runId)}`,
  runEvents: (runId: string) => `/api/v1/runs/${encodeURIComponent(runId)}/events`,
} as const;
