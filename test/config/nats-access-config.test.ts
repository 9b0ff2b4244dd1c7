import { expect } from 'chai';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { ConfigError, loadConfig } from '../../src/config/config.ts';
import { inboxPrefixOf } from '../../src/event-store/nats-connection.ts';
import { redactUrls, redactUrlValue } from '../../src/log/redact-url.ts';

describe('NATS access configuration', () => {
  let dir: string;
  let ca: string;
  let creds: string;

  before(() => {
    dir = mkdtempSync(join(tmpdir(), 'nats-access-config-'));
    ca = join(dir, 'ca.pem');
    writeFileSync(ca, '-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----\n');
    creds = join(dir, 'user.creds');
    writeFileSync(creds, '-----BEGIN NATS USER JWT-----\neyJ0\n------END NATS USER JWT------\n\n-----BEGIN USER NKEY SEED-----\nSUAM\n------END USER NKEY SEED------\n');
  });

  after(() => rmSync(dir, { recursive: true, force: true }));

  const problemsOf = (env: Record<string, string>): string[] => {
    try {
      loadConfig(env);
      return [];
    } catch (error) {
      if (error instanceof ConfigError) return [...error.problems];
      throw error;
    }
  };

  it('takes a user and password, a token or a creds file, and a CA', () => {
    expect(loadConfig({ NATS_USER: 'ads-service', NATS_PASSWORD: 'pw', NATS_TLS_CA: ca })).to.include({ natsTlsCa: ca });
    expect(loadConfig({ NATS_USER: 'ads-service', NATS_PASSWORD: 'pw' }).natsCredentials).to.deep.equal({ kind: 'user-password', user: 'ads-service', password: 'pw' });
    expect(loadConfig({ NATS_TOKEN: 't' }).natsCredentials).to.deep.equal({ kind: 'token', token: 't' });
    expect(loadConfig({ NATS_CREDS: creds }).natsCredentials).to.deep.equal({ kind: 'creds-file', path: creds });
    expect(loadConfig({}).natsCredentials).to.deep.equal({ kind: 'none' });
  });

  it('refuses half a login, two ways to log in, credentials in the URL as well, and files that are not what they claim', () => {
    expect(problemsOf({ NATS_PASSWORD: 'pw' })).to.deep.equal(['NATS_PASSWORD is set but NATS_USER is not']);
    expect(problemsOf({ NATS_TOKEN: 't', NATS_CREDS: creds })).to.deep.equal(['set only one way to authenticate to NATS, got NATS_TOKEN and NATS_CREDS']);
    expect(problemsOf({ NATS_URL: 'nats://u:p@h:4222', NATS_TOKEN: 't' })[0]).to.include('NATS_URL carries credentials');
    expect(problemsOf({ NATS_CREDS: ca })[0]).to.include('is not a NATS credentials file');
    expect(problemsOf({ NATS_TLS_CA: creds })[0]).to.include('is not a PEM certificate');
  });

  it('never quotes a password or token in a problem', () => {
    const problems = problemsOf({ NATS_URL: 'http://u:secret-1@h', NATS_TOKEN: 'secret-2', NATS_CREDS: creds, DATABASE_URL: 'mysql://u:secret-3@h/db' });
    expect(problems).to.have.length(4);
    expect(problems.join('\n')).not.to.match(/secret-/);
  });

  it('redacts the secret part of URLs, lists of URLs and messages', () => {
    expect(redactUrls('nats://ads-service:pw@nats-1:4222,nats://ads-service:pw@nats-2:4223')).to.equal('nats://ads-service:***@nats-1:4222,nats://ads-service:***@nats-2:4223');
    expect(redactUrls('cannot reach NATS at tls://s3cret-token@host:4222 (refused)')).to.equal('cannot reach NATS at tls://***@host:4222 (refused)');
    expect(redactUrls('postgres://postgres@127.0.0.1:5432/adsagent')).to.equal('postgres://postgres@127.0.0.1:5432/adsagent');
    expect(redactUrls('postgres://app:p%40ss@db/x')).to.equal('postgres://app:***@db/x');
  });

  it('never echoes a password that makes its URL invalid (an unencoded # / ? @ or space), and says to percent-encode it', () => {
    // Each password, and a piece of it that a cut at its odd character would have left.
    for (const [name, url, secret, piece] of [
      ['DATABASE_URL', 'postgres://postgres:Xy#9secret@127.0.0.1:5432/adsagent', 'Xy#9secret', '9secret'],
      ['DATABASE_URL', 'postgres://app:p@zz w/qd@db:5432/x', 'p@zz w/qd', 'zz w'],
      ['NATS_URL', 'nats://svc:Pa/zz?qxd@127.0.0.1:4222', 'Pa/zz?qxd', 'zz?qxd'],
    ] as const) {
      const problems = problemsOf({ [name]: url }).join('\n');
      expect(problems, url).to.include(`${name} is not a URL`).and.include('percent-encoded');
      expect(problems, url).to.not.include(secret).and.not.include(piece);
    }
    expect(redactUrlValue('postgres://postgres:Xy#9secret@127.0.0.1:5432/adsagent')).to.equal('postgres://postgres:***@127.0.0.1:5432/adsagent');
    expect(redactUrlValue('nats://t0k#en@host:4222')).to.equal('nats://***@host:4222');
    expect(redactUrlValue('postgres://postgres@127.0.0.1/db')).to.equal('postgres://postgres@127.0.0.1/db');
  });

  it('asks for replies at _INBOX.<user>, which auth.conf lets only that user read', () => {
    expect(inboxPrefixOf({ kind: 'user-password', user: 'analytics', password: 'x' })).to.equal('_INBOX.analytics');
    expect(inboxPrefixOf({ kind: 'user-password', user: 'odd.user*', password: 'x' })).to.equal('_INBOX');
    expect(inboxPrefixOf({ kind: 'token', token: 't' })).to.equal('_INBOX');
  });
});
