import { jetstream, jetstreamManager, type JetStreamClient, type JetStreamManager } from '@nats-io/jetstream';
import type { NatsConnection } from '@nats-io/nats-core';
import { Commands } from '../../commands/command-bus.ts';
import { OUTAGE_RIDE_THROUGH_MS } from '../../commands/shared/handle.ts';
import { Aggregates } from '../../commands/shared/aggregates.ts';
import type { Config } from '../config/config.ts';
import { openDatabase, type DatabaseHandle } from '../db/database.ts';
import { migrateToLatest } from '../db/migrator.ts';
import { duringStartup } from '../event-store/nats-retry.ts';
import type { ReadStall } from '../event-store/ordered-read.ts';
import { JetStreamEventStore } from '../event-store/jetstream-event-store.ts';
import { connectNats } from '../event-store/nats-connection.ts';
import { SnapshotStore } from '../event-store/snapshot-store.ts';
import { ensureEventStream } from '../event-store/stream-setup.ts';
import { Subjects } from '../event-store/subjects.ts';
import { loadSigningKeys, openEventSigning, publicKeysOnly, type EventSigning } from '../events/signing/event-signing.ts';

/** Connections and stores every role shares; opened once per process. */
export interface Infrastructure {
  readonly config: Config;
  readonly nc: NatsConnection;
  readonly js: JetStreamClient;
  readonly jsm: JetStreamManager;
  readonly store: JetStreamEventStore;
  readonly subjects: Subjects;
  /** Decision state of every aggregate, for the queries (commands/queries.ts) and the command side. */
  readonly aggregates: Aggregates;
  /** The one way state changes (commands/command-bus.ts). */
  readonly commands: Commands;
  readonly database: DatabaseHandle;
  /** The signer of every append, the keys this process believes and their verifier. */
  readonly signing: EventSigning;
  close(): Promise<void>;
}

/**
 * Connects to NATS and Postgres, creates or updates the stream, the snapshot bucket and
 * the schema (migrations). Idempotent, so every process — service or CLI — can call it.
 *
 * @throws NatsUnreachableError | PostgresUnreachableError with a one-line explanation.
 */
export interface InfrastructureOptions {
  /** Where the one-line notice of a newly generated signing key goes. */
  readonly notice?: (message: string) => void;
  /** Verify with these public key files only and never touch the private key (offline audit); this process cannot append. */
  readonly publicKeyFiles?: readonly string[];
  /** Told when a read of the stream stalled (its consumer's server went away) and went on with a new consumer. */
  readonly onReadStall?: (stall: ReadStall) => void;
  /** Make a development signing key when there is none (default true: the service; the CLI never does). */
  readonly createSigningKey?: boolean;
}

export async function openInfrastructure(config: Config, clientName: string, options: InfrastructureOptions = {}): Promise<Infrastructure> {
  // Key files first: a missing or wrong key is a configuration problem, reported before any connection.
  const loaded = options.publicKeyFiles
    ? publicKeysOnly(options.publicKeyFiles)
    : loadSigningKeys(config, process.cwd(), options.notice ?? ((message) => process.stderr.write(`${message}\n`)), { create: options.createSigningKey ?? true });
  const nc = await connectNats(config, clientName);
  let database: DatabaseHandle | undefined;
  try {
    database = await openDatabase(config.databaseUrl, config.databaseSchema);
    await migrateToLatest(database.db, config.databaseSchema);
    const jsm = await jetstreamManager(nc, { timeout: config.natsRequestTimeoutMs });
    const js = jetstream(nc, { timeout: config.natsRequestTimeoutMs });
    const subjects = new Subjects(config.subjectPrefix);
    // Each step is idempotent, and a cluster under load or electing a leader may not answer at once.
    await duringStartup(() => ensureEventStream(jsm, { name: config.eventStream, subjects: [subjects.all], replicas: config.streamReplicas }));
    const snapshots = await duringStartup(() => SnapshotStore.open(js, `${config.eventStream}_snapshots`, config.streamReplicas, loaded.signer));
    const store = new JetStreamEventStore(js, jsm, config.eventStream, { signer: loaded.signer, onReadStall: options.onReadStall });
    const signing = await duringStartup(() => openEventSigning({ nc: js, store, stream: config.eventStream, filter: subjects.all, replicas: config.streamReplicas, loaded }));
    // From here on every reader of this store believes only events signed by a known key
    // (or legacy events from before signing); anything else is quarantined or marked.
    store.admission.useAuthenticity(signing.verifier);
    // Background work (workers, the policy, the CLI) waits out a short event-log outage such as
    // a cluster's leader election; the API answers at once instead (its own view, service.ts).
    const aggregates = new Aggregates(store, subjects, snapshots, { outageRideThroughMs: OUTAGE_RIDE_THROUGH_MS });
    const commands = new Commands(aggregates);
    const opened = database;
    return {
      config,
      nc,
      js,
      jsm,
      store,
      subjects,
      aggregates,
      commands,
      database: opened,
      signing,
      close: async () => {
        await nc.drain().catch(() => undefined);
        await opened.close();
      },
    };
  } catch (error) {
    await nc.close().catch(() => undefined);
    await database?.close().catch(() => undefined);
    throw error;
  }
}
