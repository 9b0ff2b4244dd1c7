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

/** Active keys loaded into the cache at start and after a reconnect, at most. */
const WARM_MAX_KEYS = 100_000;
/** A just-issued key is looked for this many times, waiting 25, 50, 75… ms in between. */
const PREFETCH_ATTEMPTS = 20;
const PREFETCH_DELAY_MS = 25;
/** How soon the identity read model is asked again while it is behind the stream. */
const CATCH_UP_RETRY_MS = 250;

/** Where a lookup was answered from; counted so operators (and tests) can see Postgres is spared. */
export type KeyLookupSource = 'cache' | 'unknown_cache' | 'database';

export interface KeyDirectoryOptions {
  /** How long a key id that does not exist is remembered as unknown. */
  readonly unknownTtlMs?: number;
  /**
   * How long a valid key is answered from memory before its row is read again: a backstop for an
   * eviction that never arrives (in a cluster, a revocation published through a server that had
   * not yet learnt of this process's subscription). Revocations heard on the wire act at once.
   */
  readonly keyMaxAgeMs?: number;
  /** Most unknown key ids remembered; the oldest go first. */
  readonly unknownMax?: number;
  readonly onLookup?: (source: KeyLookupSource) => void;
  readonly now?: () => number;
}

/**
 * How current the identity read model is, as the key directory needs to know it: what a
 * process's projector has applied against what the event log holds.
 */
export interface IdentityFreshness {
  /** The read model's projection, whose checkpoint is read with each key row (`identity`). */
  readonly projection: string;
  /** The stream's last sequence now. */
  streamHead(): Promise<number>;
  /** Resolves true once the identity read model has applied everything through `seq`; false if not within a while (asked again). */
  reaches(seq: number): Promise<boolean>;
  /** The stream sequence of the newest event of this key's subject (0: none), as the stream's leader has it. */
  lastSeqOfKey(workspaceId: string, keyId: string): Promise<number>;
}

/** A cached answer: the key's record, `'unknown'` for an id known not to exist, undefined when not cached. */
export type CachedKey = KeyRecord | 'unknown' | undefined;

/**
 * Finds API keys by id in the identity read model, with an in-process cache. A cached
 * entry is trusted only while this process is subscribed to key events: every
 * ApiKeyIssued/ApiKeyRevoked evicts its key at once, and losing the NATS connection
 * empties the cache and bypasses it, so a revoked key can never outlive its event here.
 *
 * Key ids that do not exist are cached as unknown too (bounded, with a TTL), so a flood
 * of made-up keys costs one query per id, not one per request. The same eviction keeps
 * that safe: an issued key's event removes its "unknown" entry, and an id whose issue
 * was seen on the wire is never cached as unknown while the read model catches up.
 * A key issued or revoked before this process subscribed (at start, or while it was off
 * NATS) is not seen on the wire, so a row of the read model is cached only once the read
 * model is known to hold every event of that key: when it has applied everything the stream
 * held after the subscription began, or, before that, when it has applied the newest event
 * of the key's own subject (one look at the log per key). Otherwise each request reads the
 * row again, so a revoked key is refused the moment the projector reaches its revocation. An
 * id with no row is remembered as unknown only in the first case: before it, a key issued
 * meanwhile works the moment the projector reaches its issue, not after the entry's TTL.
 */
export class KeyDirectory {
  /** Valid keys, each until a time: past it the row is read again (see KeyDirectoryOptions.keyMaxAgeMs). */
  private readonly cache = new Map<string, { readonly record: KeyRecord; readonly until: number }>();
  private readonly unknown = new Map<string, number>();
  /** Revocations seen on the wire, which can be ahead of the read model by a few milliseconds. */
  private readonly revokedSeen = new Set<string>();
  /** Issues seen on the wire that the read model may not hold yet. */
  private readonly issuedSeen = new Set<string>();
  private subscription: Subscription | undefined;
  private identity: IdentityFreshness | undefined;
  private live = false;
  /** Bumped whenever the caches are emptied, so an answer read across a reconnect is not cached. */
  private generation = 0;
  /**
   * Whether the read model's answers can be remembered: it has applied every event the stream
   * held once this subscription was live, and every later issue or revocation is seen on the
   * wire. Before that, a row can predate a revocation this process never heard (appended while
   * it was off NATS) and nothing would evict it: nothing is cached, every request reads again.
   */
  private readModelCurrent = false;
  private readonly unknownTtlMs: number;
  private readonly keyMaxAgeMs: number;
  private readonly unknownMax: number;
  private readonly now: () => number;

  private readonly db: Kysely<Database>;
  private readonly options: KeyDirectoryOptions;

  constructor(
    db: Kysely<Database>,
    options: KeyDirectoryOptions = {},
  ) {
    this.db = db;
    this.options = options;
    this.unknownTtlMs = options.unknownTtlMs ?? 60_000;
    this.keyMaxAgeMs = options.keyMaxAgeMs ?? 300_000;
    this.unknownMax = options.unknownMax ?? 10_000;
    this.now = options.now ?? Date.now;
  }

  /**
   * Starts evicting on key events published under `keySubjects` (e.g. `ads.v1.*._.key.*`).
   * `identity` tells how current the identity read model is (see the class's comment).
   */
  watch(nc: NatsConnection, keySubjects: string, identity: IdentityFreshness): void {
    this.identity = identity;
    this.subscription = nc.subscribe(keySubjects, {
      callback: (_error, message) => {
        const keyId = message.subject.split('.').pop();
        if (!keyId) return;
        const type = message.headers?.get(EVENT_TYPE_HEADER);
        if (type === 'ApiKeyRevoked') this.revokedSeen.add(keyId);
        else if (type === 'ApiKeyIssued') this.issuedSeen.add(keyId);
        this.cache.delete(keyId);
        this.unknown.delete(keyId);
        if (type === 'ApiKeyIssued') void this.prefetch(keyId);
      },
    });
    this.live = !nc.isClosed();
    void this.cacheOnceCaughtUp(nc, identity);
    void (async () => {
      for await (const status of nc.status()) {
        if (status.type === 'disconnect' || status.type === 'reconnecting') {
          this.live = false;
          this.clearCaches();
        } else if (status.type === 'reconnect') {
          this.clearCaches();
          this.live = true;
          void this.cacheOnceCaughtUp(nc, identity);
        }
      }
    })().catch(() => undefined);
  }

  stop(): void {
    this.subscription?.unsubscribe();
    this.live = false;
    this.clearCaches();
  }

  /** The cached answer for `keyId`, without touching the database (a hit counts as a lookup). */
  cached(keyId: string): CachedKey {
    const hit = this.peek(keyId);
    if (hit !== undefined) this.options.onLookup?.(hit === 'unknown' ? 'unknown_cache' : 'cache');
    return hit;
  }

  /**
   * Whether this key id's ApiKeyIssued was seen on the wire and its record is not cached yet:
   * a real key a client may use the moment it is issued, before the read model has it here.
   */
  issuedJustNow(keyId: string): boolean {
    return this.issuedSeen.has(keyId) && !this.cache.has(keyId);
  }

  async find(keyId: string): Promise<KeyRecord | null> {
    const cached = this.cached(keyId);
    if (cached === 'unknown') return null;
    if (cached) return cached;
    this.options.onLookup?.('database');
    const generation = this.live ? this.generation : -1;
    // Read before the query: an answer from a read model that was behind when asked proves nothing.
    const current = this.readModelCurrent;
    // The checkpoint in the same statement (one snapshot): the row holds every event up to it.
    const row = await this.db
      .selectFrom('api_keys')
      .select(['id', 'workspace_id', 'scope', 'secret_hash', 'revoked_at'])
      .select((eb) =>
        eb
          .selectFrom('projection_checkpoints')
          .select('last_seq')
          .where('projection', '=', this.identity?.projection ?? '')
          .as('checkpoint'),
      )
      .where('id', '=', keyId)
      .executeTakeFirst();
    if (!row) {
      if (current && this.stillLive(generation) && !this.issuedSeen.has(keyId)) this.rememberUnknown(keyId);
      return null;
    }
    this.issuedSeen.delete(keyId);
    const record: KeyRecord = {
      keyId: row.id,
      workspaceId: row.workspace_id,
      scope: row.scope,
      secretHash: row.secret_hash,
      revoked: row.revoked_at !== null || this.revokedSeen.has(row.id),
    };
    if (!record.revoked && this.stillLive(generation) && (current || (await this.rowIsCurrent(record, row.checkpoint)))) {
      // Checked again after the look at the log: a revocation may have been heard meanwhile.
      if (this.stillLive(generation) && !this.revokedSeen.has(keyId)) this.remember(record);
    }
    return record;
  }

  /**
   * Loads every active key, so a valid key is answered from memory from its first request
   * (and never has to be charged to its client address by the rate limiter). Read from the
   * read model, like `find`: a revocation seen meanwhile still wins.
   */
  private async warm(): Promise<void> {
    const generation = this.generation;
    try {
      const rows = await this.db
        .selectFrom('api_keys')
        .select(['id', 'workspace_id', 'scope', 'secret_hash'])
        .where('revoked_at', 'is', null)
        .limit(WARM_MAX_KEYS)
        .execute();
      for (const row of rows) {
        if (!this.stillLive(generation) || this.cache.size >= WARM_MAX_KEYS) return;
        if (this.revokedSeen.has(row.id) || this.cache.has(row.id)) continue;
        this.remember({ keyId: row.id, workspaceId: row.workspace_id, scope: row.scope, secretHash: row.secret_hash, revoked: false });
      }
    } catch {
      // Only an optimisation: `find` still answers every key.
    }
  }

  /**
   * Like {@link cached}, but not counted as a lookup: for a caller that may still hand the
   * request on to one that looks again (the GET fast lane), so a request is counted once.
   */
  cachedUncounted(keyId: string): CachedKey {
    return this.peek(keyId);
  }

  /** Counts the cache hit a {@link cachedUncounted} caller went on to use. */
  countCacheHit(): void {
    this.options.onLookup?.('cache');
  }

  /** A key just issued: cache it as soon as the read model holds it (usually a few milliseconds). */
  private async prefetch(keyId: string): Promise<void> {
    for (let attempt = 1; attempt <= PREFETCH_ATTEMPTS && this.live; attempt++) {
      await new Promise((resolve) => setTimeout(resolve, PREFETCH_DELAY_MS * attempt).unref());
      if (this.peek(keyId) !== undefined) return;
      const found = await this.find(keyId).catch(() => null);
      if (found) return;
    }
  }

  /**
   * Waits until the identity read model has caught up with the stream as it was once the
   * subscription was registered at the server (the flush), then caches its answers for this
   * connection, starting with every active key. Retries while it is behind (a projector down,
   * a rebuild).
   */
  private async cacheOnceCaughtUp(nc: NatsConnection, identity: IdentityFreshness): Promise<void> {
    const generation = this.generation;
    try {
      await nc.flush();
    } catch {
      return;
    }
    // A fixed target: the stream as it was once the subscription was live. Asking for the head
    // again at each try would chase a moving target under a steady lag and never get there.
    let head: number | undefined;
    while (this.stillLive(generation) && head === undefined) {
      head = await identity.streamHead().catch(() => undefined);
      if (head === undefined) await new Promise((resolve) => setTimeout(resolve, CATCH_UP_RETRY_MS).unref());
    }
    while (this.stillLive(generation) && head !== undefined) {
      if (await identity.reaches(head).catch(() => false)) {
        if (!this.stillLive(generation)) return;
        this.readModelCurrent = true;
        await this.warm();
        return;
      }
      await new Promise((resolve) => setTimeout(resolve, CATCH_UP_RETRY_MS).unref());
    }
  }

  /**
   * Whether the read model, at the checkpoint its row was read with, had applied the newest
   * event of the key's subject: then the row says all there is, and anything later is heard
   * on the wire (the subscription was live before this look at the log).
   */
  private async rowIsCurrent(record: KeyRecord, checkpoint: number | null): Promise<boolean> {
    if (!this.identity || checkpoint === null) return false;
    const newest = await this.identity.lastSeqOfKey(record.workspaceId, record.keyId).catch(() => Infinity);
    return newest > 0 && newest <= checkpoint;
  }

  private peek(keyId: string): CachedKey {
    if (!this.live) return undefined;
    const cached = this.cache.get(keyId);
    if (cached) {
      if (cached.until > this.now()) return cached.record;
      this.cache.delete(keyId);
    }
    const expires = this.unknown.get(keyId);
    if (expires === undefined) return undefined;
    if (expires > this.now()) return 'unknown';
    this.unknown.delete(keyId);
    return undefined;
  }

  private remember(record: KeyRecord): void {
    this.cache.set(record.keyId, { record, until: this.now() + this.keyMaxAgeMs });
  }

  private rememberUnknown(keyId: string): void {
    this.unknown.delete(keyId);
    while (this.unknown.size >= this.unknownMax) {
      const oldest = this.unknown.keys().next().value;
      if (oldest === undefined) break;
      this.unknown.delete(oldest);
    }
    this.unknown.set(keyId, this.now() + this.unknownTtlMs);
  }

  private stillLive(generation: number): boolean {
    return this.live && generation === this.generation;
  }

  private clearCaches(): void {
    this.generation += 1;
    this.readModelCurrent = false;
    this.cache.clear();
    this.unknown.clear();
  }
}
