import { Kvm, type KV } from '@nats-io/kv';
import type { NatsConnection } from '@nats-io/nats-core';
import type { Snapshot, SnapshotCache } from './aggregate-repository.ts';

export type { Snapshot } from './aggregate-repository.ts';

/**
 * Persists aggregate snapshots in a JetStream KV bucket (history 1), so a fresh process
 * folds at most a bounded tail of an aggregate instead of its whole history. Snapshots
 * are a cache: losing the bucket only costs a refold.
 */
export class SnapshotStore implements SnapshotCache {
  private readonly kv: KV;

  private constructor(kv: KV) {
    this.kv = kv;
  }

  static async open(nc: NatsConnection, bucket: string, replicas: number): Promise<SnapshotStore> {
    const kv = await new Kvm(nc).create(bucket, { history: 1, replicas });
    return new SnapshotStore(kv);
  }

  async read<S>(subject: string): Promise<Snapshot<S> | null> {
    const entry = await this.kv.get(subject);
    if (!entry || entry.operation !== 'PUT' || entry.length === 0) return null;
    return entry.json<Snapshot<S>>();
  }

  async write<S>(subject: string, snapshot: Snapshot<S>): Promise<void> {
    await this.kv.put(subject, JSON.stringify(snapshot));
  }
}
