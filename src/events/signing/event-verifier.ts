import { hash, verify, type KeyObject } from 'node:crypto';
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
  /** verdictOffThread assumed an activation point whose signature then did not verify. */
  private assumedActivationFailed = false;

  /** How many verified signatures are remembered (0: none, and no digest is taken). */
  private readonly verifiedCacheSize: number;

  /**
   * @param options.rememberVerified whether verified signatures are remembered (default true):
   *   a reader that checks each event once (`audit verify`) gains nothing from it and pays a
   *   digest and an entry for every event.
   */
  constructor(keys: readonly KnownPublicKey[], activation: SigningActivationPoint | null, options: { readonly rememberVerified?: boolean } = {}) {
    this.keys = new Map(keys.map((k) => [k.keyId, k]));
    this.activationPoint = activation;
    this.verifiedCacheSize = options.rememberVerified === false ? 0 : VERIFIED_CACHE_SIZE;
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
    const claim = this.claimOf(event, subject, seq);
    if (claim.kind === 'legacy') return claim;
    let valid = claim.remembered;
    if (!valid) {
      this.verifications++;
      try {
        valid = verify(null, claim.bytes, claim.publicKey, Buffer.from(claim.signature, 'base64url'));
      } catch {
        valid = false;
      }
      if (valid) this.remember(claim.cacheKey, claim.digest);
    }
    if (!valid) throw forgedOrAltered(claim, seq, subject);
    this.activationPoint ??= { firstSignedSeq: seq, keyId: claim.keyId };
    return { kind: 'signed', keyId: claim.keyId };
  }

  /**
   * Like {@link verdict}, with the Ed25519 verification in libuv's thread pool, so that a
   * reader with many events to check (`audit verify`) checks several at once, on as many
   * cores as the pool has threads, while it reads on. What needs no verification (unsigned,
   * malformed, an unknown key) is decided at once, as a rejected promise.
   *
   * Without an activation point, the first signed event becomes it now, before its signature
   * is known to verify (and stops being it when the signature does not): meant for a reader
   * that settles the verdicts in stream order and stops at the first refusal, which then never
   * reaches an event judged on a forged activation.
   *
   * @example
   * const checks = events.map(({ event, subject, seq }) => verifier.verdictOffThread(event, subject, seq));
   * for (const check of checks) await check; // in stream order: the first rejection is the first untrusted event
   */
  verdictOffThread(event: EventEnvelope, subject: string, seq: number): Promise<Verdict> {
    let claim: SignatureClaim | LegacyVerdict;
    try {
      claim = this.claimOf(event, subject, seq);
    } catch (error) {
      return Promise.reject(error);
    }
    if (claim.kind === 'legacy') return Promise.resolve(claim);
    // Taken now, before the signature is known to verify; given back if it does not, so that a
    // forged first signature leaves no activation point (and no key) behind in the report.
    // Once an assumed one failed, none is assumed again: a later event's check, begun while the
    // reader had not yet settled the failure, would otherwise take the point once more.
    const assumed = this.activationPoint === null && !this.assumedActivationFailed ? { firstSignedSeq: seq, keyId: claim.keyId } : null;
    if (assumed) this.activationPoint = assumed;
    const signed: Verdict = { kind: 'signed', keyId: claim.keyId };
    if (claim.remembered) return Promise.resolve(signed);
    this.verifications++;
    const known = claim;
    return new Promise((resolve, reject) => {
      verify(null, known.bytes, known.publicKey, Buffer.from(known.signature, 'base64url'), (error, valid) => {
        if (error || !valid) {
          if (assumed && this.activationPoint === assumed) {
            this.activationPoint = null;
            this.assumedActivationFailed = true;
          }
          return reject(forgedOrAltered(known, seq, subject));
        }
        this.remember(known.cacheKey, known.digest);
        resolve(signed);
      });
    });
  }

  /**
   * Everything {@link verdict} decides before the Ed25519 verification: legacy, or refused
   * (unsigned after activation, malformed, an unknown key), or what is left to verify.
   * @throws UntrustedEventError
   */
  private claimOf(event: EventEnvelope, subject: string, seq: number): SignatureClaim | LegacyVerdict {
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
    const digest = this.verifiedCacheSize === 0 ? '' : hash('sha256', bytes, 'base64');
    return { kind: 'claim', keyId, publicKey: known.publicKey, signature, bytes, cacheKey, digest, remembered: digest !== '' && this.verified.get(cacheKey) === digest };
  }

  private remember(key: string, digest: string): void {
    if (this.verifiedCacheSize === 0) return;
    if (this.verified.size >= this.verifiedCacheSize) this.verified.delete(this.verified.keys().next().value!);
    this.verified.set(key, digest);
  }
}

type LegacyVerdict = Extract<Verdict, { kind: 'legacy' }>;

/** A signature by a known key over an event's bytes, not verified yet (or remembered as verified). */
interface SignatureClaim {
  readonly kind: 'claim';
  readonly keyId: string;
  readonly publicKey: KeyObject;
  readonly signature: string;
  readonly bytes: Buffer;
  /** Where a verification is remembered, and the digest of the bytes it verified. */
  readonly cacheKey: string;
  readonly digest: string;
  /** Verified before over these very bytes. */
  readonly remembered: boolean;
}

function forgedOrAltered(claim: SignatureClaim, seq: number, subject: string): UntrustedEventError {
  return new UntrustedEventError('bad-signature', seq, subject, `the signature does not verify with key ${claim.keyId}: the event was altered or forged`);
}
