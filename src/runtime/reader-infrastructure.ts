import { jetstream, jetstreamManager, JetStreamApiCodes, JetStreamApiError, type JetStreamClient, type JetStreamManager } from '@nats-io/jetstream';
import type { NatsConnection } from '@nats-io/nats-core';
import type { Config } from '../config/config.ts';
import { openDatabase, type DatabaseHandle } from '../db/database.ts';
import { JetStreamEventStore } from '../event-store/jetstream-event-store.ts';
import { connectNats } from '../event-store/nats-connection.ts';
import { EventStreamSetupError } from '../event-store/stream-setup.ts';
import { Subjects } from '../event-store/subjects.ts';
import { loadSigningKeys, openEventSigning, publicKeysOnly, type EventSigning } from '../events/signing/event-signing.ts';

/**
 * What a reader of the event log needs (`audit verify`, `events tail`), opened without
 * changing anything: no stream set-up, no snapshot bucket, no migration, no signer, no
 * signing record written. So an auditor with read access only (deploy/nats/auth.conf's
 * `analytics` user, and no database at all for an offline audit) can run them.
 */
export interface ReaderInfrastructure {
  readonly config: Config;
  readonly nc: NatsConnection;
  readonly js: JetStreamClient;
  readonly jsm: JetStreamManager;
  /** Reads only: it has no signer, so an append would be refused as unsigned. */
  readonly store: JetStreamEventStore;
  readonly subjects: Subjects;
  /** The keys this reader believes and their verifier (no signer). */
  readonly signing: EventSigning;
  /** Present when asked for: the read models an operator's audit compares with the log. */
  readonly database: DatabaseHandle | undefined;
  close(): Promise<void>;
}

export interface ReaderOptions {
  /** Believe these public key files only (an offline audit); else the service's keys, without its private key's signing. */
  readonly publicKeyFiles?: readonly string[];
  /** Open the service's database too (no migration). */
  readonly database: boolean;
  /** Where the one-line notice of a newly generated development key goes. */
  readonly notice?: (message: string) => void;
}

/**
 * Connects to NATS (and, when asked, Postgres) for reading the log.
 *
 * @throws NatsUnreachableError | PostgresUnreachableError | SigningKeyError | EventStreamSetupError (no such stream)
 */
export async function openReaderInfrastructure(config: Config, clientName: string, options: ReaderOptions): Promise<ReaderInfrastructure> {
  const keys = options.publicKeyFiles
    ? publicKeysOnly(options.publicKeyFiles).keys
    : loadSigningKeys(config, process.cwd(), options.notice ?? ((message) => process.stderr.write(`${message}\n`)), { create: false }).keys;
  const nc = await connectNats(config, clientName);
  let database: DatabaseHandle | undefined;
  try {
    const jsm = await jetstreamManager(nc, { timeout: config.natsRequestTimeoutMs });
    const js = jetstream(nc, { timeout: config.natsRequestTimeoutMs });
    await assertStreamExists(jsm, config.eventStream);
    const subjects = new Subjects(config.subjectPrefix);
    const store = new JetStreamEventStore(js, jsm, config.eventStream);
    // Without a signer, openEventSigning only reads the activation record (when this user may).
    const signing = await openEventSigning({ nc: js, store, stream: config.eventStream, filter: subjects.all, replicas: config.streamReplicas, loaded: { signer: undefined, keys } });
    store.admission.useAuthenticity(signing.verifier);
    if (options.database) database = await openDatabase(config.databaseUrl, config.databaseSchema, 4, { createSchema: false });
    const opened = database;
    return {
      config,
      nc,
      js,
      jsm,
      store,
      subjects,
      signing,
      database: opened,
      close: async () => {
        await nc.drain().catch(() => undefined);
        await opened?.close();
      },
    };
  } catch (error) {
    await nc.close().catch(() => undefined);
    await database?.close().catch(() => undefined);
    throw error;
  }
}

async function assertStreamExists(jsm: JetStreamManager, stream: string): Promise<void> {
  try {
    await jsm.streams.info(stream);
  } catch (error) {
    if (error instanceof JetStreamApiError && error.code === JetStreamApiCodes.StreamNotFound) {
      throw new EventStreamSetupError(stream, `the event stream ${stream} does not exist on this NATS server: check EVENT_STREAM and NATS_URL (the service creates it at its first start)`);
    }
    throw error;
  }
}
