import { verify } from 'node:crypto';
import canonicalize from 'canonicalize';
import type { KV } from '@nats-io/kv';
import type { EventEnvelope } from '../envelope.ts';
import type { JetStreamEventStore as EventStore } from '../../event-store/jetstream-event-store.ts';
import type { EventSigner } from './event-signer.ts';
import { EventVerifier, type SigningActivationPoint } from './event-verifier.ts';
import type { KnownPublicKey } from './signing-keys.ts';

/** KV key of the activation record in the `<EVENT_STREAM>_signing` bucket. */
export const ACTIVATION_KEY = 'activation';
/** KV key prefix of a key's first-use record (informational: `activated_at` in the key directory). */
export const KEY_RECORD_PREFIX = 'key.';

/**
 * The signed record that says from which stream sequence on every event must be signed.
 * Its own signature (by `key_id`, over the canonical JSON of the other members) means
 * whoever may write to the bucket cannot move the point to make a forged unsigned event
 * look like legacy; deleting it only makes the next start recompute it from the log.
 */
export interface ActivationRecord {
  readonly stream: string;
  readonly first_signed_seq: number;
  readonly key_id: string;
  readonly activated_at: string;
  readonly signature: string;
}

function recordBytes(record: Omit<ActivationRecord, 'signature'>): Buffer {
  const { signature: _s, ...body } = record as ActivationRecord;
  return Buffer.from(canonicalize(body)!, 'utf8');
}

/** The record's activation point when it is well formed, for this stream, and signed by a known key; else null. */
export function verifyActivationRecord(text: string, stream: string, keys: readonly KnownPublicKey[]): SigningActivationPoint | null {
  let record: ActivationRecord;
  try {
    record = JSON.parse(text) as ActivationRecord;
  } catch {
    return null;
  }
  if (typeof record !== 'object' || record === null || record.stream !== stream || !Number.isSafeInteger(record.first_signed_seq) || record.first_signed_seq < 1) return null;
  if (typeof record.signature !== 'string' || typeof record.activated_at !== 'string') return null;
  const key = keys.find((k) => k.keyId === record.key_id);
  if (!key) return null;
  try {
    if (!verify(null, recordBytes(record), key.publicKey, Buffer.from(record.signature, 'base64url'))) return null;
  } catch {
    return null;
  }
  return { firstSignedSeq: record.first_signed_seq, keyId: record.key_id };
}

/** The verified activation point stored in the bucket, or null when there is none (or it does not verify). */
export async function readActivation(kv: KV, stream: string, keys: readonly KnownPublicKey[]): Promise<SigningActivationPoint | null> {
  const entry = await kv.get(ACTIVATION_KEY);
  if (!entry || entry.operation !== 'PUT') return null;
  return verifyActivationRecord(entry.string(), stream, keys);
}

/**
 * The first stream sequence that carries a valid signature by a known key, or null. Reads
 * from the start of the stream until it finds one: a one-off cost, paid when the
 * activation record is first written or has gone missing.
 */
async function firstSignedSequence(store: EventStore, filter: string, keys: readonly KnownPublicKey[]): Promise<number | null> {
  const head = await store.lastSequence();
  const probe = new EventVerifier(keys, { firstSignedSeq: Number.MAX_SAFE_INTEGER, keyId: '' });
  for await (const raw of store.readRaw(filter, 1, head)) {
    let event: EventEnvelope;
    try {
      event = JSON.parse(raw.text) as EventEnvelope;
    } catch {
      continue;
    }
    if (typeof event !== 'object' || event === null || !('signature' in event)) continue;
    try {
      probe.check(event, raw.subject, raw.seq);
      return raw.seq;
    } catch {
      // A forged or foreign signature does not start signing; keep looking.
    }
  }
  return null;
}

export interface ActivationSetup {
  readonly kv: KV;
  readonly store: EventStore;
  readonly stream: string;
  /** Filter of every event subject (the stream's subjects). */
  readonly filter: string;
  readonly keys: readonly KnownPublicKey[];
  readonly signer: EventSigner;
  readonly now?: () => Date;
  /** Told the key id a stored activation record claims when no key of this process verifies it (it is then replaced). */
  readonly onForeignRecord?: (keyId: string) => void;
}

/** The key id an activation record claims, unverified (for a message only), or null. */
function claimedKeyIdOf(text: string): string | null {
  try {
    const keyId = (JSON.parse(text) as { key_id?: unknown }).key_id;
    return typeof keyId === 'string' && /^[0-9a-f]{16}$/.test(keyId) ? keyId : null;
  } catch {
    return null;
  }
}

/**
 * Reads the activation point, writing it first when missing: at the first signed event
 * already in the log (a record lost after signing began), else at the stream's next
 * sequence (signing starts now: everything stored so far is legacy). Create-only, so two
 * processes starting together agree on one record.
 */
export async function ensureActivation(setup: ActivationSetup): Promise<SigningActivationPoint> {
  const { kv, stream, keys, signer } = setup;
  for (let attempt = 0; attempt < 3; attempt++) {
    const entry = await kv.get(ACTIVATION_KEY);
    if (entry && entry.operation === 'PUT') {
      const point = verifyActivationRecord(entry.string(), stream, keys);
      if (point) return point;
      // A record this process cannot verify: signing began with a key it does not hold.
      const claimed = claimedKeyIdOf(entry.string());
      if (claimed !== null && attempt === 0) setup.onForeignRecord?.(claimed);
    }
    const firstSigned = await firstSignedSequence(setup.store, setup.filter, keys);
    const body = {
      stream,
      first_signed_seq: firstSigned ?? (await setup.store.lastSequence()) + 1,
      key_id: signer.keyId,
      activated_at: (setup.now?.() ?? new Date()).toISOString(),
    };
    const record: ActivationRecord = { ...body, signature: signer.sign(recordBytes(body)) };
    try {
      if (entry) await kv.update(ACTIVATION_KEY, JSON.stringify(record), entry.revision);
      else await kv.create(ACTIVATION_KEY, JSON.stringify(record));
      return { firstSignedSeq: record.first_signed_seq, keyId: record.key_id };
    } catch {
      // Another process wrote it first: read theirs.
    }
  }
  throw new Error('could not settle the event signing activation record');
}

/** Records when a key signed for the first time (informational; never trusted for verification). */
export async function recordKeyFirstUse(kv: KV, keyId: string, now: Date): Promise<void> {
  try {
    await kv.create(`${KEY_RECORD_PREFIX}${keyId}`, JSON.stringify({ key_id: keyId, activated_at: now.toISOString() }));
  } catch {
    // Already recorded by an earlier start.
  }
}

/** When each key was first used, from the bucket; a value that is not an ISO time is ignored (the bucket is not trusted). */
export async function keyActivationTimes(kv: KV, keyIds: readonly string[]): Promise<Map<string, string>> {
  const times = new Map<string, string>();
  for (const keyId of keyIds) {
    const entry = await kv.get(`${KEY_RECORD_PREFIX}${keyId}`);
    if (!entry || entry.operation !== 'PUT') continue;
    try {
      const value = (JSON.parse(entry.string()) as { activated_at?: unknown }).activated_at;
      if (typeof value === 'string' && /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(\.\d+)?Z$/.test(value) && !Number.isNaN(Date.parse(value))) times.set(keyId, value);
    } catch {
      // Not JSON: ignored.
    }
  }
  return times;
}
