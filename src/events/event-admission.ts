import { createHash } from 'node:crypto';
import type { EventEnvelope } from './envelope.ts';
import { eventValidator, EventTextError, UnknownEventTypeError, type EventValidator } from './event-validator.ts';
import { NO_ACCOUNT_TOKEN, SUBJECT_VERSION } from '../event-store/subjects.ts';
import type { StoredEvent } from '../event-store/event-store.ts';

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
  constructor(
    readonly code: InadmissibleCode,
    readonly seq: number,
    readonly subject: string,
    /** Why, without the sequence and subject (readers that list those beside it show only this). */
    readonly detail: string,
    options?: { cause?: unknown },
  ) {
    super(`stream sequence ${seq} (${subject}) is inadmissible (${code}): ${detail}`, options);
    this.name = 'InadmissibleEventError';
  }
}

/**
 * Decides whether an event is genuine (e.g. its signature). Throwing means "untrusted"; the
 * message becomes the quarantine detail. Plugged in by the signing module.
 */
export interface AuthenticityCheck {
  check(event: EventEnvelope, subject: string, seq: number): void;
}

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

export interface EventAdmissionOptions {
  readonly validator?: EventValidator;
  readonly authenticity?: AuthenticityCheck;
}

const utf8 = new TextDecoder('utf-8', { fatal: true });
/** Verdicts kept for readers close behind each other (see EventAdmission.recent). */
const RECENT_VERDICTS = 20_000;

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
    this.recent.clear();
  }

  /**
   * Verdicts on recently seen messages, by stream sequence, with a digest of the exact bytes:
   * the three projectors, the workers and the history read the same messages within moments
   * of each other, and a full admission (schema, text, canonical JSON, Ed25519) costs about a
   * hundred times the digest. Results are shared: readers must not mutate the events.
   */
  private readonly recent = new Map<number, { readonly digest: string; readonly subject: string; readonly result: AdmissionResult }>();

  /** @throws InadmissibleEventError */
  admit(raw: RawEventMessage): StoredEvent {
    const result = this.tryAdmit(raw);
    if (result.ok) return result.stored;
    const { code, seq, subject, detail } = result.corrupt;
    throw new InadmissibleEventError(code, seq, subject, detail);
  }

  /** Like {@link admit}, returning a value for a bad message so a reader can show it and go on. */
  tryAdmit(raw: RawEventMessage): AdmissionResult {
    const digest = createHash('sha256').update(raw.data).digest('base64');
    const seen = this.recent.get(raw.seq);
    if (seen && seen.digest === digest && seen.subject === raw.subject) return seen.result;
    let result: AdmissionResult;
    try {
      result = { ok: true, stored: this.admitUncached(raw) };
    } catch (error) {
      if (!(error instanceof InadmissibleEventError)) throw error;
      result = { ok: false, corrupt: corruptEventOf(error) };
    }
    if (this.recent.size >= RECENT_VERDICTS) this.recent.delete(this.recent.keys().next().value!);
    this.recent.set(raw.seq, { digest, subject: raw.subject, result });
    return result;
  }

  private admitUncached(raw: RawEventMessage): StoredEvent {
    const { seq, subject } = raw;
    let event: EventEnvelope;
    try {
      const text = typeof raw.data === 'string' ? raw.data : utf8.decode(raw.data);
      event = JSON.parse(text) as EventEnvelope;
    } catch (error) {
      throw new InadmissibleEventError(InadmissibleCode.NotJson, seq, subject, 'not UTF-8 JSON', { cause: error });
    }
    try {
      this.validator.assertValid(event);
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
    if (this.authenticity) {
      try {
        this.authenticity.check(event, subject, seq);
      } catch (error) {
        throw new InadmissibleEventError(InadmissibleCode.Untrusted, seq, subject, error instanceof Error ? error.message : String(error), {
          cause: error,
        });
      }
    }
    return { seq, subject, event };
  }

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
  const tokens = subject.split('.');
  const expected = [SUBJECT_VERSION, event.workspace_id, event.account_id ?? NO_ACCOUNT_TOKEN, event.aggregate.type, event.aggregate.id];
  const actual = tokens.slice(1);
  if (tokens.length !== 6 || expected.some((token, index) => token !== actual[index])) {
    return `envelope addresses ${expected.join('.')} but the subject is ${subject}`;
  }
  return null;
}
