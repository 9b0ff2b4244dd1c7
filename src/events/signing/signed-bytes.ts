import { canonicalJson } from '../canonical-json.ts';
import type { EventEnvelope } from '../envelope.ts';

/**
 * What a signature covers: the UTF-8 bytes of the RFC 8785 canonical JSON of the whole
 * envelope without its `signature` member — so `hash`, `prev_hash` and `key_id` are
 * covered too (docs/events.md, "Signatures").
 */
export function signedBytes(event: Omit<EventEnvelope, 'signature'> | EventEnvelope): Buffer {
  const { signature: _signature, ...body } = event as EventEnvelope;
  const canonical = canonicalJson(body);
  if (canonical === undefined) throw new TypeError('event cannot be canonicalized');
  return Buffer.from(canonical, 'utf8');
}
