import { Kvm, type KV } from '@nats-io/kv';
import type { NatsConnection } from '@nats-io/nats-core';
import type { SubjectPosition } from './event-store.ts';

/** A folded aggregate state as of a stream position. */
export interface Snapshot<S> extends SubjectPosition {
  /** Version of the state's shape; a snapshot of another version is ignored and refolded. */
  readonly stateVersion: number;
  readonly state: S;
}

/**
 * Persists aggregate snapshots in a JetStream KV bucket (history 1), so a fresh process
 * folds at most a bounded tail of an aggregate instead of its whole history. Snapshots
 * are a cache: losing the bucket only costs a refold.
 */
export class SnapshotStore {
  private constructor(private readonly kv: KV) {}

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
