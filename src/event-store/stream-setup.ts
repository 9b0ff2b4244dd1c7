import {
  DiscardPolicy,
  JetStreamApiCodes,
  JetStreamApiError,
  RetentionPolicy,
  StorageType,
  type JetStreamManager,
  type StreamConfig,
} from '@nats-io/jetstream';
import { isPermissionViolation } from './nats-unavailable.ts';

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
    // Set, not left to the server's defaults, so that a stream someone made with other values
    // before the service's first start is seen: one event per subject kept, or a `Nats-Rollup`
    // header honoured, would drop history; a sealed stream takes no append.
    max_msgs_per_subject: -1,
    allow_rollup_hdrs: false,
    sealed: false,
    max_msg_size: 1024 * 1024,
    num_replicas: options.replicas,
    duplicate_window: DUPLICATE_WINDOW_NS,
    deny_delete: true,
    deny_purge: true,
    allow_direct: true,
  };
}

/**
 * The event stream is not one the service may use as it stands, and the service will not make
 * it so itself: the message says what the operator does. Startup prints it as one line.
 */
export class EventStreamSetupError extends Error {
  readonly stream: string;

  constructor(stream: string, message: string, options?: { cause?: unknown }) {
    super(message, options);
    this.name = 'EventStreamSetupError';
    this.stream = stream;
  }
}

/**
 * The event stream exists with another configuration than the service's, and the service's
 * NATS user may not change it: deploy/nats/auth.conf denies it `$JS.API.STREAM.UPDATE` on the
 * event stream, since an update that shrinks the limits (`max_msgs: 1`) makes the server drop
 * the events above them, which `deny_delete` and `deny_purge` do not prevent.
 */
export class EventStreamConfigurationError extends EventStreamSetupError {
  /** Each difference as `field: stored → wanted`. */
  readonly differences: readonly string[];

  constructor(stream: string, differences: readonly string[], options?: { cause?: unknown }) {
    super(
      stream,
      `the event stream ${stream} differs from the service's configuration (${differences.join('; ')}) and this NATS user may not update it ` +
        `(deploy/nats/auth.conf, so that a stolen service password cannot shrink its limits and drop events); ` +
        `update it once with a user allowed $JS.API.STREAM.UPDATE.${stream}, or set the service's configuration to match (docs/operations.md, "Changing the event stream")`,
      options,
    );
    this.name = 'EventStreamConfigurationError';
    this.differences = differences;
  }
}

/**
 * Settings the service never gives its event stream, which an update cannot take away: a
 * `republish` turns every append into a publish elsewhere (an API request such as
 * `$JS.API.STREAM.DELETE.<stream>` included, made with the server's own rights), and a mirror
 * or sources fill the stream from somewhere else. A stream made with one (before the service's
 * first start, by anyone with the service's password) must be made again.
 */
const FOREIGN_STREAM_SETTINGS = ['republish', 'mirror', 'sources'] as const;

function isSet(value: unknown): boolean {
  return value !== undefined && value !== null && !(Array.isArray(value) && value.length === 0);
}

/** The event stream has a setting the service never gives it and an update cannot remove ({@link FOREIGN_STREAM_SETTINGS}). */
export class UnsafeEventStreamError extends EventStreamSetupError {
  readonly settings: readonly string[];

  constructor(stream: string, settings: readonly string[]) {
    super(
      stream,
      `the event stream ${stream} has ${settings.join(', ')} set, which the service never sets and an update cannot remove ` +
        `(a republish could turn its appends into requests such as deleting the stream): the service will not use it; ` +
        `make the stream again without it, keeping its messages (docs/operations.md, "Changing the event stream")`,
    );
    this.name = 'UnsafeEventStreamError';
    this.settings = settings;
  }
}

/**
 * Creates the stream, or brings an existing one to the configuration; safe to call at every
 * start. A stream already configured so is left alone (no update is sent: the shipped NATS
 * permissions refuse the service one).
 * @throws EventStreamConfigurationError when it differs and this user may not update it
 * @throws UnsafeEventStreamError when it has a setting the service never gives it
 */
export async function ensureEventStream(jsm: JetStreamManager, options: EventStreamOptions): Promise<void> {
  const config = eventStreamConfig(options);
  let stored: StreamConfig;
  try {
    stored = (await jsm.streams.info(options.name)).config;
  } catch (error) {
    if (error instanceof JetStreamApiError && error.code === JetStreamApiCodes.StreamNotFound) {
      await jsm.streams.add(config);
      return;
    }
    throw error;
  }
  const foreign = FOREIGN_STREAM_SETTINGS.filter((setting) => isSet(stored[setting]));
  if (foreign.length > 0) throw new UnsafeEventStreamError(options.name, foreign);
  const { name: _name, storage: _storage, ...updatable } = config;
  const differences = streamConfigDifferences(stored, updatable);
  if (differences.length === 0) return;
  try {
    await jsm.streams.update(options.name, updatable);
  } catch (error) {
    if (isPermissionViolation(error)) throw new EventStreamConfigurationError(options.name, differences, { cause: error });
    throw error;
  }
}

/** The fields of `wanted` the stored configuration holds otherwise, as `field: stored → wanted`. */
export function streamConfigDifferences(stored: Partial<StreamConfig>, wanted: Partial<StreamConfig>): string[] {
  const differences: string[] = [];
  for (const [field, value] of Object.entries(wanted)) {
    const have: unknown = stored[field as keyof StreamConfig];
    if (JSON.stringify(have) !== JSON.stringify(value)) differences.push(`${field}: ${JSON.stringify(have)} → ${JSON.stringify(value)}`);
  }
  return differences;
}
