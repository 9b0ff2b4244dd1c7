/**
 * Example analytics consumer: per account and UTC day, how many actions a person approved
 * (ActionApproved) and how many were auto-applied (ActionProposed with disposition
 * "auto_applied"). See README.md beside this file and docs/consumers.md.
 *
 * How it stays exact across crashes and restarts:
 *
 * - A durable JetStream pull consumer, filter `<prefix>.v1.*.*.action.*`, ack explicit,
 *   `max_ack_pending: 1`: the server hands out the next message only once the previous one
 *   is acked, so messages arrive in stream order, redeliveries included.
 * - Each counted event updates the counts AND the checkpoint (its stream sequence) in one
 *   Postgres transaction; the message is acked only after COMMIT.
 * - A message at or below the checkpoint was already counted (the process died between
 *   COMMIT and ack, or an ack was lost): it is acked and skipped.
 *
 * Run it: `node examples/analytics-consumer/approvals-per-day.ts` (configuration by env).
 */
import { AckPolicy, DeliverPolicy, jetstream, jetstreamManager, JetStreamApiCodes, JetStreamApiError, type ConsumerMessages, type JetStreamManager, type JsMsg } from '@nats-io/jetstream';
import { connect, type NatsConnection } from '@nats-io/transport-node';
import type { NatsCredentials } from '../../src/config/config.ts';
import { natsAccess } from '../../src/config/nats-access-config.ts';
import { natsConnectionOptions } from '../../src/event-store/nats-connection.ts';
import { signingBucketName } from '../../src/events/signing/event-signing.ts';
import { readActivation } from '../../src/events/signing/signing-activation.ts';
import { keyIdOf } from '../../src/events/signing/signing-keys.ts';
import { GENESIS_HASH } from '../../src/events/envelope.ts';
import { chainBrokenDetail } from '../../src/events/subject-chains.ts';
import { Kvm } from '@nats-io/kv';
import canonicalize from 'canonicalize';
import pg from 'pg';
import { createPublicKey, verify, type KeyObject } from 'node:crypto';
import { fileURLToPath } from 'node:url';
import { realpathSync } from 'node:fs';

export interface ApprovalsPerDayOptions {
  readonly natsUrl: string;
  /** How to log in: the read-only `analytics` user of deploy/nats/auth.conf is enough. Default none. */
  readonly natsCredentials?: NatsCredentials;
  /** CA certificate (PEM file) of the NATS servers; set, the connection uses TLS. */
  readonly natsTlsCa?: string;
  readonly databaseUrl: string;
  /** The event stream (EVENT_STREAM). */
  readonly stream: string;
  /** EVENT_SUBJECT_PREFIX. */
  readonly subjectPrefix: string;
  /** Postgres schema of this consumer's own tables (created when missing). */
  readonly schema: string;
  /**
   * What the consumer believes. `signatures` (what fromEnv sets up): only events signed by one
   * of these keys (GET /api/v1/event-signing-keys) that continue their subject's hash chain, so
   * a forged or replayed event published by anyone who can write to the stream counts nothing.
   * `nats-permissions`: whatever the stream holds, on the word of the NATS permissions that let
   * only the service publish there.
   */
  readonly trust: EventTrust;
  /** Durable consumer name; also the checkpoint's key. */
  readonly durableName?: string;
  /** How long the server waits for an ack before redelivering. Default 30 s. */
  readonly ackWaitMs?: number;
  /** Messages per pull request. Default 64. */
  readonly batchSize?: number;
  /** Pause after a failed message before it is retried. Default 1 s. */
  readonly retryDelayMs?: number;
  /** Called after COMMIT and before the ack of each counted event (tests crash here). */
  readonly afterCommit?: (committed: CommittedEvent) => void | Promise<void>;
  readonly log?: (line: string) => void;
}

/** A public key that signs the event log, as GET /api/v1/event-signing-keys lists it. */
export interface SigningKey {
  readonly key_id: string;
  readonly public_key_pem: string;
}

export type EventTrust =
  | {
      readonly kind: 'signatures';
      readonly keys: readonly SigningKey[];
      /**
       * Reads the keys again (fromEnv: GET /api/v1/event-signing-keys), when an event names a
       * key not among them: after a rotation the service signs with a key the consumer has not
       * seen yet. An event whose key is still unknown after a refresh is refused.
       */
      readonly refreshKeys?: () => Promise<readonly SigningKey[]>;
      /**
       * The stream sequence signing started at: unsigned events below it are legacy and
       * believed. Absent: `first_signed_seq` of the stream's signed activation record
       * (docs/events.md), read at start; without a record that verifies, 0 (every event must be
       * signed).
       */
      readonly firstSignedSeq?: number;
    }
  | { readonly kind: 'nats-permissions' };

export interface CommittedEvent {
  readonly seq: number;
  readonly type: string;
  readonly accountId: string;
  readonly day: string;
}

export interface DayCount {
  readonly workspace_id: string;
  readonly account_id: string;
  /** UTC day, YYYY-MM-DD. */
  readonly day: string;
  readonly approved: number;
  readonly auto_applied: number;
}

export interface ConsumerStats {
  /** Events counted (committed) by this instance. */
  readonly counted: number;
  /** Events at or below the checkpoint, acked without counting again. */
  readonly skipped: number;
  /** Action events that count nothing (rejected, applied, ...), acked at once. */
  readonly ignored: number;
  readonly failures: number;
  /** Messages that are not believable action events (not JSON, missing fields, foreign subject, not signed by a known key, a replay), logged and skipped. */
  readonly corrupt: number;
  readonly lastError: string | null;
}

/** The action events this consumer reads, by type; any other type is ignored. */
const COUNTED_TYPES = new Set(['ActionApproved', 'ActionProposed']);
const TYPE_HEADER = 'Ads-Event-Type';
const IDENTIFIER = /^[a-z_][a-z0-9_]{0,62}$/i;

/** A version of a counted type this consumer was not written for: stop and upgrade rather than guess. */
export class UnsupportedEventVersionError extends Error {
  readonly type: string;
  readonly version: number;
  readonly seq: number;

  constructor(type: string, version: number, seq: number) {
    super(`${type} v${version} at stream sequence ${seq} is not understood by this consumer; upgrade it`);
    this.type = type;
    this.version = version;
    this.seq = seq;
    this.name = 'UnsupportedEventVersionError';
  }
}

/** A message that can never be counted; retrying it would stop the consumer for good. */
export class CorruptEventError extends Error {
  readonly seq: number;

  constructor(seq: number, reason: string) {
    super(`stream sequence ${seq} is not a usable action event: ${reason}`);
    this.seq = seq;
    this.name = 'CorruptEventError';
  }
}

/** Subject tokens (docs/consumers.md): what ids look like; anything else is not from the service. */
const TOKEN = /^[A-Za-z0-9_-]{1,64}$/;
/** The service writes UTC times (`…Z`); the day must also be a real date, or Postgres would refuse it. */
const ISO_UTC_TIME = /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(\.\d{1,9})?Z$/;
const SHA256_HEX = /^[0-9a-f]{64}$/;

function isUtcTime(time: string): boolean {
  if (!ISO_UTC_TIME.test(time)) return false;
  const parsed = new Date(time);
  return !Number.isNaN(parsed.getTime()) && parsed.toISOString().slice(0, 10) === time.slice(0, 10);
}

/**
 * Reads the fields this consumer uses, trusting nothing: the body must be JSON, the fields
 * present and well-formed, and the account the one the subject names
 * (`<prefix>.v1.<workspace>.<account>.action.<id>`), or the message is corrupt.
 *
 * @throws CorruptEventError
 */
export function parseActionEvent(data: Uint8Array, subject: string, seq: number): ActionEvent {
  let value: unknown;
  try {
    value = JSON.parse(new TextDecoder('utf-8', { fatal: true }).decode(data));
  } catch {
    throw new CorruptEventError(seq, 'not UTF-8 JSON');
  }
  if (typeof value !== 'object' || value === null || Array.isArray(value)) throw new CorruptEventError(seq, 'not a JSON object');
  const event = value as Record<string, unknown>;
  if (typeof event.type !== 'string' || !Number.isInteger(event.version)) throw new CorruptEventError(seq, 'type or version missing');
  if (typeof event.time !== 'string' || !isUtcTime(event.time)) throw new CorruptEventError(seq, 'time is not an ISO-8601 UTC time');
  if (typeof event.workspace_id !== 'string' || !TOKEN.test(event.workspace_id)) throw new CorruptEventError(seq, 'workspace_id is not an id');
  if (typeof event.account_id !== 'string' || !TOKEN.test(event.account_id)) throw new CorruptEventError(seq, 'account_id is not an id');
  if (typeof event.data !== 'object' || event.data === null) throw new CorruptEventError(seq, 'data missing');
  if (typeof event.prev_hash !== 'string' || !SHA256_HEX.test(event.prev_hash) || typeof event.hash !== 'string' || !SHA256_HEX.test(event.hash)) {
    throw new CorruptEventError(seq, 'prev_hash or hash is not a SHA-256 hex digest');
  }
  // `<prefix>.v1.<workspace>.<account>.action.<action id>`: the whole address, as the service's
  // admission checks it. A copy of an action's signed events on another action's subject
  // would otherwise start a chain of its own there and be counted again.
  const tokens = subject.split('.');
  const aggregate = event.aggregate as { type?: unknown; id?: unknown } | null | undefined;
  if (
    tokens.length !== 6 ||
    tokens[1] !== 'v1' ||
    tokens[2] !== event.workspace_id ||
    tokens[3] !== event.account_id ||
    tokens[4] !== 'action' ||
    typeof aggregate !== 'object' ||
    aggregate === null ||
    aggregate.type !== 'action' ||
    aggregate.id !== tokens[5]
  ) {
    throw new CorruptEventError(seq, `envelope does not belong on ${subject}`);
  }
  return event as unknown as ActionEvent;
}

interface ActionEvent {
  readonly type: string;
  readonly version: number;
  readonly prev_hash: string;
  readonly hash: string;
  readonly key_id?: unknown;
  readonly signature?: unknown;
  readonly time: string;
  readonly workspace_id: string;
  readonly account_id: string | null;
  readonly data: Record<string, unknown>;
}

/** What an event adds to its account's day, or null when it adds nothing. */
export function countOf(event: ActionEvent, seq: number): { approved: number; autoApplied: number } | null {
  switch (event.type) {
    case 'ActionApproved':
      // The fact is the type itself; no field of data is read, so any version counts.
      return { approved: 1, autoApplied: 0 };
    case 'ActionProposed':
      // v2 only added proposer_key_id; disposition means the same in both.
      if (event.version !== 1 && event.version !== 2) throw new UnsupportedEventVersionError(event.type, event.version, seq);
      return event.data.disposition === 'auto_applied' ? { approved: 0, autoApplied: 1 } : null;
    default:
      return null;
  }
}

/**
 * Checks an event's Ed25519 signature (docs/events.md, "Signatures"): over the RFC 8785
 * canonical JSON of the envelope as stored, without `signature`, by the key `key_id` names.
 * An unsigned event is believed only below `firstSignedSeq` (written before signing existed).
 *
 * @throws CorruptEventError
 */
export function verifySignature(event: ActionEvent, seq: number, keys: ReadonlyMap<string, KeyObject>, firstSignedSeq: number): void {
  const { signature, ...signed } = event as ActionEvent & Record<string, unknown>;
  if (signature === undefined && event.key_id === undefined) {
    if (seq < firstSignedSeq) return;
    throw new CorruptEventError(seq, 'untrusted: unsigned, and written after signing started');
  }
  const key = typeof event.key_id === 'string' ? keys.get(event.key_id) : undefined;
  if (!key) throw new CorruptEventError(seq, `untrusted: signed by unknown key ${JSON.stringify(event.key_id)}`);
  let text: string | undefined;
  try {
    text = canonicalize(signed);
  } catch {
    // A lone surrogate (a \ud800 escape) has no canonical form: nothing the service writes.
  }
  const valid = typeof signature === 'string' && text !== undefined && verify(null, Buffer.from(text, 'utf8'), key, Buffer.from(signature, 'base64url'));
  if (!valid) throw new CorruptEventError(seq, `untrusted: the signature does not verify with key ${event.key_id as string}`);
}

/** The trusted keys by id; a PEM that is not an Ed25519 public key is refused at once. */
function keysById(keys: readonly SigningKey[]): Map<string, KeyObject> {
  if (keys.length === 0) throw new Error('trust: signatures needs at least one signing key');
  return new Map(
    keys.map((key) => {
      const object = createPublicKey(key.public_key_pem);
      if (object.asymmetricKeyType !== 'ed25519') throw new Error(`signing key ${key.key_id} is not an Ed25519 public key`);
      // The id is the key's own fingerprint (docs/events.md): a list that names a key by another key's id is not the service's.
      if (keyIdOf(object) !== key.key_id) throw new Error(`signing key ${key.key_id} is not the key its PEM holds (${keyIdOf(object)})`);
      return [key.key_id, object];
    }),
  );
}

/** The keys the service signs with, from its public endpoint (no authentication). */
export async function fetchSigningKeys(url: string): Promise<SigningKey[]> {
  const response = await fetch(url, { signal: AbortSignal.timeout(10_000) });
  if (!response.ok) throw new Error(`GET ${url} answered ${response.status}`);
  const body = (await response.json()) as { data?: SigningKey[] };
  if (!Array.isArray(body.data)) throw new Error(`GET ${url} did not answer a list of keys`);
  return body.data;
}

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

/** Least time between two reads of the signing keys (see ApprovalsPerDayConsumer.verify). */
const KEY_REFRESH_MS = 5_000;

export class ApprovalsPerDayConsumer {
  readonly durableName: string;
  readonly filterSubject: string;
  private readonly table: string;
  private readonly checkpointTable: string;
  private readonly chainTable: string;
  /** The trusted keys by id, with trust `signatures`; null when trusting NATS permissions. */
  private keys: ReadonlyMap<string, KeyObject> | null;
  private firstSignedSeq: number;
  private lastKeyRefresh = 0;
  private nc: NatsConnection | null = null;
  private db: pg.Client | null = null;
  private loop: Promise<void> | null = null;
  private batch: ConsumerMessages | null = null;
  private stopping = false;
  private migrated = false;
  private killed = false;
  private stats = { counted: 0, skipped: 0, ignored: 0, failures: 0, corrupt: 0, lastError: null as string | null };

  private readonly options: ApprovalsPerDayOptions;

  constructor(options: ApprovalsPerDayOptions) {
    this.options = options;
    if (!IDENTIFIER.test(options.schema)) throw new Error(`schema must be a plain SQL identifier, got '${options.schema}'`);
    this.durableName = options.durableName ?? 'analytics-approvals-per-day';
    this.filterSubject = `${options.subjectPrefix}.v1.*.*.action.*`;
    this.table = `"${options.schema}".approvals_per_day`;
    this.checkpointTable = `"${options.schema}".consumer_checkpoint`;
    this.chainTable = `"${options.schema}".consumer_chain_heads`;
    this.keys = options.trust.kind === 'signatures' ? keysById(options.trust.keys) : null;
    this.firstSignedSeq = options.trust.kind === 'signatures' ? (options.trust.firstSignedSeq ?? 0) : 0;
  }

  /**
   * Reads the configuration from the environment (README.md lists the variables). With
   * `ANALYTICS_TRUST=signatures` (the default) it fetches the signing keys from the service.
   */
  static async fromEnv(env: NodeJS.ProcessEnv = process.env, extra: Partial<ApprovalsPerDayOptions> = {}): Promise<ApprovalsPerDayConsumer> {
    // NATS_USER/NATS_PASSWORD, NATS_TOKEN, NATS_CREDS, NATS_TLS_CA: the same rules as the service's.
    const problems: string[] = [];
    const access = natsAccess((name) => env[name]?.trim() ?? '', problems);
    const trustKind = env.ANALYTICS_TRUST ?? 'signatures';
    if (trustKind !== 'signatures' && trustKind !== 'nats-permissions') problems.push(`ANALYTICS_TRUST must be signatures or nats-permissions, got '${trustKind}'`);
    const firstSignedSeq = env.EVENT_FIRST_SIGNED_SEQ === undefined ? undefined : Number(env.EVENT_FIRST_SIGNED_SEQ);
    if (firstSignedSeq !== undefined && (!Number.isSafeInteger(firstSignedSeq) || firstSignedSeq < 0)) problems.push('EVENT_FIRST_SIGNED_SEQ must be a stream sequence (0 or more)');
    if (problems.length > 0) throw new Error(`invalid configuration: ${problems.join('; ')}`);
    const keysUrl = env.EVENT_SIGNING_KEYS_URL ?? 'http://127.0.0.1:8080/api/v1/event-signing-keys';
    const trust: EventTrust =
      extra.trust ??
      (trustKind === 'nats-permissions'
        ? { kind: 'nats-permissions' }
        : {
            kind: 'signatures',
            keys: await fetchSigningKeys(keysUrl),
            refreshKeys: () => fetchSigningKeys(keysUrl),
            ...(firstSignedSeq === undefined ? {} : { firstSignedSeq }),
          });
    return new ApprovalsPerDayConsumer({
      natsUrl: env.NATS_URL ?? 'nats://127.0.0.1:4222',
      natsCredentials: access.natsCredentials,
      natsTlsCa: access.natsTlsCa,
      databaseUrl: env.DATABASE_URL ?? 'postgres://postgres@127.0.0.1:5432/adsagent',
      stream: env.EVENT_STREAM ?? 'ADS_EVENTS',
      subjectPrefix: env.EVENT_SUBJECT_PREFIX ?? 'ads',
      schema: env.ANALYTICS_SCHEMA ?? 'analytics',
      durableName: env.ANALYTICS_CONSUMER ?? undefined,
      ...(env.ANALYTICS_ACK_WAIT_MS ? { ackWaitMs: Number(env.ANALYTICS_ACK_WAIT_MS) } : {}),
      ...extra,
      trust,
    });
  }

  get running(): boolean {
    return this.loop !== null;
  }

  getStats(): ConsumerStats {
    return { ...this.stats };
  }

  /**
   * Connects, creates the tables and the durable consumer when missing, and starts
   * consuming in the background. Resolves once consuming has started.
   */
  async start(): Promise<void> {
    if (this.loop) throw new Error('already started');
    this.stopping = false;
    this.killed = false;
    const db = new pg.Client({ connectionString: this.options.databaseUrl });
    await db.connect();
    let checkpoint: number;
    try {
      await this.migrate(db);
      // One instance at a time: skipping by checkpoint is exact only when delivery is in order.
      // A second copy waits here (a hot standby) until the first one's session ends.
      await db.query('SELECT pg_advisory_lock(hashtext($1))', [`${this.options.schema}.${this.durableName}`]);
      checkpoint = await this.readCheckpoint(db);
      const { natsUrl, natsCredentials = { kind: 'none' }, natsTlsCa } = this.options;
      const nc = await connect(natsConnectionOptions({ natsUrl, natsCredentials, natsTlsCa }, this.durableName));
      try {
        const jsm = await jetstreamManager(nc);
        await this.checkTrust(db, jsm);
        if (this.options.trust.kind === 'signatures' && this.options.trust.firstSignedSeq === undefined) this.firstSignedSeq = await this.activationPoint(nc);
        await this.ensureConsumer(jsm, checkpoint);
      } catch (error) {
        await nc.close();
        throw error;
      }
      this.nc = nc;
    } catch (error) {
      await db.end().catch(() => undefined);
      throw error;
    }
    this.db = db;
    this.log(`consuming ${this.filterSubject} from ${this.options.stream} as ${this.durableName}, checkpoint ${checkpoint}`);
    this.loop = this.run().finally(() => {
      this.loop = null;
    });
  }

  /** Finishes the message in hand (commit and ack), then disconnects. */
  async stop(): Promise<void> {
    this.stopping = true;
    this.batch?.stop();
    await this.loop;
    await this.disconnect(true);
  }

  /**
   * Simulates a crash: drops both connections at once, without acking anything in hand.
   * Safe to call from `afterCommit`, which is how the tests crash between COMMIT and ack.
   */
  async kill(): Promise<void> {
    this.killed = true;
    this.stopping = true;
    await this.disconnect(false);
  }

  /** The counts, by day then account. */
  async counts(): Promise<DayCount[]> {
    return this.withClient(async (db) => {
      const { rows } = await db.query(
        `SELECT workspace_id, account_id, to_char(day, 'YYYY-MM-DD') AS day, approved, auto_applied
           FROM ${this.table} ORDER BY day, account_id`,
      );
      return rows.map((r) => ({ ...r, approved: Number(r.approved), auto_applied: Number(r.auto_applied) }));
    });
  }

  /** Stream sequence of the last event counted (0 before the first); checking chains, of the last event believed, counted or not. */
  async checkpoint(): Promise<number> {
    return this.withClient((db) => this.readCheckpoint(db));
  }

  private async withClient<T>(work: (db: pg.Client) => Promise<T>): Promise<T> {
    // A separate connection: the consumer's own one may be inside a transaction.
    const db = new pg.Client({ connectionString: this.options.databaseUrl });
    await db.connect();
    try {
      await this.migrate(db);
      return await work(db);
    } finally {
      await db.end();
    }
  }

  private async migrate(db: pg.Client): Promise<void> {
    if (this.migrated) return;
    const statements = [
      `CREATE SCHEMA IF NOT EXISTS "${this.options.schema}"`,
      `CREATE TABLE IF NOT EXISTS ${this.table} (
         workspace_id text NOT NULL,
         account_id text NOT NULL,
         day date NOT NULL,
         approved integer NOT NULL DEFAULT 0,
         auto_applied integer NOT NULL DEFAULT 0,
         PRIMARY KEY (account_id, day))`,
      `CREATE TABLE IF NOT EXISTS ${this.checkpointTable} (
         consumer text PRIMARY KEY,
         last_seq bigint NOT NULL,
         updated_at timestamptz NOT NULL DEFAULT now())`,
      `CREATE TABLE IF NOT EXISTS ${this.chainTable} (
         consumer text NOT NULL,
         subject text NOT NULL,
         last_hash text NOT NULL,
         PRIMARY KEY (consumer, subject))`,
      // Tables made by a version without chain checks get the column that says how they were counted.
      `ALTER TABLE ${this.checkpointTable} ADD COLUMN IF NOT EXISTS trust text`,
    ];
    for (const statement of statements) await db.query(statement).catch(ignoreConcurrentCreate);
    const created = await db.query(`INSERT INTO ${this.checkpointTable} (consumer, last_seq) VALUES ($1, 0) ON CONFLICT DO NOTHING RETURNING consumer`, [this.durableName]);
    // A new checkpoint starts the chains afresh: heads left by an earlier life of this consumer name would refuse its events.
    if (created.rowCount === 1) await db.query(`DELETE FROM ${this.chainTable} WHERE consumer = $1`, [this.durableName]);
    this.migrated = true;
  }

  /**
   * Chains are only known from each subject's first event: a consumer that read the log without
   * following them (trust `nats-permissions`, or a version before signatures) cannot start
   * following them halfway through it. Checked under the advisory lock, so a standby started in
   * the other mode does not rewrite what the active copy is doing.
   */
  private async checkTrust(db: pg.Client, jsm: JetStreamManager): Promise<void> {
    const { rows } = await db.query(`SELECT last_seq, trust FROM ${this.checkpointTable} WHERE consumer = $1`, [this.durableName]);
    const recorded = rows[0] as { last_seq: string; trust: string | null };
    if (!this.keys) {
      await db.query(`UPDATE ${this.checkpointTable} SET trust = 'nats-permissions' WHERE consumer = $1`, [this.durableName]);
      return;
    }
    if (recorded.trust === 'signatures') return;
    // Without signatures, events it did not count moved nothing in Postgres: the durable consumer may be past them.
    const read = Number(recorded.last_seq) > 0 || recorded.trust === 'nats-permissions' || (await this.durableHasDelivered(jsm));
    if (read) {
      const literal = (text: string) => `'${text.replaceAll("'", "''")}'`;
      throw new Error(
        `consumer ${this.durableName} has read the log without checking signatures and chains; to count from the start with them, ` +
          `delete its rows (DELETE FROM ${this.table}; DELETE FROM ${this.checkpointTable} WHERE consumer = ${literal(this.durableName)}; ` +
          `DELETE FROM ${this.chainTable} WHERE consumer = ${literal(this.durableName)}) and its durable consumer, with a NATS user that may ` +
          `(nats consumer rm ${this.options.stream} ${JSON.stringify(this.durableName)}; the read-only analytics user may not), or keep ANALYTICS_TRUST=nats-permissions`,
      );
    }
    await db.query(`UPDATE ${this.checkpointTable} SET trust = 'signatures' WHERE consumer = $1`, [this.durableName]);
  }

  private async durableHasDelivered(jsm: JetStreamManager): Promise<boolean> {
    try {
      const info = await jsm.consumers.info(this.options.stream, this.durableName);
      return info.delivered.stream_seq > 0;
    } catch (error) {
      if (error instanceof JetStreamApiError && error.code === JetStreamApiCodes.ConsumerNotFound) return false;
      throw error;
    }
  }

  /**
   * The stream's activation point (docs/events.md, "Events from before signing"), when none was
   * configured: the signed record in the `<stream>_signing` bucket. Without one that verifies
   * (or that this NATS user may read), every event must be signed.
   */
  private async activationPoint(nc: NatsConnection): Promise<number> {
    try {
      const kv = await new Kvm(nc).open(signingBucketName(this.options.stream));
      const keys = [...this.keys!].map(([keyId, publicKey]) => ({ keyId, publicKey, status: 'current' as const }));
      const point = await readActivation(kv, this.options.stream, keys);
      if (point) return point.firstSignedSeq;
      this.log('no signed activation record: every event must be signed (set EVENT_FIRST_SIGNED_SEQ for a log with events from before signing)');
    } catch (error) {
      this.log(`the activation record could not be read (${error instanceof Error ? error.message : String(error)}): every event must be signed`);
    }
    return 0;
  }

  /** Checks the signature, reading the keys again first when the event names a key not among them (a rotation). */
  private async verify(event: ActionEvent, seq: number): Promise<void> {
    const refresh = this.options.trust.kind === 'signatures' ? this.options.trust.refreshKeys : undefined;
    if (refresh && typeof event.key_id === 'string' && !this.keys!.has(event.key_id)) {
      // At most one refresh every KEY_REFRESH_MS: events naming made-up keys cannot hammer the service.
      // A refresh that fails is a failure like any other: the message is retried, not refused.
      const wait = this.lastKeyRefresh + KEY_REFRESH_MS - Date.now();
      if (wait > 0) await sleep(wait);
      this.lastKeyRefresh = Date.now();
      this.keys = keysById(await refresh());
    }
    verifySignature(event, seq, this.keys!, this.firstSignedSeq);
  }

  private async readCheckpoint(db: pg.Client): Promise<number> {
    const { rows } = await db.query(`SELECT last_seq FROM ${this.checkpointTable} WHERE consumer = $1`, [this.durableName]);
    return rows.length === 0 ? 0 : Number(rows[0].last_seq);
  }

  /**
   * Creates the durable consumer, or brings it to this configuration. When it does not
   * exist (first start, or deleted), it starts right after the checkpoint: Postgres, not
   * the consumer, is the source of truth for what has been counted.
   */
  private async ensureConsumer(jsm: JetStreamManager, checkpoint: number): Promise<void> {
    const ackWait = (this.options.ackWaitMs ?? 30_000) * 1_000_000;
    try {
      const info = await jsm.consumers.info(this.options.stream, this.durableName);
      if (info.config.filter_subject !== this.filterSubject) {
        throw new Error(
          `consumer ${this.durableName} filters ${info.config.filter_subject}, not ${this.filterSubject}; delete it (nats consumer rm ${this.options.stream} ${this.durableName}) to recreate it from the checkpoint`,
        );
      }
      if (info.config.ack_wait !== ackWait || info.config.max_ack_pending !== 1) {
        await jsm.consumers.update(this.options.stream, this.durableName, { ack_wait: ackWait, max_ack_pending: 1 });
      }
    } catch (error) {
      if (!(error instanceof JetStreamApiError && error.code === JetStreamApiCodes.ConsumerNotFound)) throw error;
      await jsm.consumers.add(this.options.stream, {
        durable_name: this.durableName,
        description: 'examples/analytics-consumer: approvals and auto-applies per account per UTC day',
        filter_subject: this.filterSubject,
        ack_policy: AckPolicy.Explicit,
        ack_wait: ackWait,
        max_ack_pending: 1,
        max_deliver: -1,
        ...(checkpoint > 0 ? { deliver_policy: DeliverPolicy.StartSequence, opt_start_seq: checkpoint + 1 } : { deliver_policy: DeliverPolicy.All }),
      });
    }
  }

  private async run(): Promise<void> {
    const consumer = await jetstream(this.nc!).consumers.get(this.options.stream, this.durableName);
    while (!this.stopping) {
      let failed = false;
      try {
        const batch = await consumer.fetch({ max_messages: this.options.batchSize ?? 64, expires: 1000 });
        this.batch = batch;
        if (this.stopping) batch.stop();
        for await (const message of batch) {
          if (this.killed) return;
          try {
            await this.handle(message);
          } catch (error) {
            if (this.killed) return;
            if (error instanceof CorruptEventError || isDataError(error)) {
              // Deterministic: it would fail the same way forever. Skip it, say so, go on.
              if (!(error instanceof CorruptEventError)) await this.db!.query('ROLLBACK').catch(() => undefined);
              this.stats.corrupt++;
              this.log(`skipped: ${error instanceof CorruptEventError ? error.message : `stream sequence ${message.seq}: Postgres refused its data (${String((error as Error).message)})`}`);
              message.ack();
              continue;
            }
            failed = true;
            this.stats.failures++;
            this.stats.lastError = error instanceof Error ? error.message : String(error);
            this.log(`stream sequence ${message.seq} failed, retrying in a moment: ${this.stats.lastError}`);
            await this.db!.query('ROLLBACK').catch(() => undefined);
            // Stop pulling first, so the redelivery waits for the next fetch (after the pause).
            batch.stop();
            message.nak();
          }
          if (this.stopping) batch.stop();
        }
      } catch (error) {
        if (this.killed || this.stopping) return;
        failed = true;
        this.stats.lastError = error instanceof Error ? error.message : String(error);
        this.log(`fetch failed: ${this.stats.lastError}`);
      } finally {
        this.batch = null;
      }
      if (failed && !this.stopping) await sleep(this.options.retryDelayMs ?? 1000);
    }
  }

  private async handle(message: JsMsg): Promise<void> {
    const seq = message.seq;
    const headerType = message.headers?.get(TYPE_HEADER);
    if (!this.keys && headerType && !COUNTED_TYPES.has(headerType)) {
      // Uninteresting types are acked without parsing or touching the database. (Checking
      // chains, every event of an action's subject moves its chain: none can be skipped.)
      this.stats.ignored++;
      message.ack();
      return;
    }
    const event = parseActionEvent(message.data, message.subject, seq);
    if (this.keys) await this.verify(event, seq);
    const type = event.type;
    const count = COUNTED_TYPES.has(type) ? countOf(event, seq) : null;
    if (count === null && !this.keys) {
      this.stats.ignored++;
      message.ack();
      return;
    }
    const db = this.db!;
    const day = event.time.slice(0, 10); // `time` is ISO-8601 UTC
    const accountId = event.account_id ?? '_';
    await db.query('BEGIN');
    const checkpoint = await db.query(`SELECT last_seq FROM ${this.checkpointTable} WHERE consumer = $1 FOR UPDATE`, [this.durableName]);
    if (Number(checkpoint.rows[0].last_seq) >= seq) {
      await db.query('ROLLBACK');
      this.stats.skipped++;
      message.ack();
      return;
    }
    if (this.keys) {
      // A validly signed event that does not continue its subject's chain is the stored copy of
      // an older one published again (a replay), or one inserted: it counts nothing.
      const head = await db.query(`SELECT last_hash FROM ${this.chainTable} WHERE consumer = $1 AND subject = $2`, [this.durableName, message.subject]);
      const expected = head.rows.length === 0 ? GENESIS_HASH : (head.rows[0].last_hash as string);
      if (event.prev_hash !== expected) {
        await db.query('ROLLBACK');
        throw new CorruptEventError(seq, `chain-broken: ${chainBrokenDetail(String(event.prev_hash), expected)}`);
      }
      await db.query(
        `INSERT INTO ${this.chainTable} (consumer, subject, last_hash) VALUES ($1, $2, $3)
           ON CONFLICT (consumer, subject) DO UPDATE SET last_hash = EXCLUDED.last_hash`,
        [this.durableName, message.subject, event.hash],
      );
    }
    if (count !== null) {
      await db.query(
        `INSERT INTO ${this.table} AS t (workspace_id, account_id, day, approved, auto_applied) VALUES ($1, $2, $3, $4, $5)
           ON CONFLICT (account_id, day) DO UPDATE
           SET approved = t.approved + EXCLUDED.approved, auto_applied = t.auto_applied + EXCLUDED.auto_applied`,
        [event.workspace_id, accountId, day, count.approved, count.autoApplied],
      );
    }
    await db.query(`UPDATE ${this.checkpointTable} SET last_seq = $2, updated_at = now() WHERE consumer = $1`, [this.durableName, seq]);
    await db.query('COMMIT');
    if (count === null) {
      this.stats.ignored++;
    } else {
      this.stats.counted++;
      await this.options.afterCommit?.({ seq, type, accountId, day });
    }
    if (this.killed) return; // crashed after COMMIT: the ack is never sent
    message.ack();
  }

  private async disconnect(graceful: boolean): Promise<void> {
    const nc = this.nc;
    const db = this.db;
    this.nc = null;
    this.db = null;
    if (nc) await (graceful ? nc.drain() : nc.close()).catch(() => undefined);
    if (db) await db.end().catch(() => undefined);
  }

  private log(line: string): void {
    (this.options.log ?? (() => undefined))(line);
  }
}

/** Two processes creating the same schema or table at once: the loser's error is harmless. */
/**
 * Postgres refused the row for what the event holds (SQLSTATE class 22: a bad date, a
 * value out of range, an invalid byte): retrying cannot help, so it is skipped like a
 * corrupt message instead of holding the consumer back forever.
 */
function isDataError(error: unknown): boolean {
  const code = typeof error === 'object' && error !== null ? (error as { code?: unknown }).code : undefined;
  return typeof code === 'string' && code.startsWith('22');
}

function ignoreConcurrentCreate(error: unknown): void {
  const code = (error as { code?: string }).code;
  if (code !== '23505' && code !== '42P06' && code !== '42P07') throw error;
}

/** The counts as a fixed-width text table. */
export function formatCounts(rows: readonly DayCount[]): string {
  const header = ['day', 'account_id', 'approved', 'auto_applied'];
  const body = rows.map((r) => [r.day, r.account_id, String(r.approved), String(r.auto_applied)]);
  const widths = header.map((h, i) => Math.max(h.length, ...body.map((row) => row[i]!.length)));
  const line = (cells: readonly string[]) => cells.map((c, i) => (i >= 2 ? c.padStart(widths[i]!) : c.padEnd(widths[i]!))).join('  ');
  return [line(header), line(widths.map((w) => '-'.repeat(w))), ...body.map(line)].join('\n');
}

async function main(): Promise<void> {
  const consumer = await ApprovalsPerDayConsumer.fromEnv(process.env, { log: (line) => console.error(`[approvals-per-day] ${line}`) });
  await consumer.start();
  const intervalMs = Number(process.env.PRINT_INTERVAL_MS ?? 10_000);
  const print = async () => {
    const stats = consumer.getStats();
    console.log(`\n${new Date().toISOString()}  checkpoint ${await consumer.checkpoint()}  counted ${stats.counted}, skipped ${stats.skipped}, ignored ${stats.ignored}, corrupt ${stats.corrupt}`);
    console.log(formatCounts(await consumer.counts()));
  };
  await print();
  const timer = setInterval(() => void print().catch((error) => console.error(error)), intervalMs);
  const shutdown = async () => {
    clearInterval(timer);
    await consumer.stop();
    await print().catch(() => undefined);
    process.exit(0);
  };
  process.once('SIGINT', () => void shutdown());
  process.once('SIGTERM', () => void shutdown());
}

const entry = process.argv[1];
if (entry && realpathSync(entry) === realpathSync(fileURLToPath(import.meta.url))) {
  main().catch((error) => {
    console.error(error instanceof Error ? error.message : error);
    process.exit(1);
  });
}
