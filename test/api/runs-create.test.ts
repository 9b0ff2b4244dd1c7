import { expect } from 'chai';
import { v7 as uuidv7 } from 'uuid';
import { generateApiKey } from '../../src/auth/api-key.ts';
import { AppendConflictError } from '../../src/event-store/errors.ts';
import { issueKey, revokeKey } from '../../src/operator/operator-commands.ts';
import { startTestService, type TestService, type TestTenant } from '../support/test-service.ts';
import {
  API_TEST_ROLES,
  call,
  callUndocumented,
  countBy,
  expectProblem,
  freshAccount,
  problemShape,
  PUBLIC_BASE_URL,
  runIdsOf,
  type ApiResult,
} from './support/api-call.ts';
import { streams } from '../../src/event-store/subjects.ts';

const BRIEF_MAX_LENGTH = 100;
const BODY_LIMIT_BYTES = 2048;
const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/;

describe('POST /api/v1/runs', function () {
  this.timeout(30_000);
  let svc: TestService;
  let tenant: TestTenant;
  let other: TestTenant;

  before(async () => {
    svc = await startTestService('api-runs-create', {
      ROLES: API_TEST_ROLES,
      BRIEF_MAX_LENGTH: String(BRIEF_MAX_LENGTH),
      BODY_LIMIT_BYTES: String(BODY_LIMIT_BYTES),
    });
    [tenant, other] = await Promise.all([svc.tenant('create-a'), svc.tenant('create-b')]);
  });

  after(async () => {
    await svc?.stop();
  });

  const post = (key: string | undefined, body: unknown, headers: Record<string, string> = {}): Promise<ApiResult> =>
    call(svc, 'POST', '/api/v1/runs', { key, body, headers });

  /** Paths of the run from its poll URL, so the test follows the link it was given. */
  const pathOf = (url: string): string => new URL(url).pathname;

  describe('accepted runs', () => {
    it('answers 202 with id, object, status and an absolute poll_url that Location repeats', async () => {
      const account = await freshAccount(svc, tenant.workspaceId);
      const created = await post(tenant.keys.write, { brief: 'Which campaigns waste budget?', project_id: account });

      expect(created.status).to.equal(202);
      expect(created.body.id).to.match(UUID);
      expect(created.body).to.deep.equal({
        id: created.body.id,
        object: 'run',
        status: 'queued',
        poll_url: `${PUBLIC_BASE_URL}/api/v1/runs/${created.body.id}`,
      });
      expect(created.headers.get('location')).to.equal(created.body.poll_url);
      expect(created.headers.get('idempotent-replayed')).to.equal(null);

      const polled = await call(svc, 'GET', pathOf(created.body.poll_url), { key: tenant.keys.write });
      expect(polled.status).to.equal(200);
      expect(polled.body).to.include({ id: created.body.id, status: 'queued', project_id: account, scope: 'write', auto_apply: false });
    });

    it('records auto_apply when the caller opts in', async () => {
      const account = await freshAccount(svc, tenant.workspaceId);
      const created = await post(tenant.keys.write, { brief: 'Tidy up negatives.', project_id: account, auto_apply: true });
      expect(created.status).to.equal(202);
      const polled = await call(svc, 'GET', pathOf(created.body.poll_url), { key: tenant.keys.write });
      expect(polled.body.auto_apply).to.equal(true);
    });

    it('lets a read-scoped key start a run, which records scope read', async () => {
      const account = await freshAccount(svc, tenant.workspaceId);
      const created = await post(tenant.keys.read, { brief: 'Summarise last week.', project_id: account });
      expect(created.status).to.equal(202);
      const polled = await call(svc, 'GET', pathOf(created.body.poll_url), { key: tenant.keys.read });
      expect(polled.body.scope).to.equal('read');
      expect(polled.body.result.actions).to.deep.equal([]);
    });

    it('accepts a brief of exactly BRIEF_MAX_LENGTH characters', async () => {
      const account = await freshAccount(svc, tenant.workspaceId);
      const created = await post(tenant.keys.write, { brief: 'b'.repeat(BRIEF_MAX_LENGTH), project_id: account });
      expect(created.status).to.equal(202);
    });
  });

  describe('one run per account', () => {
    it('answers 409 run-in-progress while a run is queued, naming the active run', async () => {
      const account = await freshAccount(svc, tenant.workspaceId);
      const first = await post(tenant.keys.write, { brief: 'First.', project_id: account });
      expect(first.status).to.equal(202);

      const second = await post(tenant.keys.admin, { brief: 'Second.', project_id: account });
      expectProblem(second, 409, 'run-in-progress');
      expect(second.body.active_run_id).to.equal(first.body.id);

      const polled = await call(svc, 'GET', `/api/v1/runs/${first.body.id}`, { key: tenant.keys.write });
      expect(polled.body.status).to.equal('queued');
    });

    it('accepts exactly one of 50 concurrent POSTs on one idle account and refuses 49 with 409', async () => {
      const account = await freshAccount(svc, tenant.workspaceId);
      const results = await Promise.all(
        Array.from({ length: 50 }, (_, i) => post(tenant.keys.write, { brief: `Concurrent brief ${i}`, project_id: account })),
      );
      expect(countBy(results, (r) => r.status)).to.deep.equal({ 202: 1, 409: 49 });
      const winner = results.find((r) => r.status === 202)!;
      for (const refused of results.filter((r) => r.status === 409)) {
        expectProblem(refused, 409, 'run-in-progress');
        expect(refused.body.active_run_id).to.equal(winner.body.id);
      }
      expect(await runIdsOf(svc, account)).to.deep.equal([winner.body.id]);
    });

    it('runs on two different accounts do not conflict', async () => {
      const [a, b] = await Promise.all([freshAccount(svc, tenant.workspaceId), freshAccount(svc, tenant.workspaceId)]);
      const [ra, rb] = await Promise.all([
        post(tenant.keys.write, { brief: 'On A.', project_id: a }),
        post(tenant.keys.write, { brief: 'On B.', project_id: b }),
      ]);
      expect([ra.status, rb.status]).to.deep.equal([202, 202]);
      expect(ra.body.id).to.not.equal(rb.body.id);
    });
  });

  describe('invalid requests', () => {
    let account: string;
    before(async () => {
      account = await freshAccount(svc, tenant.workspaceId, 'target of invalid requests');
    });

    /** None of the refused requests may have queued a run: the account must still accept one. */
    after(async () => {
      const created = await post(tenant.keys.write, { brief: 'Valid at last.', project_id: account });
      expect(created.status, 'a refused request queued a run').to.equal(202);
    });

    /** The distinct pointers of a validation problem (one member may break several rules). */
    const pointersOf = (result: ApiResult): string[] => [...new Set((result.body.errors as { pointer: string }[]).map((e) => e.pointer))].sort();

    it('400 malformed-json for a body that is not JSON', async () => {
      expectProblem(await post(tenant.keys.write, '{"brief": "unterminated'), 400, 'malformed-json');
    });

    it('400 malformed-json for an empty JSON body', async () => {
      const response = await call(svc, 'POST', '/api/v1/runs', { key: tenant.keys.write, headers: { 'content-type': 'application/json' } });
      expectProblem(response, 400, 'malformed-json');
    });

    it('422 validation-error with a pointer per wrongly typed member', async () => {
      const result = await post(tenant.keys.write, { brief: 42, project_id: true, auto_apply: 'yes' });
      expectProblem(result, 422, 'validation-error');
      expect(pointersOf(result)).to.include.members(['/auto_apply', '/brief', '/project_id']);
    });

    it('422 validation-error naming every missing member', async () => {
      const none = await post(tenant.keys.write, {});
      expectProblem(none, 422, 'validation-error');
      expect(pointersOf(none)).to.deep.equal(['/brief', '/project_id']);

      const noProject = await post(tenant.keys.write, { brief: 'No project.' });
      expectProblem(noProject, 422, 'validation-error');
      expect(pointersOf(noProject)).to.deep.equal(['/project_id']);
    });

    it('422 validation-error for an unknown member', async () => {
      const result = await post(tenant.keys.write, { brief: 'Hello.', project_id: account, priority: 'high' });
      expectProblem(result, 422, 'validation-error');
      expect(pointersOf(result)).to.deep.equal(['/priority']);
    });

    it('422 validation-error for a body that is JSON but not an object', async () => {
      const result = await post(tenant.keys.write, ['brief']);
      expectProblem(result, 422, 'validation-error');
      expect(pointersOf(result)).to.deep.equal(['/']);
    });

    for (const [label, brief] of [
      ['empty', ''],
      ['whitespace-only', ' \n\t  '],
    ] as const) {
      it(`422 validation-error for an ${label} brief`, async () => {
        const result = await post(tenant.keys.write, { brief, project_id: account });
        expectProblem(result, 422, 'validation-error');
        expect(pointersOf(result)).to.deep.equal(['/brief']);
      });
    }

    it('422 validation-error for a brief one character over BRIEF_MAX_LENGTH', async () => {
      const result = await post(tenant.keys.write, { brief: 'b'.repeat(BRIEF_MAX_LENGTH + 1), project_id: account });
      expectProblem(result, 422, 'validation-error');
      expect(pointersOf(result)).to.deep.equal(['/brief']);
    });

    it('413 payload-too-large for a body over BODY_LIMIT_BYTES', async () => {
      const result = await post(tenant.keys.write, { brief: 'x'.repeat(BODY_LIMIT_BYTES), project_id: account });
      expectProblem(result, 413, 'payload-too-large');
      expect(result.body.limit_bytes).to.equal(BODY_LIMIT_BYTES);
    });

    it('415 unsupported-media-type for text/plain', async () => {
      const result = await post(tenant.keys.write, JSON.stringify({ brief: 'Hello.', project_id: account }), { 'content-type': 'text/plain' });
      expectProblem(result, 415, 'unsupported-media-type');
    });

    it('404 account-not-found for an unknown project_id, also when it is not even id-shaped', async () => {
      expectProblem(await post(tenant.keys.write, { brief: 'Hello.', project_id: uuidv7() }), 404, 'account-not-found');
      expectProblem(await post(tenant.keys.write, { brief: 'Hello.', project_id: '../../etc' }), 404, 'account-not-found');
    });

    it("answers another workspace's project_id exactly like a nonexistent one", async () => {
      const foreign = await post(tenant.keys.write, { brief: 'Hello.', project_id: other.accounts.sandbox2 });
      const missing = await post(tenant.keys.write, { brief: 'Hello.', project_id: uuidv7() });
      expectProblem(foreign, 404, 'account-not-found');
      expect(problemShape(foreign.body)).to.deep.equal(problemShape(missing.body));
      // The other workspace's account is untouched: its owner can still start a run on it.
      const own = await post(other.keys.write, { brief: 'Mine.', project_id: other.accounts.sandbox2 });
      expect(own.status).to.equal(202);
    });
  });

  describe('authentication', () => {
    const body = (): unknown => ({ brief: 'Authenticated?', project_id: tenant.accounts.sandbox });

    const expectUnauthorized = (result: ApiResult): void => {
      expectProblem(result, 401, 'unauthorized');
      expect(result.headers.get('www-authenticate')).to.match(/^Bearer realm="api"/);
    };

    it('401 with WWW-Authenticate without Authorization, before the body is even looked at', async () => {
      expectUnauthorized(await post(undefined, body()));
      expectUnauthorized(await post(undefined, '{not json'));
    });

    it('401 for a scheme other than Bearer', async () => {
      expectUnauthorized(await post(undefined, body(), { authorization: `Basic ${Buffer.from('a:b').toString('base64')}` }));
    });

    it('401 for a malformed key', async () => {
      expectUnauthorized(await post('not-an-api-key', body()));
      expectUnauthorized(await post(`${tenant.keys.write}x`, body()));
    });

    it('401 for a well-formed key that was never issued, and for a wrong secret of a real key id', async () => {
      const unknown = await post(generateApiKey().key, body());
      expectUnauthorized(unknown);
      const realId = tenant.keys.write.slice(0, 'ak_'.length + 32);
      const wrongSecret = await post(`${realId}_${'A'.repeat(43)}`, body());
      expectUnauthorized(wrongSecret);
      expect(problemShape(wrongSecret.body)).to.deep.equal(problemShape(unknown.body));
    });

    it('401 for a revoked key, even one that was just used successfully', async () => {
      const infra = svc.service.infrastructure;
      const issued = await issueKey(infra, tenant.workspaceId, 'write', 'to be revoked');
      const account = await freshAccount(svc, tenant.workspaceId);
      const before = await call(svc, 'GET', '/api/v1/accounts', { key: issued.value.key });
      expect(before.status).to.equal(200);

      await revokeKey(infra, issued.value.id);
      expectUnauthorized(await post(issued.value.key, { brief: 'After revocation.', project_id: account }));
      const created = await post(tenant.keys.write, { brief: 'Still idle?', project_id: account });
      expect(created.status, 'the revoked key queued a run').to.equal(202);
    });
  });

  describe('request ids', () => {
    it('echoes a safe caller X-Request-Id and quotes it in problems; replaces an unsafe one', async () => {
      const echoed = await post(tenant.keys.write, {}, { 'x-request-id': 'trace-42.a_b' });
      expect(echoed.headers.get('x-request-id')).to.equal('trace-42.a_b');
      expect(echoed.body.request_id).to.equal('trace-42.a_b');

      const replaced = await post(tenant.keys.write, {}, { 'x-request-id': 'evil\tvalue' });
      expect(replaced.headers.get('x-request-id')).to.not.equal('evil\tvalue');
      expect(replaced.body.request_id).to.equal(replaced.headers.get('x-request-id'));
    });
  });

  describe('methods', () => {
    it('405 with Allow for a method the path does not support', async () => {
      const put = await callUndocumented(svc, 'PUT', '/api/v1/runs', { key: tenant.keys.write, body: {} });
      expectProblem(put, 405, 'method-not-allowed');
      expect(put.headers.get('allow')).to.include('POST');

      const patch = await callUndocumented(svc, 'PATCH', `/api/v1/runs/${uuidv7()}`, { key: tenant.keys.write, body: {} });
      expectProblem(patch, 405, 'method-not-allowed');
      expect(patch.headers.get('allow')?.split(/,\s*/)).to.include.members(['GET', 'DELETE']);
    });
  });
  describe('write contention', () => {
    it('answers 503 service-unavailable with Retry-After when the account aggregate stays contended', async () => {
      const account = await freshAccount(svc, tenant.workspaceId);
      const { store, subjects } = svc.service.infrastructure;
      const subject = subjects.forAggregate(streams.account(tenant.workspaceId, account));
      const append = store.append.bind(store);
      // Simulates writers that win every race on this one account.
      store.append = (async (target: string, events: never, expected: { lastSequence: number }) => {
        if (target === subject) throw new AppendConflictError(target, expected.lastSequence);
        return append(target, events, expected as never);
      }) as typeof store.append;
      try {
        const result = await post(tenant.keys.write, { brief: 'Contended.', project_id: account });
        expectProblem(result, 503, 'service-unavailable');
        expect(result.headers.get('retry-after')).to.match(/^\d+$/);
      } finally {
        store.append = append;
      }
    });
  });
});
