import { publicKeyPem, rawPublicKey, SIGNING_ALGORITHM, type KnownPublicKey } from './signing-keys.ts';

/** One entry of `GET /api/v1/event-signing-keys` and `adsagent keys export-public --json`. */
export interface PublicKeyDescription {
  readonly key_id: string;
  readonly algorithm: typeof SIGNING_ALGORITHM;
  readonly status: 'current' | 'retired';
  /** When this key first signed on this stream; null when that was not recorded (a key retired before records existed). */
  readonly activated_at: string | null;
  readonly public_key_pem: string;
  /** RFC 8037 OKP JWK. */
  readonly public_key_jwk: { readonly kty: 'OKP'; readonly crv: 'Ed25519'; readonly x: string; readonly kid: string; readonly use: 'sig'; readonly alg: 'EdDSA' };
}

export function describePublicKeys(keys: readonly KnownPublicKey[], activatedAt: ReadonlyMap<string, string>): PublicKeyDescription[] {
  return keys.map((key) => ({
    key_id: key.keyId,
    algorithm: SIGNING_ALGORITHM,
    status: key.status,
    activated_at: activatedAt.get(key.keyId) ?? null,
    public_key_pem: publicKeyPem(key.publicKey),
    public_key_jwk: { kty: 'OKP', crv: 'Ed25519', x: rawPublicKey(key.publicKey).toString('base64url'), kid: key.keyId, use: 'sig', alg: 'EdDSA' },
  }));
}
