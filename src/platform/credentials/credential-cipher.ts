import { createCipheriv, createDecipheriv, randomBytes } from 'node:crypto';

/** One secret sealed with AES-256-GCM: a fresh 12-byte IV per secret, the 16-byte tag proves it untouched. */
export interface SealedSecret {
  readonly iv: Buffer;
  readonly ciphertext: Buffer;
  readonly authTag: Buffer;
}

/** The stored secret cannot be opened: a different CREDENTIALS_KEY, or a row that was altered. */
export class CredentialDecryptError extends Error {
  constructor(accountId: string) {
    super(`the stored credential of account ${accountId} cannot be decrypted: CREDENTIALS_KEY differs from the key it was stored with, or the row was altered`);
    this.name = 'CredentialDecryptError';
  }
}

/**
 * The account id is the additional authenticated data, so a sealed row copied onto another
 * account fails to open instead of lending that account someone else's grant.
 */
export function sealSecret(key: Buffer, accountId: string, secret: string): SealedSecret {
  const iv = randomBytes(12);
  const cipher = createCipheriv('aes-256-gcm', key, iv);
  cipher.setAAD(Buffer.from(accountId, 'utf8'));
  const ciphertext = Buffer.concat([cipher.update(secret, 'utf8'), cipher.final()]);
  return { iv, ciphertext, authTag: cipher.getAuthTag() };
}

/** @throws CredentialDecryptError */
export function openSecret(key: Buffer, accountId: string, sealed: SealedSecret): string {
  try {
    const decipher = createDecipheriv('aes-256-gcm', key, sealed.iv);
    decipher.setAAD(Buffer.from(accountId, 'utf8'));
    decipher.setAuthTag(sealed.authTag);
    return Buffer.concat([decipher.update(sealed.ciphertext), decipher.final()]).toString('utf8');
  } catch {
    throw new CredentialDecryptError(accountId);
  }
}
