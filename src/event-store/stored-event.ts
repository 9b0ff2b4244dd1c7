import type { EventEnvelope } from '../events/envelope.ts';

/** An event as stored: its envelope plus where it sits in the stream. */
export interface StoredEvent<E extends EventEnvelope = EventEnvelope> {
  readonly seq: number;
  readonly subject: string;
  readonly event: E;
}
