import { expect } from 'chai';
import type { PlatformAccountRef } from '../../src/platform/ads-platform.ts';
import { eventually } from '../support/eventually.ts';
import type { TestService } from '../support/test-service.ts';
import { loadAccount } from '../../commands/queries.ts';

export const PUBLIC_BASE_URL = 'http://api.test';

export interface Result {
  readonly status: number;
  readonly headers: Headers;
  readonly body: any;
  readonly text: string;
}

/** Sends a request and parses a JSON (or problem+json) body. */
export async function api(
  svc: TestService,
  method: string,
  path: string,
  options: { key?: string; body?: unknown; headers?: Record<string, string> } = {},
): Promise<Result> {
  const response = await svc.request(method, path, options);
  const text = await response.text();
  const type = response.headers.get('content-type') ?? '';
  const body = text !== '' && /[/+]json\b/.test(type) ? JSON.parse(text) : text;
  return { status: response.status, headers: response.headers, body, text };
}

/** An RFC 9457 problem of that status and type slug. */
export function expectProblem(result: Result, status: number, slug: string): void {
  expect(result.status, `status; body ${result.text}`).to.equal(status);
  expect(result.headers.get('content-type')).to.match(/^application\/problem\+json/);
  expect(result.body.type).to.equal(`${PUBLIC_BASE_URL}/problems/${slug}`);
  expect(result.body.status).to.equal(status);
}

/** What must not differ between "of another workspace" and "does not exist". */
export function problemShape(body: any, ids: readonly string[] = []): unknown {
  const scrub = (value: unknown) => {
    let text = typeof value === 'string' ? value : JSON.stringify(value);
    for (const id of ids) text = text.replaceAll(id, '<id>');
    return text;
  };
  const shape: Record<string, unknown> = {};
  for (const key of Object.keys(body).sort()) {
    if (key === 'request_id') continue;
    shape[key] = scrub(body[key]);
  }
  return shape;
}

export interface CampaignView {
  readonly id: string;
  readonly name: string;
  readonly status: string;
  readonly daily_budget: number;
  readonly bidding_strategy: {
    type: string;
    target_cpa: number | null;
    target_roas_pct: number | null;
    portfolio: { id: string; name: string; campaign_ids: string[] } | null;
  };
}

export interface CampaignsByStrategy {
  /** maximize_conversions with its own target CPA, enabled, no portfolio. */
  readonly cpa: CampaignView;
  /** maximize_conversion_value with a target ROAS, no portfolio (may be paused). */
  readonly roas: CampaignView;
  readonly manual: CampaignView;
  /** maximize_conversions on a portfolio strategy, enabled. */
  readonly portfolio: CampaignView;
  /** maximize_conversions without a target, if the account has one. */
  readonly noTarget: CampaignView | undefined;
}

export async function listCampaigns(svc: TestService, key: string, accountId: string): Promise<CampaignView[]> {
  const listed = await api(svc, 'GET', `/api/v1/accounts/${accountId}/campaigns`, { key });
  expect(listed.status, listed.text).to.equal(200);
  return listed.body.data as CampaignView[];
}

export async function campaignsByStrategy(svc: TestService, key: string, accountId: string): Promise<CampaignsByStrategy> {
  const all = await listCampaigns(svc, key, accountId);
  const find = (label: string, predicate: (c: CampaignView) => boolean) => {
    const found = all.find(predicate);
    if (!found) throw new Error(`sandbox account ${accountId} has no ${label} campaign: ${JSON.stringify(all)}`);
    return found;
  };
  const s = (c: CampaignView) => c.bidding_strategy;
  return {
    cpa: find('target CPA', (c) => c.status === 'enabled' && s(c).type === 'maximize_conversions' && s(c).target_cpa !== null && s(c).portfolio === null),
    roas: find('target ROAS', (c) => s(c).type === 'maximize_conversion_value' && s(c).target_roas_pct !== null && s(c).portfolio === null),
    manual: find('manual CPC', (c) => s(c).type === 'manual_cpc'),
    portfolio: find('portfolio', (c) => c.status === 'enabled' && s(c).portfolio !== null && s(c).target_cpa !== null),
    noTarget: all.find((c) => s(c).type === 'maximize_conversions' && s(c).target_cpa === null && s(c).portfolio === null),
  };
}

export async function campaignById(svc: TestService, key: string, accountId: string, campaignId: string): Promise<CampaignView> {
  const found = (await listCampaigns(svc, key, accountId)).find((c) => c.id === campaignId);
  if (!found) throw new Error(`no campaign ${campaignId}`);
  return found;
}

export const targetPath = (accountId: string, campaignId: string) => `/api/v1/accounts/${accountId}/campaigns/${campaignId}/target`;
export const approvalsPath = (accountId: string) => `/api/v1/accounts/${accountId}/approvals`;

/** Rounds like the endpoint does (cents for CPA). */
export const cents = (n: number) => Math.round(n * 100) / 100;

/** POST .../target, asserting 200; returns the action. */
export async function proposeTarget(
  svc: TestService,
  key: string,
  accountId: string,
  campaignId: string,
  body: Record<string, unknown>,
): Promise<any> {
  const result = await api(svc, 'POST', targetPath(accountId, campaignId), { key, body: { reason: 'test proposal', ...body } });
  expect(result.status, result.text).to.equal(200);
  return result.body;
}

/** The action as the approvals list shows it (every page). */
export async function listAllApprovals(svc: TestService, key: string, accountId: string, query = ''): Promise<any[]> {
  const items: any[] = [];
  let cursor: string | null = null;
  do {
    const qs = new URLSearchParams(query);
    qs.set('limit', '200');
    if (cursor !== null) qs.set('cursor', cursor);
    const page = await api(svc, 'GET', `${approvalsPath(accountId)}?${qs}`, { key });
    expect(page.status, page.text).to.equal(200);
    items.push(...page.body.data);
    cursor = page.body.next_cursor;
  } while (cursor !== null);
  return items;
}

export async function approvalOf(svc: TestService, key: string, accountId: string, actionId: string): Promise<any> {
  const found = (await listAllApprovals(svc, key, accountId)).find((a) => a.id === actionId);
  if (!found) throw new Error(`action ${actionId} is not in the approvals list`);
  return found;
}

/** Waits until the approvals list shows the action with that status; returns it. */
export async function waitForStatus(svc: TestService, key: string, accountId: string, actionId: string, status: string, timeoutMs = 15_000): Promise<any> {
  let action: any;
  await eventually(async () => {
    action = await approvalOf(svc, key, accountId, actionId);
    expect(action.status, `status of ${actionId}: ${JSON.stringify(action)}`).to.equal(status);
  }, timeoutMs, 100);
  return action;
}

/** The account as the platform port needs it, read from its aggregate. */
export async function platformAccount(svc: TestService, workspaceId: string, accountId: string): Promise<PlatformAccountRef> {
  const { aggregates } = svc.service.infrastructure;
  const { state } = await loadAccount(aggregates, workspaceId, accountId);
  return { accountId, name: state.name, platform: 'sandbox', sandboxSeed: state.sandboxSeed };
}
