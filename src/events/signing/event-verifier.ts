import { hash, verify } from 'node:crypto';
import type { EventEnvelope } from '../envelope.ts';
import { signedBytes } from './signed-bytes.ts';
import type { KnownPublicKey } from './signing-keys.ts';
import { UntrustedEventError } from './untrusted-event-error.ts';

/**
 * The authenticity hook readers call before believing an event (projectors, workers, the
 * key directory, `audit verify`). `seq` is the event's stream sequence: whether an unsigned
 * event is legacy depends on where it sits.
 */
export interface EventAuthenticityCheck {
  /** @throws UntrustedEventError */
  check(event: EventEnvelope, subject: string, seq: number): void;
}

/** From which stream sequence on every event must be signed, and by which key signing began. */
export interface SigningActivationPoint {
  readonly firstSignedSeq: number;
  readonly keyId: string;
}

export type Verdict = { readonly kind: 'signed'; readonly keyId: string } | { readonly kind: 'legacy'; readonly beforeKeyId: string | null };

const SIGNATURE = /^[A-Za-z0-9_-]{86}$/;

/** Verified signatures remembered per process: every projector and worker checks the same events. */
const VERIFIED_CACHE_SIZE = 20_000;

/**
 * Verifies Ed25519 signatures against the keys this process believes (current + retired).
 *
 * With an activation point, an unsigned event below it is legacy ("unsigned, before key X")
 * and one at or after it is untrusted. Without one (an offline audit of a log whose
 * activation record is missing), the first validly signed event seen becomes the
 * activation point — sound only for a read from the start of the stream, which is how
 * `audit verify` uses it.
 */
export class EventVerifier implements EventAuthenticityCheck {
  private readonly keys: ReadonlyMap<string, KnownPublicKey>;
  private activationPoint: SigningActivationPoint | null;
  /**
   * `key_id:signature` → SHA-256 of the bytes it verified over. A hit still recomputes the
   * canonical bytes and their digest (a copied signature on altered content misses), but
   * skips the Ed25519 verification, several times the cost.
   */
  private readonly verified = new Map<string, string>();
  private verifications = 0;

  constructor(keys: readonly KnownPublicKey[], activation: SigningActivationPoint | null) {
    this.keys = new Map(keys.map((k) => [k.keyId, k]));
    this.activationPoint = activation;
  }

  get activation(): SigningActivationPoint | null {
    return this.activationPoint;
  }

  knows(keyId: string): boolean {
    return this.keys.has(keyId);
  }

  /** Ed25519 verifications this verifier has run (the checks its cache could not answer). */
  get ed25519Verifications(): number {
    return this.verifications;
  }

  /**
   * Remembers a signature this process's own signer just made as verified, so its readers
   * (the run follower, projectors and workers of the same process) check the event with a
   * digest instead of an Ed25519 verification, which costs several times the append's own
   * signing. Sound because a key id is derived from its public key (keyIdOf): a verifier that
   * knows the signer's id holds the very key that verifies the signature. A key it does not
   * know is not remembered, so such events are refused as before.
   */
  rememberSignedHere(keyId: string, signature: string, bytes: Buffer): void {
    if (this.keys.has(keyId)) this.remember(`${keyId}:${signature}`, hash('sha256', bytes, 'base64'));
  }

  check(event: EventEnvelope, subject: string, seq: number): void {
    this.verdict(event, subject, seq);
  }

  /**
   * A batch reader may believe this event through a later, verified event's hash chain
   * (EventAdmission.tryAdmitBatch) only where a full check would have verified a signature
   * by a key this process knows; legacy and malformed events are always checked in full,
   * and without an activation point (an offline audit) nothing is vouched for.
   */
  canVouchFor(event: EventEnvelope, seq: number): boolean {
    const activation = this.activationPoint;
    if (activation === null || seq < activation.firstSignedSeq) return false;
    const { key_id: keyId, signature } = event as { key_id?: unknown; signature?: unknown };
    return typeof keyId === 'string' && this.keys.has(keyId) && typeof signature === 'string' && SIGNATURE.test(signature);
  }

  /**
   * What this verifier believes, as a digest of its key ids and activation point: a verdict
   * recorded under one fingerprint holds for another verifier with the same one. Null
   * without an activation point, whose verdicts depend on what was read before.
   */
  fingerprint(): string | null {
    const activation = this.activationPoint;
    if (activation === null) return null;
    const keyIds = [...this.keys.keys()].sort();
    return hash('sha256', JSON.stringify({ keyIds, firstSignedSeq: activation.firstSignedSeq, activationKeyId: activation.keyId }), 'hex');
  }

  /** Whether `signature` over `bytes` (a record with its own context, not an event) verifies with the known key `keyId`. */
  verifyRecord(keyId: string, bytes: Buffer, signature: string): boolean {
    const known = this.keys.get(keyId);
    if (!known || !SIGNATURE.test(signature)) return false;
    this.verifications++;
    try {
      return verify(null, bytes, known.publicKey, Buffer.from(signature, 'base64url'));
    } catch {
      return false;
    }
  }

  /** Like check, and says whether the event was signed or accepted as legacy. @throws UntrustedEventError */
  verdict(event: EventEnvelope, subject: string, seq: number): Verdict {
    const { key_id: keyId, signature } = event as { key_id?: unknown; signature?: unknown };
    if (keyId === undefined && signature === undefined) {
      const activation = this.activationPoint;
      if (activation === null || seq < activation.firstSignedSeq) return { kind: 'legacy', beforeKeyId: activation?.keyId ?? null };
      throw new UntrustedEventError('unsigned', seq, subject, `event is unsigned, but every event from sequence ${activation.firstSignedSeq} on must be signed (signing began with key ${activation.keyId})`);
    }
    if (typeof keyId !== 'string' || typeof signature !== 'string' || !SIGNATURE.test(signature)) {
      throw new UntrustedEventError('bad-signature', seq, subject, 'key_id or signature is malformed');
    }
    const known = this.keys.get(keyId);
    if (!known) throw new UntrustedEventError('unknown-key', seq, subject, `signed by key ${JSON.stringify(keyId.slice(0, 64))}, which is not a known key`);
    let bytes: Buffer;
    try {
      bytes = signedBytes(event);
    } catch {
      throw new UntrustedEventError('bad-signature', seq, subject, 'the event cannot be canonicalized');
    }
    const cacheKey = `${keyId}:${signature}`;
    const digest = hash('sha256', bytes, 'base64');
    let valid = this.verified.get(cacheKey) === digest;
    if (!valid) {
      this.verifications++;
      try {
        valid = verify(null, bytes, known.publicKey, Buffer.from(signature, 'base64url'));
      } catch {
        valid = false;
      }
      if (valid) this.remember(cacheKey, digest);
    }
    if (!valid) throw new UntrustedEventError('bad-signature', seq, subject, `the signature does not verify with key ${keyId}: the event was altered or forged`);
    this.activationPoint ??= { firstSignedSeq: seq, keyId };
    return { kind: 'signed', keyId };
  }

  private remember(key: string, digest: string): void {
    if (this.verified.size >= VERIFIED_CACHE_SIZE) this.verified.delete(this.verified.keys().next().value!);
    this.verified.set(key, digest);
  }
}
