import { createPublicKey, hkdfSync, sign, type KeyObject } from 'node:crypto';
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

  /**
   * A secret key for `purpose`, derived from the private key (HKDF-SHA256): for records only
   * the service's own processes write and read back (aggregate snapshots), authenticated with
   * an HMAC at a fraction of a signature's cost. Anyone without the private key, a holder of
   * the NATS password among them, cannot make one that verifies.
   */
  deriveKey(purpose: string): Buffer {
    const seed = Buffer.from(String(this.privateKey.export({ format: 'jwk' }).d), 'base64url');
    return Buffer.from(hkdfSync('sha256', seed, Buffer.alloc(0), `adsagent ${purpose}`, 32));
  }

  /** Tells `listener` of every signature made from now on, with the bytes it covers. */
  onSigned(listener: (signature: string, bytes: Buffer) => void): void {
    this.signedListeners.push(listener);
  }
}
