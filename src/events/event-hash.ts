import { createHash } from 'node:crypto';
import canonicalize from 'canonicalize';
import type { EventEnvelope, UnsealedEvent } from './envelope.ts';

/**
 * Chains an event to its aggregate's previous event. The hash covers every envelope
 * field in RFC 8785 canonical JSON, so any edit of a stored event — or removal of one
 * before it — breaks the chain from that point on.
 */
export function sealEvent<T extends string, D>(event: UnsealedEvent<T, D>, prevHash: string): EventEnvelope<T, D> {
  return { ...event, prev_hash: prevHash, hash: computeEventHash(event, prevHash) };
}

export function computeEventHash(event: UnsealedEvent | EventEnvelope, prevHash: string): string {
  const { hash: _hash, prev_hash: _prev, ...body } = event as EventEnvelope;
  const canonical = canonicalize(body);
  if (canonical === undefined) throw new TypeError('event cannot be canonicalized');
  return createHash('sha256').update(prevHash).update('\n').update(canonical).digest('hex');
}
