import { createHash, type Hash } from 'node:crypto';
import { canonicalJson } from '../canonical-json.ts';
import { bytesOf, type InadmissibleCode, type RawEventMessage } from '../event-admission.ts';

/**
 * Stream sequences per sealed block: block k holds sequences k·SEAL_BLOCK + 1 … (k + 1)·SEAL_BLOCK.
 * Fixed, so every process cuts the stream the same way and a seal written by one is found by all.
 */
export const SEAL_BLOCK = 500;

/** A block with more refusals than this is not sealed: a flood of forged events is admitted in full each time, never stored. */
export const MAX_SEALED_REFUSALS = 50;

/** What a refusal's reason may take in a seal (admission's reasons are far shorter; a forged payload must not grow the table). */
export const MAX_SEALED_DETAIL = 500;

/** An event of a sealed block that admission refused, with why. */
export interface SealedRefusal {
  readonly seq: number;
  readonly code: InadmissibleCode;
  readonly detail: string;
}

/**
 * A signed statement by the service: "the messages at these stream sequences, whose bytes and
 * subjects hash to `digest`, were admitted under the rules `rules`, and admission refused
 * exactly these". A reader that finds a seal whose signature verifies with a key it believes,
 * whose rules are its own and whose digest matches the messages it read, takes those verdicts
 * instead of admitting each event again (docs/events.md, "Admission seals").
 */
export interface AdmissionSeal {
  readonly stream: string;
  readonly firstSeq: number;
  readonly lastSeq: number;
  /** SHA-256 (base64) over the block's messages, see {@link BlockDigest}. */
  readonly digest: string;
  /** The admitting process's rules fingerprint (EventAdmission.rulesFingerprint). */
  readonly rules: string;
  readonly refused: readonly SealedRefusal[];
  readonly keyId: string;
  readonly signature: string;
}

/**
 * Domain separation: an event's signed bytes are canonical JSON and begin with `{`, a seal's
 * begin with this line, so no signature can be carried from one kind of record to the other.
 */
const SEAL_CONTEXT = 'adsagent admission seal v1\n';

/** What a seal's signature covers: the context line, then the canonical JSON of every field but the signature. */
export function sealSignedBytes(seal: Omit<AdmissionSeal, 'signature'>): Buffer {
  const { stream, firstSeq, lastSeq, digest, rules, refused, keyId } = seal;
  const body = canonicalJson({ stream, first_seq: firstSeq, last_seq: lastSeq, digest, rules, refused, key_id: keyId });
  if (body === undefined) throw new TypeError('admission seal cannot be canonicalized');
  return Buffer.from(SEAL_CONTEXT + body, 'utf8');
}

/** The block a stream sequence falls in, as its first and last sequence. */
export function blockOf(seq: number, blockSize = SEAL_BLOCK): { readonly firstSeq: number; readonly lastSeq: number } {
  const firstSeq = Math.floor((seq - 1) / blockSize) * blockSize + 1;
  return { firstSeq, lastSeq: firstSeq + blockSize - 1 };
}

/**
 * SHA-256 over a run of consecutive messages: the bytes of every message, in order, hashed as
 * they come, and a line per message with its sequence, subject and byte length. The lengths
 * make the framing unambiguous, so no two different runs of messages give the same digest;
 * keeping the lines apart costs one hash update per message instead of two.
 *
 * @example
 * const digest = new BlockDigest();
 * for (const message of block) digest.add(message);
 * digest.finish(); // base64
 */
export class BlockDigest {
  private readonly bytes: Hash = createHash('sha256');
  private lines = '';

  add(message: RawEventMessage): void {
    const bytes = bytesOf(message);
    this.bytes.update(bytes);
    this.lines += `${message.seq} ${message.subject} ${bytes.byteLength}\n`;
  }

  finish(): string {
    return createHash('sha256').update(this.lines).update(this.bytes.digest()).digest('base64');
  }
}
