import { Kvm, type KV } from '@nats-io/kv';
import type { JetStreamClient } from '@nats-io/jetstream';
import type { NatsConnection } from '@nats-io/nats-core';
import type { JetStreamEventStore as EventStore } from '../../event-store/jetstream-event-store.ts';
import { EventSigner } from './event-signer.ts';
import { EventVerifier } from './event-verifier.ts';
import { ensureActivation, keyActivationTimes, readActivation, recordKeyFirstUse } from './signing-activation.ts';
import { describePublicKeys, type PublicKeyDescription } from './signing-key-directory.ts';
import { knownKeys, loadOrCreatePrivateKey, readPublicKeys, type KnownPublicKey } from './signing-keys.ts';

export interface SigningKeyConfig {
  readonly eventSigningKeyFile: string | undefined;
  readonly eventSigningRetiredPublicKeys: string | undefined;
}

/** The keys of a process: the signer (absent for a read-only verifier) and every key it believes. */
export interface LoadedSigningKeys {
  readonly signer: EventSigner | undefined;
  readonly keys: readonly KnownPublicKey[];
}

/**
 * Loads the signing key (generating the local development key when none is configured,
 * announced through `notice` in one line) and the retired public keys.
 * @throws SigningKeyError
 */
export function loadSigningKeys(config: SigningKeyConfig, cwd: string, notice: (message: string) => void, options: { readonly create?: boolean } = {}): LoadedSigningKeys {
  const { key, path, generated } = loadOrCreatePrivateKey(config.eventSigningKeyFile, cwd, options);
  const signer = new EventSigner(key);
  if (generated) notice(`generated a new event signing key ${signer.keyId} in ${path} (development only: production must set EVENT_SIGNING_KEY_FILE)`);
  const retired = config.eventSigningRetiredPublicKeys ? readPublicKeys(config.eventSigningRetiredPublicKeys) : [];
  return { signer, keys: knownKeys(signer.publicKey, retired) };
}

/** Public keys only: what an offline auditor has (`audit verify --public-key`). */
export function publicKeysOnly(paths: readonly string[]): LoadedSigningKeys {
  return { signer: undefined, keys: knownKeys(undefined, paths.flatMap((path) => readPublicKeys(path))) };
}

export function signingBucketName(stream: string): string {
  return `${stream}_signing`;
}

/** Signing as the rest of the process sees it. */
export interface EventSigning {
  readonly signer: EventSigner | undefined;
  readonly keys: readonly KnownPublicKey[];
  /** Believes current and retired keys; legacy below the stream's activation point. */
  readonly verifier: EventVerifier;
  /** The public keys as served at GET /api/v1/event-signing-keys. */
  describeKeys(): Promise<PublicKeyDescription[]>;
  /**
   * The key signing began with, when the stream's activation record named one this process does
   * not hold (and was replaced at this start): every event signed by it is refused as untrusted.
   * Null otherwise.
   */
  readonly foreignActivationKeyId: string | null;
}

/**
 * Opens the `<stream>_signing` bucket and settles the activation point. A process with a
 * signer writes the activation record when missing; a read-only one takes it when present
 * and verifiable, else learns it from the first signed event it reads (audit from sequence 1).
 */
export async function openEventSigning(options: {
  /** A JetStream client carries the configured request timeout (NATS_REQUEST_TIMEOUT_MS); a connection gets nats.js's 5 s. */
  readonly nc: NatsConnection | JetStreamClient;
  readonly store: EventStore;
  readonly stream: string;
  readonly filter: string;
  readonly replicas: number;
  readonly loaded: LoadedSigningKeys;
}): Promise<EventSigning> {
  const { signer, keys } = options.loaded;
  const bucket = signingBucketName(options.stream);
  let kv: KV | undefined;
  let activation;
  let foreignActivationKeyId: string | null = null;
  if (signer) {
    kv = await new Kvm(options.nc).create(bucket, { history: 5, replicas: options.replicas });
    activation = await ensureActivation({
      kv, store: options.store, stream: options.stream, filter: options.filter, keys, signer,
      onForeignRecord: (keyId) => (foreignActivationKeyId = keyId),
    });
    await recordKeyFirstUse(kv, signer.keyId, new Date());
  } else {
    kv = await new Kvm(options.nc).open(bucket).catch(() => undefined);
    activation = kv ? await readActivation(kv, options.stream, keys).catch(() => null) : null;
  }
  const verifier = new EventVerifier(keys, activation);
  // What this process signs needs no Ed25519 verification when its own readers admit it.
  if (signer) signer.onSigned((signature, bytes) => verifier.rememberSignedHere(signer.keyId, signature, bytes));
  return {
    signer,
    keys,
    verifier,
    foreignActivationKeyId,
    describeKeys: async () => {
      const times = kv ? await keyActivationTimes(kv, keys.map((k) => k.keyId)).catch(() => new Map<string, string>()) : new Map<string, string>();
      return describePublicKeys(keys, times);
    },
  };
}
