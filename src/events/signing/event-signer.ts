import { createPublicKey, sign, type KeyObject } from 'node:crypto';
import { keyIdOf } from './signing-keys.ts';

/** Signs bytes with the process's Ed25519 private key; the store calls it for every append. */
export class EventSigner {
  readonly keyId: string;
  readonly publicKey: KeyObject;

  private readonly privateKey: KeyObject;
  private readonly signedListeners: ((signature: string, bytes: Buffer) => void)[] = [];

  constructor(privateKey: KeyObject) {
    this.privateKey = privateKey;
    this.publicKey = createPublicKey(privateKey);
    this.keyId = keyIdOf(this.publicKey);
  }

  /** Ed25519 (pure, no prehash) signature as unpadded base64url: 86 characters. */
  sign(bytes: Buffer): string {
    const signature = sign(null, bytes, this.privateKey).toString('base64url');
    for (const listener of this.signedListeners) listener(signature, bytes);
    return signature;
  }

  /**
   * Signs a record that is not an event (an admission seal): the same key, but no listener
   * is told, since those remember event signatures. The record's bytes must carry their own
   * context (see sealSignedBytes) so its signature can never pass for an event's.
   */
  signRecord(bytes: Buffer): string {
    return sign(null, bytes, this.privateKey).toString('base64url');
  }

  /** Tells `listener` of every signature made from now on, with the bytes it covers. */
  onSigned(listener: (signature: string, bytes: Buffer) => void): void {
    this.signedListeners.push(listener);
  }
}
