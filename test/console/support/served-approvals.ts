import type { Page } from 'playwright-core';

/** An action as GET .../approvals lists it (docs/api.md), with made-up values where they do not matter. */
export interface ServedApproval {
  id: string;
  object: 'action';
  kind: string;
  summary: string;
  reason: string | null;
  params: Record<string, unknown>;
  risk_tier: string;
  disposition: string;
  policy_reasons: string[];
  approvals_url: string;
  status: string;
  status_reason: string | null;
  run_id: string | null;
  project_id: string;
  created_at: string;
  updated_at: string;
  version: string;
  edited: null;
}

/** The n-th made-up action of the account: a negative-keyword proposal, `n` minutes after a fixed start. */
export function servedApproval(projectId: string, n: number, fields: Partial<ServedApproval> = {}): ServedApproval {
  const at = new Date(Date.UTC(2025, 0, 1) + n * 60_000).toISOString();
  return {
    id: `00000000-0000-4000-8000-${String(n).padStart(12, '0')}`,
    object: 'action',
    kind: 'add_negative_keywords',
    summary: `Add 1 negative keyword(s) to "Campaign ${n}"`,
    reason: `served action ${n}`,
    params: { campaign_id: `cmp-${n}`, keywords: [{ text: `term ${n}`, match_type: 'exact' }] },
    risk_tier: 'review',
    disposition: 'queued',
    policy_reasons: [`reason of action ${n}`],
    approvals_url: `http://api.test/console/accounts/${projectId}/approvals`,
    status: 'applied',
    status_reason: null,
    run_id: null,
    project_id: projectId,
    created_at: at,
    updated_at: at,
    version: `v${n}-1`,
    edited: null,
    ...fields,
  };
}

/**
 * Answers the page's GET .../approvals from `actions()` (read at each request, so a test can
 * change them), as the API does: oldest first (newest first with `order=newest_first`), `status`
 * and `run_id` filters, `limit` (at most 200) and `next_cursor`. Every request is recorded in `requests` as its query string.
 */
export async function serveApprovals(page: Page, actions: () => readonly ServedApproval[]): Promise<{ requests: URLSearchParams[] }> {
  const requests: URLSearchParams[] = [];
  await page.route(/\/api\/v1\/accounts\/[^/]+\/approvals(\?.*)?$/, (route) => {
    if (route.request().method() !== 'GET') return route.fallback();
    const query = new URL(route.request().url()).searchParams;
    requests.push(query);
    const limit = Math.min(200, Number(query.get('limit') ?? '50'));
    const newestFirst = query.get('order') === 'newest_first';
    const cursor = query.get('cursor');
    const inOrder = actions()
      .map((action, index) => ({ action, position: index + 1 }))
      .filter(({ action }) => (!query.get('status') || action.status === query.get('status')) && (!query.get('run_id') || action.run_id === query.get('run_id')));
    const matching = (newestFirst ? inOrder.reverse() : inOrder).filter(({ position }) => cursor === null || (newestFirst ? position < Number(cursor) : position > Number(cursor)));
    const page = matching.slice(0, limit);
    const more = matching.length > limit;
    return route.fulfill({
      status: 200,
      contentType: 'application/json',
      body: JSON.stringify({ object: 'list', data: page.map(({ action }) => action), next_cursor: more ? String(page.at(-1)!.position) : null }),
    });
  });
  return { requests };
}
