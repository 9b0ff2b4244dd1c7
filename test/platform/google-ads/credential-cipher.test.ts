import { randomBytes } from 'node:crypto';
import { expect } from 'chai';
import { loadConfig } from '../../../src/config/config.ts';
import { CredentialDecryptError, openSecret, sealSecret } from '../../../src/platform/credentials/credential-cipher.ts';

describe('credential cipher (AES-256-GCM)', () => {
  const key = randomBytes(32);

  it('opens what it sealed, with a fresh IV each time and no plain text in the sealed bytes', () => {
    const first = sealSecret(key, 'acc-1', '1//refresh-token');
    const second = sealSecret(key, 'acc-1', '1//refresh-token');
    expect(openSecret(key, 'acc-1', first)).to.equal('1//refresh-token');
    expect(first.iv.equals(second.iv)).to.equal(false);
    expect(first.ciphertext.toString('latin1')).not.to.include('refresh');
  });

  it('refuses another key, another account and an altered row', () => {
    const sealed = sealSecret(key, 'acc-1', 'secret');
    expect(() => openSecret(randomBytes(32), 'acc-1', sealed)).to.throw(CredentialDecryptError);
    expect(() => openSecret(key, 'acc-2', sealed)).to.throw(CredentialDecryptError);
    const altered = { ...sealed, ciphertext: Buffer.from(sealed.ciphertext.map((b, i) => (i === 0 ? b ^ 1 : b))) };
    expect(() => openSecret(key, 'acc-1', altered)).to.throw(CredentialDecryptError);
  });

  it('CREDENTIALS_KEY must be base64 of exactly 32 bytes, and the error never quotes it', () => {
    expect(loadConfig({ CREDENTIALS_KEY: key.toString('base64') }).credentialsKey?.equals(key)).to.equal(true);
    expect(loadConfig({ CREDENTIALS_KEY: key.toString('base64url') }).credentialsKey?.equals(key)).to.equal(true);
    const short = randomBytes(16).toString('base64');
    expect(() => loadConfig({ CREDENTIALS_KEY: short }))
      .to.throw(/CREDENTIALS_KEY must be base64 of exactly 32 bytes/)
      .and.satisfy((error: Error) => !error.message.includes(short));
    expect(loadConfig({}).credentialsKey).to.equal(undefined);
  });
});
