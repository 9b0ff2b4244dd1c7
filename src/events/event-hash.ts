import { hash } from 'node:crypto';
import { canonicalJson, inCanonicalOrder } from './canonical-json.ts';
import type { EventEnvelope, UnsealedEvent } from './envelope.ts';
import type { EventSigner } from './signing/event-signer.ts';
import { signedBytes } from './signing/signed-bytes.ts';

/**
 * Chains an event to its aggregate's previous event and, given a signer, signs it. The hash
 * covers every envelope field but `signature` (so `key_id` too) in RFC 8785 canonical
 * JSON, so any edit of a stored event — or removal of one before it — breaks the chain from
 * that point on. The signature then covers the whole envelope, `hash` included, without
 * itself. Without a signer the event is sealed as before signing existed (legacy shape).
 */
export function sealEvent<T extends string, D>(event: UnsealedEvent<T, D>, prevHash: string, signer?: EventSigner): EventEnvelope<T, D> {
  // Members in canonical order, so the stored JSON is written in that order and every reader
  // that recomputes the hash or checks the signature canonicalizes it without sorting.
  if (!signer) return inCanonicalOrder({ ...event, prev_hash: prevHash, hash: computeEventHash(event, prevHash) });
  const keyed = { ...event, key_id: signer.keyId };
  const hashed = { ...keyed, prev_hash: prevHash, hash: computeEventHash(keyed, prevHash) };
  return inCanonicalOrder({ ...hashed, signature: signer.sign(signedBytes(hashed)) });
}

export function computeEventHash(event: UnsealedEvent | EventEnvelope | (UnsealedEvent & { key_id: string }), prevHash: string): string {
  const { hash: _hash, prev_hash: _prev, signature: _signature, ...body } = event as EventEnvelope;
  const canonical = canonicalJson(body);
  if (canonical === undefined) throw new TypeError('event cannot be canonicalized');
  if (typeof prevHash !== 'string') throw new TypeError('prev_hash is not a string');
  // One-shot: no Hash object and three updates for each of the events a reader believes by its chain.
  return hash('sha256', `${prevHash}\n${canonical}`, 'hex');
}
