import { expect } from 'chai';
import { gzipSync } from 'node:zlib';
import { hasHostileText } from '../../src/text/hostile-text.ts';
import { startTestService, type TestService, type TestTenant } from '../support/test-service.ts';
import { API_TEST_ROLES, call, expectProblem } from './support/api-call.ts';

/**
 * Issue #15: the claims of docs/api.md about validation, made true, and validation errors
 * that say which field, what was wrong and what to send instead (the JSON pointer stays the
 * machine field).
 */
describe('errors that teach (issue #15)', function () {
  this.timeout(30_000);
  let svc: TestService;
  let tenant: TestTenant;

  before(async () => {
    svc = await startTestService('api-teach', { ROLES: API_TEST_ROLES });
    tenant = await svc.tenant('teach');
  });

  after(async () => {
    await svc?.stop();
  });

  const messagesOf = (body: any): Record<string, string> => Object.fromEntries((body.errors as { pointer: string; message: string }[]).map((e) => [e.pointer, e.message]));

  describe('unknown query parameters get 422 naming them', () => {
    for (const [path, typo, known] of [
      ['approvals', 'statuss', 'status'],
      ['history', 'limt', 'limit'],
    ] as const) {
      it(`GET ${path}?${typo}=… answers 422 naming /${typo} and the parameters it takes`, async () => {
        const result = await call(svc, 'GET', `/api/v1/accounts/${tenant.accounts.sandbox}/${path}?${typo}=5`, { key: tenant.keys.read });
        expectProblem(result, 422, 'validation-error');
        expect(Object.keys(messagesOf(result.body))).to.deep.equal([`/${typo}`]);
        expect(messagesOf(result.body)[`/${typo}`]).to.match(new RegExp(`^${typo}: is not a query parameter of this endpoint; it takes .*\\b${known}\\b`));
      });
    }

    it('refuses a query parameter on every /api route, even one that takes none', async () => {
      for (const path of ['/api/v1/accounts', `/api/v1/runs/00000000-0000-4000-8000-000000000000`, '/api/v1/workspace/kill-switch']) {
        const result = await call(svc, 'GET', `${path}?verbose=1`, { key: tenant.keys.read });
        expectProblem(result, 422, 'validation-error');
        expect(result.body.errors).to.deep.equal([{ pointer: '/verbose', message: 'verbose: is not a query parameter of this endpoint; send none' }]);
      }
    });
  });

  it('a body member breaking a rule is named with what to send instead', async () => {
    const result = await call(svc, 'POST', '/api/v1/runs', { key: tenant.keys.write, body: { brief: '   ', project_id: tenant.accounts.sandbox, auto_apply: 'yes', extra: 1 } });
    expectProblem(result, 422, 'validation-error');
    expect(messagesOf(result.body)).to.deep.equal({
      '/brief': 'brief: must contain at least one non-space character',
      '/auto_apply': 'auto_apply: must be true or false, not a string',
      '/extra': 'extra: is not a field of this body; it takes brief, project_id or auto_apply',
    });
    expect(result.body.detail).to.include('brief: must contain at least one non-space character');
    const missing = await call(svc, 'POST', '/api/v1/runs', { key: tenant.keys.write, body: { brief: 'Audit.' } });
    expect(messagesOf(missing.body)).to.deep.equal({ '/project_id': 'project_id: is required; send a string' });
  });

  it('a query value out of range says the range, in plain digits', async () => {
    const result = await call(svc, 'GET', `/api/v1/accounts/${tenant.accounts.sandbox}/approvals?limit=0x10&cursor=-1`, { key: tenant.keys.read });
    expectProblem(result, 422, 'validation-error');
    expect(messagesOf(result.body)).to.deep.equal({
      '/limit': 'limit: must be an integer from 1 to 200, in plain decimal digits',
      '/cursor': 'cursor: must be a cursor from a previous page (its `next_cursor`)',
    });
    // `detail` joins the messages, for a query as for a body.
    expect(result.body.detail).to.equal(
      'limit: must be an integer from 1 to 200, in plain decimal digits; cursor: must be a cursor from a previous page (its `next_cursor`)',
    );
  });

  it('bodies must be a JSON media type: application/json or any application/<name>+json, in UTF-8; anything else is 415', async () => {
    const post = (type: string, account: string) =>
      call(svc, 'POST', '/api/v1/runs', { key: tenant.keys.read, body: JSON.stringify({ brief: 'Media type.', project_id: account }), headers: { 'content-type': type } });
    expectProblem(await post('text/json', tenant.accounts.sandbox), 415, 'unsupported-media-type');
    expectProblem(await post('application/jsonx', tenant.accounts.sandbox), 415, 'unsupported-media-type');
    expectProblem(await post('application/json; charset=latin1', tenant.accounts.sandbox), 415, 'unsupported-media-type');
    const suffixed = await post('application/merge-patch+json', tenant.accounts.sandbox2);
    expect(suffixed.status, suffixed.text).to.equal(202);
  });

  it('a compressed body is 415 saying to send it uncompressed, and unparsable bytes are never echoed raw', async () => {
    const body = gzipSync(JSON.stringify({ brief: 'Compressed.', project_id: tenant.accounts.sandbox }));
    const headers = { authorization: `Bearer ${tenant.keys.write}`, 'content-type': 'application/json' };
    const compressed = await fetch(`${svc.baseUrl}/api/v1/runs`, { method: 'POST', headers: { ...headers, 'content-encoding': 'gzip' }, body });
    const problem = (await compressed.json()) as { type: string; detail: string };
    expect(compressed.status).to.equal(415);
    expect(problem.type).to.match(/\/problems\/unsupported-media-type$/);
    expect(problem.detail).to.equal("Received Content-Encoding 'gzip'; send the body uncompressed, without a Content-Encoding header.");
    // The same bytes without the header: not JSON, and the parser's quote of them is made printable.
    const garbled = await call(svc, 'POST', '/api/v1/runs', { key: tenant.keys.write, body: body.toString('latin1'), headers: { 'content-type': 'application/json' } });
    expectProblem(garbled, 400, 'malformed-json');
    expect(hasHostileText(garbled.body.detail), garbled.body.detail).to.equal(false);
  });

  describe('the campaign target endpoint', () => {
    let cpaCampaign: string;
    let cpaTarget: number;

    before(async () => {
      const listed = await call(svc, 'GET', `/api/v1/accounts/${tenant.accounts.sandbox}/campaigns`, { key: tenant.keys.read });
      const campaign = listed.body.data.find((c: any) => c.status !== 'removed' && c.bidding_strategy.type === 'maximize_conversions' && c.bidding_strategy.target_cpa !== null);
      expect(campaign, 'a target CPA campaign').to.not.equal(undefined);
      cpaCampaign = campaign.id;
      cpaTarget = campaign.bidding_strategy.target_cpa;
    });

    it('answers a number too large to represent (1e400 parses as Infinity) with that, not with "must be a number, not a number"', async () => {
      const result = await call(svc, 'POST', `/api/v1/accounts/${tenant.accounts.sandbox}/campaigns/${cpaCampaign}/target`, {
        key: tenant.keys.write,
        body: '{"target_cpa":1e400,"reason":"huge"}',
        headers: { 'content-type': 'application/json' },
      });
      expectProblem(result, 422, 'validation-error');
      expect(result.body.errors).to.have.length(1);
      expect(result.body.errors[0].pointer).to.equal('/target_cpa');
      expect(result.body.errors[0].message).to.equal('target_cpa: must be a number, not a number too large to represent; send one at least 0.01 and at most 1000000000');
    });

    for (const [label, body] of [
      ['both targets', { target_cpa: 10, target_roas_pct: 300, reason: 'both' }],
      ['neither target', { reason: 'neither' }],
    ] as const) {
      it(`answers ${label} with the one this campaign takes`, async () => {
        const result = await call(svc, 'POST', `/api/v1/accounts/${tenant.accounts.sandbox}/campaigns/${cpaCampaign}/target`, { key: tenant.keys.write, body });
        expectProblem(result, 422, 'validation-error');
        expect(result.body.errors).to.deep.equal([{ pointer: '/', message: 'the body: send target_cpa (this campaign bids on a target CPA), and not the other' }]);
      });
    }

    it("answers an approver's edit beyond the largest amount by naming the field and the largest it takes, before any policy arithmetic", async () => {
      const proposed = await call(svc, 'POST', `/api/v1/accounts/${tenant.accounts.sandbox}/campaigns/${cpaCampaign}/target`, {
        key: tenant.keys.write,
        // +30 %: review, so it waits in the queue for a person.
        body: { target_cpa: Math.round(cpaTarget * 130) / 100, reason: 'to be edited' },
      });
      expect(proposed.status, JSON.stringify(proposed.body)).to.equal(200);
      expect(proposed.body.status, JSON.stringify(proposed.body)).to.equal('queued');
      const result = await call(svc, 'POST', `/api/v1/accounts/${tenant.accounts.sandbox}/approvals/${proposed.body.id}/approve`, {
        key: tenant.keys.admin,
        body: { edit: { target_cpa: 1e308 } },
      });
      expectProblem(result, 422, 'validation-error');
      expect(result.body.errors).to.have.length(1);
      expect(result.body.errors[0].pointer).to.equal('/edit/target_cpa');
      expect(result.body.errors[0].message).to.include('at most 1000000000');
    });
  });
});
