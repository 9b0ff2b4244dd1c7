import { expect } from 'chai';
import { generateApiKey } from '../../src/auth/api-key.ts';
import { loadConfig } from '../../src/config/config.ts';
import { createLogger } from '../../src/log/logger.ts';
import { createAccount, createWorkspace, issueKey } from '../../src/operator/operator-commands.ts';
import { startService, type RunningService } from '../../src/runtime/service.ts';
import { serviceEnv } from '../support/cli.ts';
import { eventually } from '../support/eventually.ts';
import { expectProblemResponse } from '../support/problem.ts';
import { startTestService, type TestService } from '../support/test-service.ts';

/**
 * An HTTP-only process (ROLES=http) on a database no projector has run on yet: the read models'
 * tables do not exist. It must say so (503 with Retry-After, /readyz not ready), never 500, and
 * serve as soon as a process with the projectors role has built them.
 */
describe('an HTTP-only process before any projector has run', () => {
  let http: TestService;
  let projectors: RunningService | undefined;

  before(async () => {
    http = await startTestService('httponly', { ROLES: 'http' });
  });
  after(async () => {
    await projectors?.stop();
    await http.stop();
  });

  it('answers API requests with 503 problems and Retry-After (never 500), /readyz names the missing read models, and it serves once a projector ran', async () => {
    // Any well-formed key: looking it up already needs the (missing) keys read model.
    const { key: unknownKey } = generateApiKey();
    const created = await http.request('POST', '/api/v1/runs', { key: unknownKey, body: { brief: 'find waste', project_id: 'acc' } });
    const problem = await expectProblemResponse(created, 503, 'service-unavailable');
    expect(problem.detail).to.match(/read models are not built yet/);
    expect(created.headers.get('retry-after')).to.match(/^[1-9][0-9]*$/);
    await expectProblemResponse(await http.request('GET', '/api/v1/runs/0190d5b4-4bd5-7c1a-8000-000000000000', { key: unknownKey }), 503, 'service-unavailable');

    const ready = await fetch(`${http.baseUrl}/readyz`);
    expect(ready.status).to.equal(503);
    const readiness = (await ready.json()) as { checks: Record<string, { ok: boolean; detail?: string }> };
    expect(readiness.checks['read models']).to.deep.include({ ok: false });
    expect(readiness.checks['read models']!.detail).to.match(/not built yet: .*runs/);

    // A process with the projectors role builds them; the HTTP process then serves.
    projectors = await startService(loadConfig({ ...serviceEnv(http.config), PORT: '0', HOST: '127.0.0.1', ROLES: 'projectors' }), createLogger('silent'));
    await eventually(async () => expect((await fetch(`${http.baseUrl}/readyz`)).status).to.equal(200), 20_000);
    const infra = http.service.infrastructure;
    const workspaceId = (await createWorkspace(infra, 'w')).value.id;
    const [key, accountId] = await Promise.all([
      issueKey(infra, workspaceId, 'write', 'k').then((issued) => issued.value.key),
      createAccount(infra, workspaceId, 'a', 'none').then((account) => account.value.id),
    ]);
    const queued = await http.request('POST', '/api/v1/runs', { key, body: { brief: 'find waste', project_id: accountId } });
    expect(queued.status, await queued.text()).to.equal(202);
  });
});
