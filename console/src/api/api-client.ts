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

/**
 * Calls the public API with the signed-in key (or `key` when given, for sign-in).
 * Non-2xx answers become an ApiProblem carrying the problem's detail.
 *
 * @example
 * const { body } = await apiRequest<ListPage<Account>>('GET', '/api/v1/accounts');
 */
export async function apiRequest<T>(
  method: 'GET' | 'POST',
  path: string,
  options: { body?: unknown; key?: string; signal?: AbortSignal } = {},
): Promise<ApiAnswer<T>> {
  const key = options.key ?? readApiKey();
  const headers: Record<string, string> = { accept: 'application/json, application/problem+json' };
  if (key) headers.authorization = `Bearer ${key}`;
  if (options.body !== undefined) headers['content-type'] = 'application/json';
  let response: Response;
  try {
    response = await fetch(path, {
      method,
      headers,
      body: options.body === undefined ? null : JSON.stringify(options.body),
      signal: options.signal ?? null,
      credentials: 'omit',
      cache: 'no-store',
    });
  } catch (error) {
    if (error instanceof DOMException && error.name === 'AbortError') throw error;
    throw new ApiProblem(0, 'network', 'The service could not be reached. Check your connection; the view retries by itself.', null);
  }
  if (response.ok) {
    const body = response.status === 204 ? (null as T) : ((await response.json()) as T);
    return { body, headers: response.headers };
  }
  const problem = await response.json().catch(() => ({})) as { type?: string; title?: string; detail?: string };
  const slug = typeof problem.type === 'string' ? (problem.type.split('/').pop() ?? 'unknown') : 'unknown';
  const title = typeof problem.title === 'string' ? problem.title : null;
  const detail = typeof problem.detail === 'string' ? problem.detail : null;
  const message = detail ?? title ?? `The service answered ${response.status}.`;
  const failure = new ApiProblem(response.status, slug, message, retryAfterSeconds(response.headers), { title, detail });
  if (response.status === 401 && options.key === undefined) onUnauthorized();
  throw failure;
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
