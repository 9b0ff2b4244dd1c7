import type { Kysely } from 'kysely';
import type { NatsConnection, Subscription } from '@nats-io/nats-core';
import type { Database } from '../db/schema.ts';
import type { KeyScope } from '../events/catalogue/index.ts';
import { EVENT_TYPE_HEADER } from '../event-store/event-store.ts';

export interface KeyRecord {
  readonly keyId: string;
  readonly workspaceId: string;
  readonly scope: KeyScope;
  readonly secretHash: string;
  readonly revoked: boolean;
}

/**
 * Finds API keys by id in the identity read model, with an in-process cache. A cached
 * entry is trusted only while this process is subscribed to key events: every
 * ApiKeyIssued/ApiKeyRevoked evicts its key at once, and losing the NATS connection
 * empties the cache and bypasses it, so a revoked key can never outlive its event here.
 */
export class KeyDirectory {
  private readonly cache = new Map<string, KeyRecord>();
  /** Revocations seen on the wire, which can be ahead of the read model by a few milliseconds. */
  private readonly revokedSeen = new Set<string>();
  private subscription: Subscription | undefined;
  private live = false;

  constructor(private readonly db: Kysely<Database>) {}

  /** Starts evicting on key events published under `keySubjects` (e.g. `ads.v1.*._.key.*`). */
  watch(nc: NatsConnection, keySubjects: string): void {
    this.subscription = nc.subscribe(keySubjects, {
      callback: (_error, message) => {
        const keyId = message.subject.split('.').pop();
        if (!keyId) return;
        if (message.headers?.get(EVENT_TYPE_HEADER) === 'ApiKeyRevoked') this.revokedSeen.add(keyId);
        this.cache.delete(keyId);
      },
    });
    this.live = !nc.isClosed();
    void (async () => {
      for await (const status of nc.status()) {
        if (status.type === 'disconnect' || status.type === 'reconnecting') {
          this.live = false;
          this.cache.clear();
        } else if (status.type === 'reconnect') {
          this.cache.clear();
          this.live = true;
        }
      }
    })().catch(() => undefined);
  }

  stop(): void {
    this.subscription?.unsubscribe();
    this.live = false;
    this.cache.clear();
  }

  async find(keyId: string): Promise<KeyRecord | null> {
    const cached = this.live ? this.cache.get(keyId) : undefined;
    if (cached) return cached;
    const row = await this.db
      .selectFrom('api_keys')
      .select(['id', 'workspace_id', 'scope', 'secret_hash', 'revoked_at'])
      .where('id', '=', keyId)
      .executeTakeFirst();
    if (!row) return null;
    const record: KeyRecord = {
      keyId: row.id,
      workspaceId: row.workspace_id,
      scope: row.scope,
      secretHash: row.secret_hash,
      revoked: row.revoked_at !== null || this.revokedSeen.has(row.id),
    };
    if (this.live && !record.revoked) this.cache.set(keyId, record);
    return record;
  }
}
