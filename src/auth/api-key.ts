import { createHash, randomBytes, timingSafeEqual } from 'node:crypto';
import { v4 as uuidv4 } from 'uuid';

/**
 * API keys look like `ak_<key id, 32 hex>_<secret, 43 base64url chars>`. The key id is
 * public (it appears in events and logs); only a SHA-256 of the secret is stored. The
 * secret carries 256 bits, so a plain hash is enough (no password stretching needed).
 */
const KEY_PATTERN = /^ak_([0-9a-f]{32})_([A-Za-z0-9_-]{43})$/;

export interface GeneratedApiKey {
  readonly keyId: string;
  /** The full key; shown once, never stored. */
  readonly key: string;
  readonly secretHash: string;
}

export function generateApiKey(): GeneratedApiKey {
  const keyId = uuidv4();
  const secret = randomBytes(32).toString('base64url');
  return { keyId, key: `ak_${keyId.replaceAll('-', '')}_${secret}`, secretHash: hashSecret(secret) };
}

export function parseApiKey(key: string): { keyId: string; secret: string } | null {
  const match = KEY_PATTERN.exec(key);
  if (!match) return null;
  const hex = match[1]!;
  const keyId = `${hex.slice(0, 8)}-${hex.slice(8, 12)}-${hex.slice(12, 16)}-${hex.slice(16, 20)}-${hex.slice(20)}`;
  return { keyId, secret: match[2]! };
}

export function hashSecret(secret: string): string {
  return createHash('sha256').update(secret).digest('hex');
}

/** Constant-time comparison of a presented secret with a stored hash. */
export function secretMatches(secret: string, storedHash: string): boolean {
  const presented = Buffer.from(hashSecret(secret), 'hex');
  const stored = Buffer.from(storedHash, 'hex');
  return presented.length === stored.length && timingSafeEqual(presented, stored);
}
