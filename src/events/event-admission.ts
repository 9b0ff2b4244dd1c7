import { hash } from 'node:crypto';
import type { EventEnvelope } from './envelope.ts';
import { recomputeStoredEventHash } from './event-hash.ts';
import { eventValidator, EventTextError, jsonTextMayHoldHostileText, UnknownEventTypeError, type EventValidator } from './event-validator.ts';
import { NO_ACCOUNT_TOKEN, SUBJECT_VERSION } from '../event-store/subjects.ts';
import type { StoredEvent } from '../event-store/stored-event.ts';

/**
 * Why a stored message cannot be believed as an event: a closed set, recorded with every
 * quarantined event and printed by every reader that skips one.
 */
export const InadmissibleCode = {
  /** Not UTF-8, or not JSON. */
  NotJson: 'not-json',
  /** Envelope or data does not match the catalogue's schema. */
  Schema: 'schema',
  /** A type or version the catalogue does not know. */
  UnknownType: 'unknown-type',
  /** The envelope's workspace/account/aggregate is not the one its subject names. */
  SubjectMismatch: 'subject-mismatch',
  /** A string holds U+0000, a C0 control or an unpaired surrogate. */
  BadText: 'bad-text',
  /** The authenticity check (signature) refused it. */
  Untrusted: 'untrusted',
  /**
   * Believable on its own but not where it is: its `prev_hash` does not continue its
   * subject's chain (a replayed or inserted copy of a signed event). Decided by readers
   * that know the chain (projections, the write model), not by admission itself.
   */
  ChainBroken: 'chain-broken',
  /** Postgres refused to store it (a data error a retry cannot fix); projectors only. */
  Refused: 'refused',
} as const;
export type InadmissibleCode = (typeof InadmissibleCode)[keyof typeof InadmissibleCode];

export class InadmissibleEventError extends Error {
  readonly code: InadmissibleCode;
  readonly seq: number;
  readonly subject: string;

  readonly detail: string;

  constructor(
    code: InadmissibleCode,
    seq: number,
    subject: string,
    /** Why, without the sequence and subject (readers that list those beside it show only this). */
    detail: string,
    options?: { cause?: unknown },
  ) {
    super(`stream sequence ${seq} (${subject}) is inadmissible (${code}): ${detail}`, options);
    this.detail = detail;
    this.code = code;
    this.seq = seq;
    this.subject = subject;
    this.name = 'InadmissibleEventError';
  }
}

/**
 * Decides whether an event is genuine (e.g. its signature). Throwing means "untrusted"; the
 * message becomes the quarantine detail. Plugged in by the signing module.
 */
export interface AuthenticityCheck {
  check(event: EventEnvelope, subject: string, seq: number): void;
  /**
   * Whether `event` may be believed on the word of an authenticated later event of its
   * subject (see {@link EventAdmission.tryAdmitBatch}): true only when a full check would have
   * looked at a signature by a known key, so vouching changes the cost, never the verdict
   * rules. Checks that do not implement it check every event in full.
   */
  canVouchFor?(event: EventEnvelope, seq: number): boolean;
  /**
   * What the check believes (its keys and activation point), as a digest; null when its
   * verdicts depend on more than that. Checks without it make no verdict recordable.
   */
  fingerprint?(): string | null;
}

/**
 * Bump when admission's own checks change (the subject rule, the text rule, the order of
 * the checks): verdicts recorded under an older version are then reached again.
 */
export const ADMISSION_RULES_VERSION = 1;

/** A message as it comes off the stream, before anyone believes it. */
export interface RawEventMessage {
  readonly seq: number;
  readonly subject: string;
  readonly data: Uint8Array | string;
}

/** A message that could not be admitted, as readers surface it instead of throwing. */
export interface CorruptEvent {
  readonly seq: number;
  readonly subject: string;
  readonly code: InadmissibleCode;
  readonly error: string;
  /** `error` without the sequence and subject. */
  readonly detail: string;
}

export type AdmissionResult =
  | { readonly ok: true; readonly stored: StoredEvent }
  | { readonly ok: false; readonly corrupt: CorruptEvent };

export interface BatchAdmissionOptions {
  /**
   * How many messages of the reader's filter follow the batch on the stream (a JetStream
   * consumer's `pending`). A reader further behind than the recent results reach (a projector
   * catching up) keeps no verdicts: the readers at the head never look those sequences up,
   * and keeping them would cost a digest and a copy of every message and push the head
   * readers' verdicts out of the cache. Verdicts already kept are still used.
   */
  readonly behindHead?: number;
}

export interface EventAdmissionOptions {
  readonly validator?: EventValidator;
  readonly authenticity?: AuthenticityCheck;
}

/** A verdict without the event: small, so the window can span readers far apart. */
interface RecentVerdict {
  readonly seq: number;
  readonly digest: string;
  readonly subject: string;
  /** Null when the message was admitted. */
  readonly corrupt: CorruptEvent | null;
}

interface NearResult {
  readonly seq: number;
  readonly subject: string;
  readonly bytes: Buffer;
  readonly result: AdmissionResult;
}

/** Results kept whole (see EventAdmission.nearResults): a few megabytes of events. */
const NEAR_RESULTS = 8_192;

const utf8 = new TextDecoder('utf-8', { fatal: true });
/**
 * Verdicts kept for readers behind each other (see EventAdmission.recent): about 100 bytes
 * each, so a window wide enough for three projectors catching up at different speeds.
 */
const RECENT_VERDICTS = 65_536;

/**
 * The one place a raw stream message becomes a trusted {@link StoredEvent}: it must be
 * UTF-8 JSON, match its schema (which includes clean text), sit on the subject its
 * envelope names, and pass the authenticity check when one is configured. Every reader
 * (projectors, rebuild, CLI, history, workers) goes through here, so a forged or corrupt
 * event is treated the same way everywhere.
 */
export class EventAdmission {
  private readonly validator: EventValidator;
  private authenticity: AuthenticityCheck | undefined;

  constructor(options: EventAdmissionOptions = {}) {
    this.validator = options.validator ?? eventValidator();
    this.authenticity = options.authenticity;
  }

  /** Installs (or replaces) the authenticity check, e.g. once signing keys are loaded. */
  useAuthenticity(check: AuthenticityCheck | undefined): void {
    this.authenticity = check;
    this.recent.fill(undefined);
    this.nearResults.fill(undefined);
  }

  /**
   * Verdicts on recently seen messages, by stream sequence, with a digest of the exact bytes:
   * the three projectors, the workers and the history read the same messages within moments
   * of each other, and a full admission (schema, text, canonical JSON, Ed25519) costs about a
   * hundred times the digest. Only the verdict is kept: a hit parses the bytes again (each
   * reader gets its own envelope) at a small fraction of a full admission.
   * A ring indexed by sequence, not a Map evicting its oldest key: a Map's `keys().next()`
   * walks over every deleted slot until the table is rehashed, which made each eviction cost
   * microseconds and admission of a projector's batch dominate its time.
   */
  private readonly recent: (RecentVerdict | undefined)[] = new Array<RecentVerdict | undefined>(RECENT_VERDICTS).fill(undefined);
  /**
   * The newest few thousand results in full, with a copy of their bytes: a reader close
   * behind another (the three projectors of a process, mostly) gets the same result for
   * a byte comparison, without a digest or a parse. Shared: readers must not mutate them.
   */
  private readonly nearResults: (NearResult | undefined)[] = new Array<NearResult | undefined>(NEAR_RESULTS).fill(undefined);

  /**
   * The rules a verdict of this admission is reached under: its code's version, every schema
   * and what the authenticity check believes. Two admissions with the same fingerprint give
   * the same verdict on the same message, so a verdict recorded under it (an admission seal,
   * projections/runtime/admission-seals.ts) may be taken instead of admitting again. Null
   * when that cannot be said (no authenticity check, or one without a fingerprint).
   */
  rulesFingerprint(): string | null {
    const believes = this.authenticity?.fingerprint?.() ?? null;
    if (believes === null) return null;
    return hash('sha256', `${ADMISSION_RULES_VERSION}\n${this.validator.fingerprint}\n${believes}`, 'hex');
  }

  /**
   * The result for a message whose verdict was recorded under this admission's rules for
   * these exact bytes (a verified admission seal): refused with the recorded reason, or
   * believed, which only parses the bytes again.
   */
  admitRecorded(raw: RawEventMessage, refusal: { readonly code: InadmissibleCode; readonly detail: string } | undefined, options: BatchAdmissionOptions = {}): AdmissionResult {
    let result: AdmissionResult;
    if (refusal) {
      result = { ok: false, corrupt: corruptEventOf(new InadmissibleEventError(refusal.code, raw.seq, raw.subject, refusal.detail)) };
    } else {
      try {
        const event = JSON.parse(textOf(raw)) as EventEnvelope;
        result = { ok: true, stored: { seq: raw.seq, subject: raw.subject, event } };
      } catch {
        // Bytes that hash like admitted ones but do not parse cannot happen short of a SHA-256 collision: admit in full.
        return this.tryAdmit(raw);
      }
    }
    return (options.behindHead ?? 0) < NEAR_RESULTS ? this.remember(raw, digestOf(raw), result) : result;
  }

  /** @throws InadmissibleEventError */
  admit(raw: RawEventMessage): StoredEvent {
    const result = this.tryAdmit(raw);
    if (result.ok) return result.stored;
    const { code, seq, subject, detail } = result.corrupt;
    throw new InadmissibleEventError(code, seq, subject, detail);
  }

  /** Like {@link admit}, returning a value for a bad message so a reader can show it and go on. */
  tryAdmit(raw: RawEventMessage): AdmissionResult {
    const seen = this.cached(raw);
    if (seen) return seen;
    const digest = digestOf(raw);
    let result: AdmissionResult;
    try {
      result = { ok: true, stored: this.authenticate(this.structural(raw).stored) };
    } catch (error) {
      result = this.refusal(error);
    }
    return this.remember(raw, digest, result);
  }

  /**
   * Admits consecutive messages of the stream (a projector's batch, a rebuild's page) with
   * the same verdicts as {@link tryAdmit} on each, at a fraction of the cost: within the
   * batch, only the newest event of each subject has its Ed25519 signature verified. An
   * earlier event of that subject is believed when its recomputed hash equals its `hash` and
   * the next event of the subject — already believed — names that hash as its `prev_hash`:
   * the later signature covers its `prev_hash`, which commits to every byte of the earlier
   * event (docs/events.md, "Signatures"). Any event whose link does not hold is checked in
   * full, so a forged, altered or inserted event is refused as one at a time would.
   * The one difference: a vouched-for event's own signature bytes are not looked at (its
   * content is proven by the later signature), so a copy of a genuine event with its signature
   * altered, named by the next event of its subject in the batch, is believed here and refused
   * by the chain check after it (`chain-broken`) where tryAdmit refuses it (`untrusted`); it is
   * applied on neither path. `adsagent audit verify` checks every signature.
   */
  tryAdmitBatch(raws: readonly RawEventMessage[], options: BatchAdmissionOptions = {}): AdmissionResult[] {
    const keep = (options.behindHead ?? 0) < NEAR_RESULTS;
    const results: AdmissionResult[] = new Array(raws.length);
    const digests: string[] = new Array(raws.length);
    const structural: (StructurallyAdmitted | undefined)[] = new Array(raws.length);
    raws.forEach((raw, i) => {
      const seen = this.cached(raw);
      if (seen) {
        results[i] = seen;
        return;
      }
      if (keep) digests[i] = digestOf(raw);
      try {
        structural[i] = this.structural(raw);
      } catch (error) {
        const refused = this.refusal(error);
        results[i] = keep ? this.remember(raw, digests[i]!, refused) : refused;
      }
    });
    /** Per subject, the nearest later event that is believed on its own signature or by a chain of such. */
    const vouchers = new Map<string, EventEnvelope>();
    for (let i = raws.length - 1; i >= 0; i--) {
      const raw = raws[i]!;
      const candidate = structural[i];
      if (candidate) {
        let result: AdmissionResult;
        try {
          const voucher = vouchers.get(raw.subject);
          result = { ok: true, stored: voucher && this.vouches(voucher, candidate) ? candidate.stored : this.authenticate(candidate.stored) };
        } catch (error) {
          result = this.refusal(error);
        }
        results[i] = keep ? this.remember(raw, digests[i]!, result) : result;
      }
      const verdict = results[i]!;
      if (verdict.ok && typeof verdict.stored.event.signature === 'string') vouchers.set(raw.subject, verdict.stored.event);
      else vouchers.delete(raw.subject);
    }
    return results;
  }

  /** `later` (believed, signed) continues `earlier`'s chain, and `earlier` is what its hash says. */
  private vouches(later: EventEnvelope, { stored: earlier, text }: StructurallyAdmitted): boolean {
    const event = earlier.event;
    if (!this.authenticity?.canVouchFor?.(event, earlier.seq)) return false;
    if (later.prev_hash !== event.hash) return false;
    try {
      return recomputeStoredEventHash(text, event) === event.hash;
    } catch {
      return false;
    }
  }

  private cached(raw: RawEventMessage): AdmissionResult | undefined {
    const near = this.nearResults[raw.seq % NEAR_RESULTS];
    if (near && near.seq === raw.seq && near.subject === raw.subject && near.bytes.equals(bytesOf(raw))) return near.result;
    const seen = this.recent[raw.seq % RECENT_VERDICTS];
    if (!seen || seen.seq !== raw.seq || seen.subject !== raw.subject || seen.digest !== digestOf(raw)) return undefined;
    if (seen.corrupt) return { ok: false, corrupt: seen.corrupt };
    // The same bytes were admitted: parsing them again gives the same, believed envelope.
    const event = JSON.parse(textOf(raw)) as EventEnvelope;
    return { ok: true, stored: { seq: raw.seq, subject: raw.subject, event } };
  }

  private remember(raw: RawEventMessage, digest: string, result: AdmissionResult): AdmissionResult {
    this.recent[raw.seq % RECENT_VERDICTS] = { seq: raw.seq, digest, subject: raw.subject, corrupt: result.ok ? null : result.corrupt };
    this.nearResults[raw.seq % NEAR_RESULTS] = { seq: raw.seq, subject: raw.subject, bytes: ownCopy(bytesOf(raw)), result };
    return result;
  }

  private refusal(error: unknown): AdmissionResult {
    if (!(error instanceof InadmissibleEventError)) throw error;
    return { ok: false, corrupt: corruptEventOf(error) };
  }

  /** JSON, schema (with clean text) and subject: everything but authenticity. */
  private structural(raw: RawEventMessage): StructurallyAdmitted {
    const { seq, subject } = raw;
    let event: EventEnvelope;
    let text: string;
    try {
      text = textOf(raw);
      event = JSON.parse(text) as EventEnvelope;
    } catch (error) {
      throw new InadmissibleEventError(InadmissibleCode.NotJson, seq, subject, 'not UTF-8 JSON', { cause: error });
    }
    try {
      // A look at the text is a fraction of a walk over every string of the parsed event.
      this.validator.assertValid(event, { textClean: !jsonTextMayHoldHostileText(text) });
    } catch (error) {
      const code =
        error instanceof EventTextError
          ? InadmissibleCode.BadText
          : error instanceof UnknownEventTypeError
            ? InadmissibleCode.UnknownType
            : InadmissibleCode.Schema;
      throw new InadmissibleEventError(code, seq, subject, error instanceof Error ? error.message : String(error), { cause: error });
    }
    const mismatch = subjectMismatch(event, subject);
    if (mismatch) throw new InadmissibleEventError(InadmissibleCode.SubjectMismatch, seq, subject, mismatch);
    return { stored: { seq, subject, event }, text };
  }

  /** The authenticity check in full (an Ed25519 verification for a signed event). */
  private authenticate(stored: StoredEvent): StoredEvent {
    const { seq, subject, event } = stored;
    if (this.authenticity) {
      try {
        this.authenticity.check(event, subject, seq);
      } catch (error) {
        throw new InadmissibleEventError(InadmissibleCode.Untrusted, seq, subject, error instanceof Error ? error.message : String(error), {
          cause: error,
        });
      }
    }
    return stored;
  }
}

/** An event that passed every check but authenticity, with the text it was parsed from (its hash is recomputed from that). */
interface StructurallyAdmitted {
  readonly stored: StoredEvent;
  readonly text: string;
}

/**
 * A copy with a backing store of its own size. Buffer.from would take it from the shared
 * 64 KiB pool, and each of the thousands of copies kept would pin a whole pool slab: 30 MB
 * of the service's memory under a POST load (issue 14).
 */
function ownCopy(bytes: Buffer): Buffer {
  const copy = Buffer.allocUnsafeSlow(bytes.length);
  bytes.copy(copy);
  return copy;
}

/** The message's text. @throws TypeError when its bytes are not UTF-8. */
function textOf(raw: RawEventMessage): string {
  return typeof raw.data === 'string' ? raw.data : utf8.decode(raw.data);
}

/** The message's bytes, as a Buffer view (no copy) for comparisons and digests. */
export function bytesOf(raw: RawEventMessage): Buffer {
  return typeof raw.data === 'string' ? Buffer.from(raw.data, 'utf8') : Buffer.from(raw.data.buffer, raw.data.byteOffset, raw.data.byteLength);
}

function digestOf(raw: RawEventMessage): string {
  return hash('sha256', raw.data, 'base64');
}

export function corruptEventOf(error: InadmissibleEventError): CorruptEvent {
  return { seq: error.seq, subject: error.subject, code: error.code, error: error.message, detail: error.detail };
}

/**
 * The subject is `<prefix>.v1.<workspace>.<account|_>.<aggregate type>.<aggregate id>`
 * (src/event-store/subjects.ts); an envelope claiming another address is refused, or an
 * event published on one tenant's subject could act on another tenant's read model.
 */
function subjectMismatch(event: EventEnvelope, subject: string): string | null {
  const expected = `${SUBJECT_VERSION}.${event.workspace_id}.${event.account_id ?? NO_ACCOUNT_TOKEN}.${event.aggregate.type}.${event.aggregate.id}`;
  // The subject is one token (the prefix) and the five expected ones: it ends with them after a
  // dot and holds five dots in all, so no envelope field can hide a dot of its own.
  const prefixEnd = subject.length - expected.length - 1;
  if (prefixEnd < 0 || subject.charCodeAt(prefixEnd) !== DOT || !subject.endsWith(expected) || dotsIn(subject) !== 5) {
    return `envelope addresses ${expected} but the subject is ${subject}`;
  }
  return null;
}

const DOT = 0x2e;

function dotsIn(text: string): number {
  let dots = 0;
  for (let at = text.indexOf('.'); at !== -1; at = text.indexOf('.', at + 1)) dots++;
  return dots;
}
