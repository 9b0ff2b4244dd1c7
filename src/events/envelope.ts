/**
 * The envelope every event travels in. The envelope is the public contract for auditors
 * and analytics consumers (docs/events.md); `data` is typed per event type in catalogue.ts.
 */
export const ACTOR_KINDS = ['api_key', 'worker', 'operator', 'system'] as const;
export type ActorKind = (typeof ACTOR_KINDS)[number];

export interface Actor {
  readonly kind: ActorKind;
  /** API key id, worker id, operator name or component name. Never a secret. */
  readonly id: string;
}

export const AGGREGATE_TYPES = ['workspace', 'key', 'account', 'run', 'action', 'quota'] as const;
export type AggregateType = (typeof AGGREGATE_TYPES)[number];

export interface AggregateRef {
  readonly type: AggregateType;
  readonly id: string;
}

export interface EventEnvelope<TType extends string = string, TData = unknown> {
  /** UUID; also the `Nats-Msg-Id`, so a retried publish is stored once. */
  readonly id: string;
  readonly type: TType;
  /** Schema version of `data` for this type. */
  readonly version: number;
  /** ISO-8601 UTC time the event was decided. */
  readonly time: string;
  readonly workspace_id: string;
  /** Null for workspace-level aggregates (workspaces, keys). */
  readonly account_id: string | null;
  readonly aggregate: AggregateRef;
  readonly actor: Actor;
  /** Run id or request id that caused this event; joins a run's events across aggregates. */
  readonly correlation_id: string;
  readonly data: TData;
  /** Hash of the previous event of the same aggregate; 64 zeros for the first. */
  readonly prev_hash: string;
  /** SHA-256 over prev_hash and the canonical JSON of every other field but `signature`. */
  readonly hash: string;
  /** Id of the Ed25519 key that signed the event; absent on legacy events (docs/events.md, "Signatures"). */
  readonly key_id?: string;
  /** Ed25519 signature (base64url) over the canonical JSON of the envelope without `signature`. */
  readonly signature?: string;
}

/** An envelope before the store has chained it into its aggregate. */
export type UnsealedEvent<TType extends string = string, TData = unknown> = Omit<
  EventEnvelope<TType, TData>,
  'prev_hash' | 'hash' | 'key_id' | 'signature'
>;

export const GENESIS_HASH = '0'.repeat(64);
