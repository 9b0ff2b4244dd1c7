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
  // that recomputes the hash or checks the signature canonicalizes it without sorting. The body
  // is copied in that order once; the hash and the signature then canonicalize it without a
  // sorted copy of their own, and only the envelope's top level takes the members added to it.
  const unordered = signer ? { ...event, key_id: signer.keyId } : event;
  const body = inCanonicalOrder(unordered);
  // A value the ordered copy cannot carry comes back as it was: then nothing is ordered, as before.
  const arranged = body === unordered ? <V>(value: V) => value : withTopLevelSorted;
  const hashed = arranged({ ...body, prev_hash: prevHash, hash: computeEventHash(body, prevHash) });
  if (!signer) return hashed as EventEnvelope<T, D>;
  return arranged({ ...hashed, signature: signer.sign(signedBytes(hashed)) }) as EventEnvelope<T, D>;
}

/** The same members, the top level's in sorted order (the envelope's names are never integer-like, which objects list first). */
function withTopLevelSorted<V extends object>(value: V): V {
  const sorted: Record<string, unknown> = {};
  for (const key of Object.keys(value).sort()) sorted[key] = (value as Record<string, unknown>)[key];
  return sorted as V;
}

export function computeEventHash(event: UnsealedEvent | EventEnvelope | (UnsealedEvent & { key_id: string }), prevHash: string): string {
  const { hash: _hash, prev_hash: _prev, signature: _signature, ...body } = event as EventEnvelope;
  const canonical = canonicalJson(body);
  if (canonical === undefined) throw new TypeError('event cannot be canonicalized');
  if (typeof prevHash !== 'string') throw new TypeError('prev_hash is not a string');
  // One-shot: no Hash object and three updates for each of the events a reader believes by its chain.
  return hash('sha256', `${prevHash}\n${canonical}`, 'hex');
}

/**
 * The hash a reader recomputes for a stored event, to compare with the one it claims: from its
 * text when that gives the claimed hash ({@link eventHashFromText}), else from the parsed event
 * (another spelling of the same JSON, or content that was altered).
 * @throws TypeError when the parsed event cannot be canonicalized (a lone surrogate)
 */
export function recomputeStoredEventHash(text: string, event: EventEnvelope): string {
  const fromText = eventHashFromText(text, event);
  return fromText !== undefined && fromText === event.hash ? fromText : computeEventHash(event, event.prev_hash);
}

/** The members of a stored envelope its hash does not cover: the hash, the link to the previous event, the signature. */
const UNHASHED_MEMBERS = ['hash', 'prev_hash', 'signature'] as const;

/**
 * {@link computeEventHash} of a stored event, taken from the text it was stored as instead of
 * its parsed value. The store writes canonical JSON (see sealEvent), so the body that was
 * hashed is that text without its `hash`, `prev_hash` and `signature` members, and hashing it
 * needs no walk, copy or stringify of the parsed event: about half the cost of a reader
 * believing an event by its chain (EventAdmission, audit verify). Undefined when the text does
 * not hold those members as the store writes them (another spelling, or none to remove): then
 * compute the hash from the parsed event.
 *
 * Sound for any text, not only the store's: the result is only ever compared with the hash the
 * event claims, and a match means the text without those members is byte for byte the body
 * that was hashed. The members cannot have been taken out of a nested object or a string
 * (the parsed event would then differ from that body): a member inside a string does not
 * parse, and the top-level `hash` and `prev_hash` an envelope must have would be left in the
 * text, which then no longer is that body. That rests on the hashed input splitting one way
 * only: `prev_hash` is 64 hex characters (the envelope schema) and canonical JSON has no raw
 * newline; and on the text being well-formed UTF-16 (checked here), so that its UTF-8 bytes
 * are the text itself.
 *
 * @example
 * const text = JSON.stringify(sealEvent(event, GENESIS_HASH));
 * eventHashFromText(text, JSON.parse(text)) === computeEventHash(event, GENESIS_HASH); // true
 */
export function eventHashFromText(text: string, event: EventEnvelope): string | undefined {
  // A lone surrogate would be hashed as the bytes of U+FFFD (crypto encodes strings as UTF-8):
  // such a text could match the hash of an event holding U+FFFD there. Only the parsed path judges it.
  if (typeof event.prev_hash !== 'string' || !text.isWellFormed()) return undefined;
  let body = text;
  for (const name of UNHASHED_MEMBERS) {
    const value: unknown = event[name];
    if (value === undefined && name === 'signature') continue;
    if (typeof value !== 'string') return undefined;
    // Never the first member (`aggregate` and `account_id` sort before each), so always after a comma.
    const member = `,"${name}":${JSON.stringify(value)}`;
    const at = body.indexOf(member);
    if (at < 0) return undefined;
    body = body.slice(0, at) + body.slice(at + member.length);
  }
  return hash('sha256', `${event.prev_hash}\n${body}`, 'hex');
}
