import {
  DiscardPolicy,
  JetStreamApiCodes,
  JetStreamApiError,
  RetentionPolicy,
  StorageType,
  type JetStreamManager,
  type StreamConfig,
} from '@nats-io/jetstream';

export interface EventStreamOptions {
  readonly name: string;
  readonly subjects: readonly string[];
  readonly replicas: number;
}

/** How long a retried publish with the same Nats-Msg-Id is recognised as a duplicate. */
export const DUPLICATE_WINDOW_NS = 10 * 60 * 1_000_000_000;

/**
 * The event log's stream. Durability: file storage, never discards (limits retention
 * with no limits, `discard: new` so a full disk rejects a write instead of dropping old
 * events), message deletion and purge denied so history cannot be rewritten through the
 * API. Replicas from EVENT_STREAM_REPLICAS (3 on the production cluster: a publish is
 * acknowledged once a quorum stored it). docs/operations.md says what each setup survives.
 */
export function eventStreamConfig(options: EventStreamOptions): Partial<StreamConfig> & { name: string } {
  return {
    name: options.name,
    subjects: [...options.subjects],
    storage: StorageType.File,
    retention: RetentionPolicy.Limits,
    discard: DiscardPolicy.New,
    max_msgs: -1,
    max_bytes: -1,
    max_age: 0,
    max_msg_size: 1024 * 1024,
    num_replicas: options.replicas,
    duplicate_window: DUPLICATE_WINDOW_NS,
    deny_delete: true,
    deny_purge: true,
    allow_direct: true,
  };
}

/** Creates the stream, or brings an existing one to the configuration; safe to call at every start. */
export async function ensureEventStream(jsm: JetStreamManager, options: EventStreamOptions): Promise<void> {
  const config = eventStreamConfig(options);
  try {
    await jsm.streams.info(options.name);
  } catch (error) {
    if (error instanceof JetStreamApiError && error.code === JetStreamApiCodes.StreamNotFound) {
      await jsm.streams.add(config);
      return;
    }
    throw error;
  }
  const { name: _name, storage: _storage, ...updatable } = config;
  await jsm.streams.update(options.name, updatable);
}
