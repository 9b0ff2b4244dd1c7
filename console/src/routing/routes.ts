/** The console's pages, parsed from the location path (all under /console). */
export type Route =
  | { readonly name: 'accounts' }
  | { readonly name: 'approvals'; readonly projectId: string }
  | { readonly name: 'history'; readonly projectId: string }
  | { readonly name: 'run'; readonly runId: string }
  | { readonly name: 'not-found' };

export const BASE_PATH = '/console';

export function parseRoute(pathname: string): Route {
  const path = pathname.replace(/\/+$/, '');
  if (path === BASE_PATH || path === '') return { name: 'accounts' };
  const segments = path.slice(BASE_PATH.length + 1).split('/').map((segment) => {
    try {
      return decodeURIComponent(segment);
    } catch {
      return '';
    }
  });
  if (segments.length === 3 && segments[0] === 'accounts' && segments[1] && segments[2] === 'approvals') return { name: 'approvals', projectId: segments[1] };
  if (segments.length === 3 && segments[0] === 'accounts' && segments[1] && segments[2] === 'history') return { name: 'history', projectId: segments[1] };
  if (segments.length === 2 && segments[0] === 'runs' && segments[1]) return { name: 'run', runId: segments[1] };
  return { name: 'not-found' };
}

export const routePaths = {
  accounts: () => `${BASE_PATH}`,
  approvals: (projectId: string, query?: URLSearchParams) =>
    `${BASE_PATH}/accounts/${encodeURIComponent(projectId)}/approvals${query && query.toString() ? `?${query}` : ''}`,
  history: (projectId: string, query?: URLSearchParams) =>
    `${BASE_PATH}/accounts/${encodeURIComponent(projectId)}/history${query && query.toString() ? `?${query}` : ''}`,
  run: (runId: string) => `${BASE_PATH}/runs/${encodeURIComponent(runId)}`,
} as const;
