import { expect } from 'chai';
import { runCli } from '../support/cli.ts';
import { startTestService, type TestService } from '../support/test-service.ts';

describe('adsagent operator CLI (against a running service)', function () {
  this.timeout(120_000);
  let svc: TestService;

  before(async () => {
    svc = await startTestService('operatorcli', { ROLES: 'http,projectors' });
  });
  after(async () => svc?.stop());

  const json = async (args: string[]) => {
    const result = await runCli(svc.config, [...args, '--json']);
    expect(result.code, result.stderr).to.equal(0);
    return JSON.parse(result.stdout) as Record<string, any>;
  };

  it('creates a workspace, accounts and keys whose keys work at once, and revokes a key at once', async () => {
    const workspace = await json(['workspace', 'create', '--name', 'Acme']);
    expect(workspace.id).to.be.a('string');
    const sandbox = await json(['account', 'create', '--workspace', workspace.id, '--name', 'Shop', '--platform', 'sandbox']);
    const offline = await json(['account', 'create', '--workspace', workspace.id, '--name', 'Offline', '--platform', 'none']);
    const key = await json(['key', 'create', '--workspace', workspace.id, '--scope', 'write', '--name', 'ci']);
    expect(key.key).to.match(/^ak_[0-9a-f]{32}_[A-Za-z0-9_-]{43}$/);

    const accounts = await svc.request('GET', '/api/v1/accounts', { key: key.key });
    expect(accounts.status).to.equal(200);
    const listed = ((await accounts.json()) as { data: { id: string; connected: boolean }[] }).data;
    expect(listed.map((a) => [a.id, a.connected])).to.deep.equal([
      [sandbox.id, true],
      [offline.id, false],
    ]);

    const revoked = await json(['key', 'revoke', key.id]);
    expect(revoked).to.include({ id: key.id, revoked: true });
    expect((await svc.request('GET', '/api/v1/accounts', { key: key.key })).status).to.equal(401);
  });

  it('stores only a hash of a key: the key never appears in the event log or the database', async () => {
    const workspace = await json(['workspace', 'create', '--name', 'Hashes']);
    const key = await json(['key', 'create', '--workspace', workspace.id, '--scope', 'read']);
    const secret = key.key.split('_').slice(2).join('_');
    const tail = await runCli(svc.config, ['events', 'tail']);
    expect(tail.stdout).to.include(key.id).and.not.include(secret);
    const rows = await svc.service.infrastructure.database.db.selectFrom('api_keys').selectAll().where('id', '=', key.id).execute();
    expect(JSON.stringify(rows)).not.to.include(secret);
  });

  it('engages and releases a kill switch', async () => {
    const workspace = await json(['workspace', 'create', '--name', 'Switch']);
    expect(await json(['killswitch', 'on', '--workspace', workspace.id, '--reason', 'incident'])).to.include({ engaged: true });
    expect(await json(['killswitch', 'off', '--workspace', workspace.id])).to.include({ engaged: false });
  });

  // The demo (a real run, then curls that are run) has its own file: demo.test.ts.

  it('refuses bad usage with exit 2 and unknown ids with exit 1', async () => {
    expect((await runCli(svc.config, ['key', 'create', '--workspace', 'x', '--scope', 'superuser'])).code).to.equal(2);
    expect((await runCli(svc.config, ['frobnicate'])).code).to.equal(2);
    const missing = await runCli(svc.config, ['account', 'create', '--workspace', '00000000-0000-4000-8000-000000000000', '--name', 'n']);
    expect(missing.code).to.equal(1);
    expect(missing.stderr).to.include('Workspace not found');
  });
});
