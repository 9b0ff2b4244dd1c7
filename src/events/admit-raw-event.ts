import type { DomainEvent } from './catalogue/index.ts';
import type { EventEnvelope } from './envelope.ts';
import { eventValidator } from './event-validator.ts';

/** A stored message as read from the stream, before anything about it is believed. */
export interface RawEventMessage {
  readonly seq: number;
  readonly subject: string;
  readonly text: string;
}

/** What a reader may do with a stored message: use it, or show/skip it as corrupt. */
export type AdmittedEvent =
  | { readonly kind: 'event'; readonly seq: number; readonly subject: string; readonly event: DomainEvent }
  | { readonly kind: 'corrupt'; readonly seq: number; readonly subject: string; readonly error: string };

/**
 * The one place where readers outside the projectors (history, SSE, the workers) turn a
 * raw stored message into a trusted event: JSON, the envelope and data schemas of a known
 * type/version, and an envelope that matches the subject it was stored on. Anything else
 * is `corrupt` with a short reason that never echoes the message's content.
 *
 * Kept alone on purpose: the shared admission module of issue #9 (signatures, quarantine)
 * replaces this function without touching its callers.
 */
export function admitRawEvent(raw: RawEventMessage): AdmittedEvent {
  const corrupt = (error: string): AdmittedEvent => ({ kind: 'corrupt', seq: raw.seq, subject: raw.subject, error });
  let parsed: unknown;
  try {
    parsed = JSON.parse(raw.text);
  } catch {
    return corrupt('not JSON');
  }
  if (typeof parsed !== 'object' || parsed === null || Array.isArray(parsed)) return corrupt('not a JSON object');
  const event = parsed as EventEnvelope;
  try {
    eventValidator().assertValid(event);
  } catch (error) {
    return corrupt(clip(error instanceof Error ? error.message : 'does not match its schema'));
  }
  const mismatch = subjectMismatch(raw.subject, event);
  if (mismatch) return corrupt(mismatch);
  return { kind: 'event', seq: raw.seq, subject: raw.subject, event: event as unknown as DomainEvent };
}

/** `<prefix>.v1.<workspace>.<account|_>.<aggregate type>.<aggregate id>` must agree with the envelope. */
function subjectMismatch(subject: string, event: EventEnvelope): string | null {
  const tokens = subject.split('.');
  if (tokens.length !== 6) return 'stored on a subject outside the event hierarchy';
  const [, , workspace, account, type, id] = tokens;
  if (workspace !== event.workspace_id) return 'workspace_id does not match its subject';
  if (account !== (event.account_id ?? '_')) return 'account_id does not match its subject';
  if (type !== event.aggregate.type || id !== event.aggregate.id) return 'aggregate does not match its subject';
  return null;
}

function clip(text: string): string {
  return text.length > 300 ? `${text.slice(0, 300)}…` : text;
}
