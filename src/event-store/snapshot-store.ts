import { createHmac, timingSafeEqual } from 'node:crypto';
import { Kvm, type KV } from '@nats-io/kv';
import type { JetStreamClient } from '@nats-io/jetstream';
import type { NatsConnection } from '@nats-io/nats-core';
import type { EventSigner } from '../events/signing/event-signer.ts';
import type { Snapshot, SnapshotCache } from './aggregate-repository.ts';

export type { Snapshot } from './aggregate-repository.ts';

/** What the MAC key is derived for (EventSigner.deriveKey): a new purpose makes every stored snapshot a miss. */
const SNAPSHOT_KEY_PURPOSE = 'aggregate snapshots v1';

/**
 * Persists aggregate snapshots in a JetStream KV bucket (history 1), so a fresh process
 * folds at most a bounded tail of an aggregate instead of its whole history. Snapshots
 * are a cache: losing the bucket only costs a refold.
 *
 * Each entry is authenticated: an HMAC-SHA256, keyed from the event signing key, over the
 * bucket's name, the aggregate's subject and the snapshot's JSON text. Whoever can write the bucket (anyone with
 * the service's NATS password) but lacks the signing key cannot plant a state the log does
 * not hold, such as a released kill switch: an entry that does not verify (forged, moved to
 * another subject or bucket, written under another key or by an older release) is read as no snapshot,
 * and the aggregate is folded from its events. Without a key (a process holding public keys
 * only) nothing is read or written.
 */
export class SnapshotStore implements SnapshotCache {
  private readonly kv: KV;
  private readonly bucket: string;
  private readonly key: Buffer | null;

  private constructor(kv: KV, bucket: string, key: Buffer | null) {
    this.kv = kv;
    this.bucket = bucket;
    this.key = key;
  }

  /**
   * @param nc a JetStream client carries the configured request timeout (NATS_REQUEST_TIMEOUT_MS) to every read and write; a connection gets nats.js's 5 s
   * @param signer the process's event signer, whose key the MACs are keyed from; undefined: no snapshots.
   */
  static async open(nc: NatsConnection | JetStreamClient, bucket: string, replicas: number, signer: EventSigner | undefined): Promise<SnapshotStore> {
    const kv = await new Kvm(nc).create(bucket, { history: 1, replicas });
    return new SnapshotStore(kv, bucket, signer?.deriveKey(SNAPSHOT_KEY_PURPOSE) ?? null);
  }

  async read<S>(subject: string): Promise<Snapshot<S> | null> {
    if (!this.key) return null;
    const entry = await this.kv.get(subject);
    if (!entry || entry.operation !== 'PUT' || entry.length === 0) return null;
    const text = entry.string();
    const newline = text.indexOf('\n');
    if (newline < 0) return null;
    const claimed = Buffer.from(text.slice(0, newline), 'base64url');
    const json = text.slice(newline + 1);
    const expected = this.mac(subject, json);
    if (claimed.length !== expected.length || !timingSafeEqual(claimed, expected)) return null;
    return JSON.parse(json) as Snapshot<S>;
  }

  async write<S>(subject: string, snapshot: Snapshot<S>): Promise<void> {
    if (!this.key) return;
    const json = JSON.stringify(snapshot);
    await this.kv.put(subject, `${this.mac(subject, json).toString('base64url')}\n${json}`);
  }

  private mac(subject: string, json: string): Buffer {
    return createHmac('sha256', this.key!).update(`${this.bucket}\n${subject}\n`).update(json).digest();
  }
}
