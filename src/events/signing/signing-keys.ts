import { createHash, createPrivateKey, createPublicKey, generateKeyPairSync, type KeyObject } from 'node:crypto';
import { chmodSync, existsSync, mkdirSync, readdirSync, readFileSync, statSync, writeFileSync } from 'node:fs';
import { dirname, join } from 'node:path';

/** The only signature algorithm; named in the key directory so a later one can be added beside it. */
export const SIGNING_ALGORITHM = 'Ed25519' as const;

/** Where a key is generated when EVENT_SIGNING_KEY_FILE is unset (relative to the working directory). */
export const DEFAULT_SIGNING_KEY_FILE = '.adsagent/event-signing-key.pem';

/** A key file that is missing, unreadable or not the kind of key it must be. One problem per start. */
export class SigningKeyError extends Error {
  constructor(message: string, options?: ErrorOptions) {
    super(message, options);
    this.name = 'SigningKeyError';
  }
}

/** A public key the service believes: the current one or a retired one. */
export interface KnownPublicKey {
  readonly keyId: string;
  readonly publicKey: KeyObject;
  readonly status: 'current' | 'retired';
}

/** The 32 raw bytes of an Ed25519 public key (RFC 8032), as JWK `x` carries them. */
export function rawPublicKey(publicKey: KeyObject): Buffer {
  const jwk = publicKey.export({ format: 'jwk' });
  if (jwk.kty !== 'OKP' || jwk.crv !== 'Ed25519' || typeof jwk.x !== 'string') throw new SigningKeyError('not an Ed25519 public key');
  return Buffer.from(jwk.x, 'base64url');
}

/**
 * Key id: the first 16 hex characters (64 bits) of SHA-256 over the raw 32-byte public key.
 * Any auditor can recompute it from the PEM; it names a key, it does not authenticate one.
 */
export function keyIdOf(publicKey: KeyObject): string {
  return createHash('sha256').update(rawPublicKey(publicKey)).digest('hex').slice(0, 16);
}

function assertEd25519(key: KeyObject, source: string): void {
  if (key.asymmetricKeyType !== 'ed25519') throw new SigningKeyError(`${source} holds a ${key.asymmetricKeyType ?? key.type} key, not Ed25519`);
}

/** Reads a PKCS#8 PEM Ed25519 private key. @throws SigningKeyError */
export function readPrivateKeyFile(path: string): KeyObject {
  let pem: string;
  try {
    pem = readFileSync(path, 'utf8');
  } catch (error) {
    throw new SigningKeyError(`event signing key ${path} cannot be read: ${(error as NodeJS.ErrnoException).code ?? String(error)}`, { cause: error });
  }
  let key: KeyObject;
  try {
    key = createPrivateKey({ key: pem, format: 'pem' });
  } catch (error) {
    throw new SigningKeyError(`event signing key ${path} is not a PEM private key`, { cause: error });
  }
  assertEd25519(key, path);
  return key;
}

/**
 * The signing key of this process: EVENT_SIGNING_KEY_FILE when set (it must exist: a typo
 * must not silently start a new key), otherwise DEFAULT_SIGNING_KEY_FILE under `cwd`,
 * generated on first use with mode 0600 when `create` (the service; the CLI never makes one:
 * events it signed with a key of its own would be refused by the service as untrusted, and a
 * reader would take the service's events for forgeries).
 *
 * @throws SigningKeyError
 */
export function loadOrCreatePrivateKey(
  configuredFile: string | undefined,
  cwd: string,
  options: { readonly create?: boolean } = {},
): { key: KeyObject; path: string; generated: boolean } {
  if (configuredFile) return { key: readPrivateKeyFile(configuredFile), path: configuredFile, generated: false };
  const path = join(cwd, DEFAULT_SIGNING_KEY_FILE);
  if (existsSync(path)) return { key: readPrivateKeyFile(path), path, generated: false };
  if (options.create === false) {
    throw new SigningKeyError(
      `no event signing key at ${path}: the service makes it at its first start in the directory it runs from; run adsagent from that directory, or set EVENT_SIGNING_KEY_FILE to the service's key file`,
    );
  }
  const { privateKey } = generateKeyPairSync('ed25519');
  try {
    mkdirSync(dirname(path), { recursive: true, mode: 0o700 });
  } catch (error) {
    throw new SigningKeyError(`cannot create ${dirname(path)} for a new event signing key (${(error as NodeJS.ErrnoException).code ?? String(error)}): start from a directory this user may write, or set EVENT_SIGNING_KEY_FILE to a key file`, { cause: error });
  }
  // 'wx': two processes starting at once must not both write; the loser reads the winner's key.
  try {
    writeFileSync(path, privateKey.export({ format: 'pem', type: 'pkcs8' }), { mode: 0o600, flag: 'wx' });
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code === 'EEXIST') return { key: readPrivateKeyFile(path), path, generated: false };
    throw new SigningKeyError(`cannot write a new event signing key to ${path}: ${String(error)}`, { cause: error });
  }
  chmodSync(path, 0o600);
  return { key: privateKey, path, generated: true };
}

const PEM_BLOCK = /-----BEGIN ([A-Z ]+)-----[\s\S]+?-----END \1-----/g;

/**
 * Every public key in a PEM text (several blocks may follow each other). A private key
 * block is refused: a file meant for auditors must not carry one.
 * @throws SigningKeyError
 */
export function parsePublicKeys(pem: string, source: string): KeyObject[] {
  const keys: KeyObject[] = [];
  for (const match of pem.matchAll(PEM_BLOCK)) {
    if (match[1] !== 'PUBLIC KEY') throw new SigningKeyError(`${source} holds a '${match[1]}' block; only PUBLIC KEY blocks belong there`);
    let key: KeyObject;
    try {
      key = createPublicKey({ key: match[0], format: 'pem' });
    } catch (error) {
      throw new SigningKeyError(`${source} has a PUBLIC KEY block that does not parse`, { cause: error });
    }
    assertEd25519(key, source);
    keys.push(key);
  }
  if (keys.length === 0) throw new SigningKeyError(`${source} holds no PEM public key`);
  return keys;
}

/** Public keys from a PEM file, or from every `*.pem` file of a directory. @throws SigningKeyError */
export function readPublicKeys(path: string): KeyObject[] {
  let files: string[];
  try {
    files = statSync(path).isDirectory()
      ? readdirSync(path).filter((name) => name.endsWith('.pem')).sort().map((name) => join(path, name))
      : [path];
  } catch (error) {
    throw new SigningKeyError(`public key path ${path} cannot be read: ${(error as NodeJS.ErrnoException).code ?? String(error)}`, { cause: error });
  }
  if (files.length === 0) throw new SigningKeyError(`directory ${path} holds no .pem file`);
  return files.flatMap((file) => {
    let text: string;
    try {
      text = readFileSync(file, 'utf8');
    } catch (error) {
      throw new SigningKeyError(`public key file ${file} cannot be read`, { cause: error });
    }
    return parsePublicKeys(text, file);
  });
}

/** The keys a process believes, current first; a retired key equal to the current one is dropped. */
export function knownKeys(current: KeyObject | undefined, retired: readonly KeyObject[]): KnownPublicKey[] {
  const known = new Map<string, KnownPublicKey>();
  if (current) known.set(keyIdOf(current), { keyId: keyIdOf(current), publicKey: current, status: 'current' });
  for (const key of retired) {
    const keyId = keyIdOf(key);
    if (!known.has(keyId)) known.set(keyId, { keyId, publicKey: key, status: 'retired' });
  }
  return [...known.values()];
}

export function publicKeyPem(key: KeyObject): string {
  return key.export({ format: 'pem', type: 'spki' }).toString();
}
