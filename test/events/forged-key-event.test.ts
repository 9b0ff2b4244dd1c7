import { expect } from 'chai';
import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { readCheckpoint } from '../../projections/runtime/checkpoints.ts';
import { runCli } from '../support/cli.ts';
import { eventually } from '../support/eventually.ts';
import { forgeAdminKey } from '../support/forged-events.ts';
import { startRun, waitForTerminalRun } from '../support/runs.ts';
import { startTestService, type TestService, type TestTenant } from '../support/test-service.ts';

/**
 * End to end, issue #9: whoever can publish to the event subjects but does not hold the
 * signing key cannot mint an API key. Needs readers that check signatures and park what
 * fails (the projector quarantine and the EventVerifier wired into it).
 */
describe('a forged ApiKeyIssued published straight to NATS', function () {
  this.timeout(120_000);
  let svc: TestService;
  let tenant: TestTenant;

  before(async () => {
    svc = await startTestService('forgedkey');
    tenant = await svc.tenant();
  });
  after(async () => svc?.stop());

  it('gives a key that answers 401, is named by audit verify --public-key, and the service keeps serving', async () => {
    const infra = svc.service.infrastructure;
    const forged = await forgeAdminKey(infra, tenant.workspaceId);
    // The identity projector has passed the forged event (believed or parked).
    await eventually(async () => {
      expect((await readCheckpoint(infra.database.db, 'identity'))!.lastSeq).to.be.at.least(forged.seq);
    }, 20_000);

    const withForgedKey = await svc.request('GET', '/api/v1/accounts', { key: forged.key });
    expect(withForgedKey.status, 'the forged admin key must not authenticate').to.equal(401);
    const killSwitch = await svc.request('POST', '/api/v1/workspace/kill-switch/engage', { key: forged.key, body: { reason: 'pwned' } });
    expect(killSwitch.status).to.equal(401);

    const file = join(mkdtempSync(join(tmpdir(), 'adsagent-forged-')), 'keys.pem');
    writeFileSync(file, (await runCli(svc.config, ['keys', 'export-public'])).stdout);
    const audit = await runCli(svc.config, ['audit', 'verify', '--public-key', file, '--json']);
    expect(audit.code).to.equal(1);
    expect(JSON.parse(audit.stdout).discrepancy).to.include({ kind: 'unsigned', seq: forged.seq });

    // The service keeps serving: ready, genuine keys work, a new run is projected and finishes.
    expect((await svc.request('GET', '/readyz')).status).to.equal(200);
    expect((await svc.request('GET', '/api/v1/accounts', { key: tenant.keys.read })).status).to.equal(200);
    const runId = await startRun(svc, tenant.keys.write, tenant.accounts.sandbox, 'Find wasted spend and add negative keywords');
    const run = await waitForTerminalRun(svc, tenant.keys.write, runId);
    expect(run.status).to.equal('succeeded');
  });
});
