import { expect } from 'chai';
import { expectProblem as expectSharedProblem } from '../../support/problem.ts';
import { RUNS_PROJECTION } from '../../../projections/runs/runs-projection.ts';
import { waitForProjection } from '../../../projections/runtime/projector.ts';
import { createAccount } from '../../../src/operator/operator-commands.ts';
import type { TestService } from '../../support/test-service.ts';
import { assertMatchesOpenApi, openApiValidator } from './openapi-response-validator.ts';

/** Roles of the services under test: no agent worker, so a queued run stays queued until a test moves it. */
export const API_TEST_ROLES = 'http,projectors';
export const PUBLIC_BASE_URL = 'http://api.test';

export interface ApiResult {
  readonly status: number;
  readonly headers: Headers;
  /** Parsed JSON, the text of any other body, or undefined when there is none. */
  readonly body: any;
  readonly text: string;
}

export interface CallOptions {
  readonly key?: string;
  readonly body?: unknown;
  readonly headers?: Record<string, string>;
}

export async function readBody(response: Response): Promise<{ text: string; body: unknown }> {
  const text = await response.text();
  if (text === '') return { text, body: undefined };
  const type = response.headers.get('content-type') ?? '';
  return { text, body: /[/+]json\b/.test(type) ? (JSON.parse(text) as unknown) : text };
}

/** The document's path template a concrete path belongs to (e.g. `/api/v1/runs/{runId}`). */
export function templateOf(path: string): string {
  const bare = path.split('?')[0]!;
  for (const template of Object.keys(openApiValidator().document.paths)) {
    const pattern = new RegExp(`^${template.replace(/\{[^}]+\}/g, '[^/]+')}$`);
    if (pattern.test(bare)) return template;
  }
  throw new Error(`no operation of the OpenAPI document matches ${path}`);
}

/** Sends a request and checks the response against the OpenAPI document before returning it. */
export async function call(svc: TestService, method: string, path: string, options: CallOptions = {}): Promise<ApiResult> {
  const response = await svc.request(method, path, options);
  const { text, body } = await readBody(response);
  assertMatchesOpenApi(method, templateOf(path), response, body);
  return { status: response.status, headers: response.headers, body, text };
}

/** Sends a request that matches no documented operation (e.g. a wrong method); a problem body is still checked. */
export async function callUndocumented(svc: TestService, method: string, path: string, options: CallOptions = {}): Promise<ApiResult> {
  const response = await svc.request(method, path, options);
  const { text, body } = await readBody(response);
  if (response.status >= 400) openApiValidator().assertComponent('Problem', body, `${method} ${path} → ${response.status}`);
  return { status: response.status, headers: response.headers, body, text };
}

/** Asserts an RFC 9457 problem of the given status and type slug, consistent with its headers. */
export function expectProblem(result: ApiResult, status: number, slug: string): void {
  expectSharedProblem(result, status, slug);
  expect(result.body.type).to.equal(`${PUBLIC_BASE_URL}/problems/${slug}`);
}

/** The parts of a problem that must not reveal whether a resource exists elsewhere. */
export function problemShape(body: any): { type: string; title: string; status: number; members: string[] } {
  return { type: body.type, title: body.title, status: body.status, members: Object.keys(body).sort() };
}

/** A new connected (sandbox) account with no runs yet. */
export async function freshAccount(svc: TestService, workspaceId: string, name = 'fresh'): Promise<string> {
  const created = await createAccount(svc.service.infrastructure, workspaceId, name, 'sandbox');
  return created.value.id;
}

export function countBy<T>(items: readonly T[], key: (item: T) => string | number): Record<string, number> {
  const counts: Record<string, number> = {};
  for (const item of items) counts[String(key(item))] = (counts[String(key(item))] ?? 0) + 1;
  return counts;
}

/** Waits until the runs read model holds every event appended so far. */
export async function runsSettled(svc: TestService): Promise<void> {
  const { store, database } = svc.service.infrastructure;
  const caughtUp = await waitForProjection(database.db, RUNS_PROJECTION, await store.lastSequence(), 5000);
  expect(caughtUp, 'runs projection did not catch up').to.equal(true);
}

/** Ids of every run the read model holds for an account, once it has caught up. */
export async function runIdsOf(svc: TestService, accountId: string): Promise<string[]> {
  await runsSettled(svc);
  const rows = await svc.service.infrastructure.database.db
    .selectFrom('runs')
    .select('id')
    .where('account_id', '=', accountId)
    .orderBy('created_at')
    .execute();
  return rows.map((r) => r.id);
}
