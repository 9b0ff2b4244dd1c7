import { randomBytes } from 'node:crypto';
import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { expect } from 'chai';
import { ConfigError } from '../../src/config/config.ts';
import { createLogger } from '../../src/log/logger.ts';
import { CredentialStore } from '../../src/platform/credentials/credential-store.ts';
import { startService } from '../../src/runtime/service.ts';
import { runCli } from '../support/cli.ts';
import { FakeGoogleAds } from '../support/fake-google-ads/fake-google-ads-server.ts';
import { startTestService, type TestService } from '../support/test-service.ts';
import { loadAccount } from '../../commands/queries.ts';

/** Every raw message of the test's stream, as one string to grep. */
async function wholeEventLog(svc: TestService): Promise<string> {
  const { store } = svc.service.infrastructure;
  const parts: string[] = [];
  for (let seq = 1; seq <= (await store.lastSequence()); seq++) {
    const raw = await store.rawAt(seq);
    if (raw) parts.push(Buffer.from(raw.data).toString('utf8'));
  }
  return parts.join('\n');
}

describe('adsagent account create --platform google-ads', function () {
  this.timeout(120_000);
  const credentialsKey = randomBytes(32);
  const fake = new FakeGoogleAds();
  let svc: TestService;
  let env: Record<string, string>;
  let workspaceId: string;
  const dir = mkdtempSync(join(tmpdir(), 'gads-cli-'));
  const tokenFile = (token: string) => {
    const path = join(dir, `${randomBytes(4).toString('hex')}.txt`);
    writeFileSync(path, `${token}\n`);
    return path;
  };

  before(async () => {
    await fake.start();
    env = { ...fake.env(), CREDENTIALS_KEY: credentialsKey.toString('base64') };
    svc = await startTestService('gadscli', { ROLES: 'http,projectors', ...env });
    const created = await runCli(svc.config, ['workspace', 'create', '--name', 'Agency', '--json']);
    workspaceId = JSON.parse(created.stdout).id;
  });
  after(async () => {
    await svc?.stop();
    await fake.stop();
  });

  const create = (args: string[], extra: Record<string, string> = env) =>
    runCli(svc.config, ['account', 'create', '--workspace', workspaceId, '--name', 'Acme Ads', '--platform', 'google-ads', ...args, '--json'], 60_000, extra);

  it('checks the refresh token at the token endpoint, stores it encrypted, and records only the customer ids', async () => {
    const refreshToken = fake.issueRefreshToken();
    const exchangesBefore = fake.tokenExchanges;
    const result = await create(['--customer-id', '123-456-7890', '--login-customer-id', '1112223333', '--refresh-token-file', tokenFile(refreshToken)]);
    expect(result.code, result.stderr).to.equal(0);
    const { id } = JSON.parse(result.stdout) as { id: string };
    expect(fake.tokenExchanges).to.equal(exchangesBefore + 1);

    const event = (await loadAccount(svc.service.infrastructure.aggregates, workspaceId, id)).state;
    expect(event).to.include({ platform: 'google-ads', sandboxSeed: null });
    expect(event.googleAds).to.deep.equal({ customer_id: '1234567890', login_customer_id: '1112223333' });

    const db = svc.service.infrastructure.database.db;
    const row = await db.selectFrom('platform_credentials').selectAll().where('account_id', '=', id).executeTakeFirstOrThrow();
    expect(Buffer.concat([row.iv, row.ciphertext, row.auth_tag]).toString('latin1')).not.to.include(refreshToken);
    expect(await new CredentialStore(db, credentialsKey).get(id)).to.equal(refreshToken);

    const accounts = await runCli(svc.config, ['events', 'tail'], 60_000, env);
    expect(accounts.stdout).to.include(id).and.include('1234567890');
    expect(await wholeEventLog(svc)).not.to.include(refreshToken);
    expect(result.stdout + result.stderr + accounts.stderr).not.to.include(refreshToken);
  });

  it('refuses a customer already connected, in this workspace or another, naming its account: exit 1, before calling Google, nothing recorded', async () => {
    const other = JSON.parse((await runCli(svc.config, ['workspace', 'create', '--name', 'Second agency', '--json'])).stdout).id as string;
    const before = await svc.service.infrastructure.store.lastSequence();
    const exchanges = fake.tokenExchanges;
    for (const [workspace, customer] of [[workspaceId, '1234567890'], [other, '123-456-7890']]) {
      const result = await runCli(
        svc.config,
        ['account', 'create', '--workspace', workspace!, '--name', 'Acme again', '--platform', 'google-ads', '--customer-id', customer!, '--refresh-token-file', tokenFile(fake.issueRefreshToken())],
        60_000,
        env,
      );
      expect(result.code, result.stderr).to.equal(1);
      expect(result.stderr).to.match(/Google Ads customer 1234567890 is already connected as account [0-9a-f-]{36} \(workspace [0-9a-f-]{36}\)/).and.include('adsagent account reconnect');
    }
    expect(fake.tokenExchanges).to.equal(exchanges);
    expect(await svc.service.infrastructure.store.lastSequence()).to.equal(before);
  });

  it('of two creations of one new customer at once, exactly one connects it; the other names that account', async () => {
    const results = await Promise.all(
      [1, 2].map(() =>
        runCli(
          svc.config,
          ['account', 'create', '--workspace', workspaceId, '--name', 'Raced', '--platform', 'google-ads', '--customer-id', '6234567890', '--refresh-token-file', tokenFile(fake.issueRefreshToken()), '--json'],
          60_000,
          env,
        ),
      ),
    );
    expect(results.map((r) => r.code).sort()).to.deep.equal([0, 1]);
    const created = JSON.parse(results.find((r) => r.code === 0)!.stdout).id as string;
    expect(results.find((r) => r.code === 1)!.stderr).to.include(`Google Ads customer 6234567890 is already connected as account ${created}`);
  });

  it('refuses to connect while the accounts read model is behind (projectors stopped): it cannot tell, exit 1, nothing recorded', async () => {
    const projector = svc.service.projectorCopy!.projector!;
    await projector.stop();
    try {
      // Something the identity projection has not applied yet.
      await runCli(svc.config, ['workspace', 'create', '--name', 'Unseen', '--json']);
      const before = await svc.service.infrastructure.store.lastSequence();
      const result = await create(['--customer-id', '7234567890', '--refresh-token-file', tokenFile(fake.issueRefreshToken())]);
      expect(result.code, result.stderr).to.equal(1);
      expect(result.stderr).to.include('cannot tell whether Google Ads customer 7234567890 is connected already');
      expect(await svc.service.infrastructure.store.lastSequence()).to.equal(before);
    } finally {
      await projector.start();
    }
  });

  it('once a Google Ads account exists, a service without CREDENTIALS_KEY refuses to start, saying why', async () => {
    const error = await startService({ ...svc.config, credentialsKey: undefined, roles: ['projectors'] }, createLogger('silent')).catch((e: unknown) => e as ConfigError);
    expect(error).to.be.instanceOf(ConfigError);
    expect((error as ConfigError).problems.join()).to.match(/CREDENTIALS_KEY is required: \d+ Google Ads account\(s\)/);
  });

  it('reconnects an account with a new refresh token, checked first; the old one is replaced', async () => {
    const first = fake.issueRefreshToken();
    const created = await create(['--customer-id', '2234567890', '--refresh-token-file', tokenFile(first)]);
    const { id } = JSON.parse(created.stdout) as { id: string };
    fake.revokeRefreshToken(first);
    const refused = await runCli(svc.config, ['account', 'reconnect', id, '--refresh-token-file', tokenFile(first)], 60_000, env);
    expect(refused.code).to.equal(1);
    expect(refused.stderr).to.include('invalid_grant');
    const second = fake.issueRefreshToken();
    const reconnected = await runCli(svc.config, ['account', 'reconnect', id, '--refresh-token-file', tokenFile(second), '--json'], 60_000, env);
    expect(reconnected.code, reconnected.stderr).to.equal(0);
    expect(JSON.parse(reconnected.stdout)).to.deep.equal({ id, reconnected: true });
    expect(await new CredentialStore(svc.service.infrastructure.database.db, credentialsKey).get(id)).to.equal(second);
  });

  it('refuses a refresh token Google refuses: exit 1, the reason, and nothing recorded', async () => {
    const before = await svc.service.infrastructure.store.lastSequence();
    const result = await create(['--customer-id', '3234567890', '--refresh-token-file', tokenFile('1//not-a-token-google-knows')]);
    expect(result.code).to.equal(1);
    expect(result.stderr).to.include('Google refused the refresh token').and.include('invalid_grant').and.not.include('not-a-token-google-knows');
    expect(await svc.service.infrastructure.store.lastSequence()).to.equal(before);
  });

  it('a creation refused after the token was checked (a name too long for its event) leaves no stored token behind, exit 2', async () => {
    const db = svc.service.infrastructure.database.db;
    const stored = async () => (await db.selectFrom('platform_credentials').select('account_id').execute()).length;
    const before = await stored();
    const result = await runCli(
      svc.config,
      ['account', 'create', '--workspace', workspaceId, '--name', 'n'.repeat(300), '--platform', 'google-ads', '--customer-id', '4234567890', '--refresh-token-file', tokenFile(fake.issueRefreshToken())],
      60_000,
      env,
    );
    expect(result.code, result.stderr).to.equal(2);
    expect(result.stderr).to.include('/data/name');
    // No token without an account: else every start would demand CREDENTIALS_KEY for an account that does not exist.
    expect(await stored()).to.equal(before);
  });

  it('refuses a malformed customer id, a missing token file and a missing CREDENTIALS_KEY before calling Google', async () => {
    const exchanges = fake.tokenExchanges;
    const token = tokenFile(fake.issueRefreshToken());
    const badId = await create(['--customer-id', '12-34', '--refresh-token-file', token]);
    expect(badId.code).to.equal(1);
    expect(badId.stderr).to.include('--customer-id must be a Google Ads customer id');
    const noFile = await create(['--customer-id', '5234567890', '--refresh-token-file', join(dir, 'missing.txt')]);
    expect(noFile.code).to.equal(2);
    expect(noFile.stderr).to.include('cannot be read (ENOENT)');
    const { CREDENTIALS_KEY: _omitted, ...withoutKey } = env;
    const noKey = await create(['--customer-id', '5234567890', '--refresh-token-file', token], { ...withoutKey, CREDENTIALS_KEY: '' });
    expect(noKey.code).to.equal(1);
    expect(noKey.stderr).to.include('CREDENTIALS_KEY is not set');
    expect(fake.tokenExchanges).to.equal(exchanges);
  });
});
