/**
 * Why an event is not believed:
 * - `unsigned`: no signature, at or after the stream's signing activation (a legacy event
 *   before it is accepted, not rejected retroactively);
 * - `unknown-key`: signed by a key that is neither current nor retired here;
 * - `bad-signature`: the signature does not verify (content altered, or forged).
 */
export const UNTRUSTED_EVENT_CODES = ['unsigned', 'unknown-key', 'bad-signature'] as const;
export type UntrustedEventCode = (typeof UNTRUSTED_EVENT_CODES)[number];

export class UntrustedEventError extends Error {
  readonly code: UntrustedEventCode;
  readonly seq: number;
  readonly subject: string;

  readonly reason: string;

  constructor(
    code: UntrustedEventCode,
    seq: number,
    subject: string,
    /** The reason alone, without where. */
    reason: string,
  ) {
    super(`stream sequence ${seq} on ${subject}: ${reason}`);
    this.reason = reason;
    this.code = code;
    this.seq = seq;
    this.subject = subject;
    this.name = 'UntrustedEventError';
  }
}
