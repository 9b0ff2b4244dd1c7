import type { DomainEvent } from './catalogue/index.ts';
import type { EventAdmission, InadmissibleCode, RawEventMessage } from './event-admission.ts';

/** What a reader may do with a stored message: use it, or show/skip it as corrupt. */
export type AdmittedEvent =
  | { readonly kind: 'event'; readonly seq: number; readonly subject: string; readonly event: DomainEvent }
  | { readonly kind: 'corrupt'; readonly seq: number; readonly subject: string; readonly code: InadmissibleCode; readonly error: string };

/**
 * The readers outside the projectors (history, SSE, the workers) turn a raw stored message
 * into an event through the shared admission (JSON, schemas, clean text, subject,
 * signature), as a value rather than a throw, so one bad message is shown or skipped and
 * the reader goes on. The reason is clipped: it must never echo a large forged payload.
 */
export function admitRawEvent(admission: EventAdmission, raw: RawEventMessage): AdmittedEvent {
  const result = admission.tryAdmit(raw);
  if (result.ok) {
    const { seq, subject, event } = result.stored;
    return { kind: 'event', seq, subject, event: event as unknown as DomainEvent };
  }
  const { seq, subject, code, detail } = result.corrupt;
  return { kind: 'corrupt', seq, subject, code, error: clip(detail) };
}

function clip(text: string): string {
  return text.length > 300 ? `${text.slice(0, 300)}…` : text;
}
