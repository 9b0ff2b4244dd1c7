import { readFileSync } from 'node:fs';
import { AuthorizationError, credsAuthenticator } from '@nats-io/nats-core';
import { connect, type NatsConnection, type NodeConnectionOptions } from '@nats-io/transport-node';
import type { Config } from '../config/config.ts';
import { redactSecrets, redactUrls } from '../log/redact-url.ts';

/** Where and as whom to connect: the part of the configuration every NATS client needs. */
export type NatsConnectionSettings = Pick<Config, 'natsUrl' | 'natsCredentials' | 'natsTlsCa'>;

/** Why the first connection failed; each reason tells the operator a different thing to fix. */
export const NATS_CONNECT_FAILURES = ['unreachable', 'authentication', 'tls'] as const;
export type NatsConnectFailure = (typeof NATS_CONNECT_FAILURES)[number];

const ADVICE: Record<NatsConnectFailure, string> = {
  unreachable: 'start it with `bash deploy/ensure-services.sh` or set NATS_URL',
  authentication: 'check NATS_USER/NATS_PASSWORD, NATS_TOKEN or NATS_CREDS against the server (deploy/nats/auth.conf)',
  tls: 'set NATS_TLS_CA to the CA certificate that signed the server certificate (deploy/make-nats-tls.sh writes deploy/nats/tls/ca.pem)',
};

/**
 * What to fix. With NATS_TLS_CA already set, "set NATS_TLS_CA" is no advice: either the
 * server has no TLS (the URL points at a plain listener) or that CA did not sign its certificate.
 */
function adviceFor(reason: NatsConnectFailure, detail: string, tlsCa: string | undefined): string {
  if (reason !== 'tls' || !tlsCa) return ADVICE[reason];
  if (/does not support 'tls'/.test(detail)) {
    return `the server at this URL has no TLS while NATS_TLS_CA is set (${tlsCa}): point NATS_URL at its TLS listener, or unset NATS_TLS_CA for a server without TLS`;
  }
  return `NATS_TLS_CA (${tlsCa}) did not verify the server's certificate: set it to the CA certificate that signed it (deploy/make-nats-tls.sh writes deploy/nats/tls/ca.pem)`;
}

/** The first connection to NATS failed. The message is one line, free of credentials. */
export class NatsUnreachableError extends Error {
  readonly url: string;

  readonly reason: NatsConnectFailure;

  constructor(reason: NatsConnectFailure, url: string, cause: unknown, secrets: readonly (string | undefined)[] = [], tlsCa?: string) {
    const detail = redactSecrets(redactUrls(describeCause(cause)), secrets);
    const safeUrl = redactSecrets(redactUrls(url), secrets);
    const what = reason === 'unreachable' ? 'cannot reach NATS' : reason === 'authentication' ? 'NATS refused the credentials' : 'TLS to NATS failed';
    super(`${what} at ${safeUrl} (${detail}); ${adviceFor(reason, detail, tlsCa)}`, { cause });
    this.reason = reason;
    this.name = 'NatsUnreachableError';
    this.url = safeUrl;
  }
}

/**
 * Connects with unlimited reconnects: after the first connection, an outage of the NATS
 * server pauses work instead of ending the process.
 */
export async function connectNats(settings: NatsConnectionSettings, name: string): Promise<NatsConnection> {
  let options: NodeConnectionOptions;
  try {
    options = natsConnectionOptions(settings, name);
  } catch (error) {
    throw new NatsUnreachableError('authentication', settings.natsUrl, error, secretsOf(settings));
  }
  try {
    // noAsyncTraces: nats.js otherwise builds an Error per request to keep the caller's stack for a
    // later timeout; on the hot paths (a direct get and an append per tool call) that is most of
    // its cost. Failures are still typed (nats-unavailable.ts classifies them by class).
    return await connect({ ...options, maxReconnectAttempts: -1, reconnectTimeWait: 250, timeout: 3000, noAsyncTraces: true });
  } catch (error) {
    throw new NatsUnreachableError(classify(error), settings.natsUrl, error, secretsOf(settings), settings.natsTlsCa);
  }
}

/**
 * Reports every error the server sends after connecting (nats.js only hands it to the one
 * request that caused it, and not at all for a plain publish or a subscription). A
 * "Permissions Violation" there means the NATS user lacks a permission the process needs:
 * deploy/nats/auth.conf and the service's EVENT_STREAM / EVENT_SUBJECT_PREFIX disagree.
 */
export function watchNatsServerErrors(nc: NatsConnection, report: (message: string) => void): void {
  void (async () => {
    for await (const status of nc.status()) {
      if (status.type === 'error') report(redactUrls(describeCause(status.error)));
    }
  })().catch(() => undefined);
}

/** The nats.js options for these settings: servers, credentials and TLS. */
export function natsConnectionOptions(settings: NatsConnectionSettings, name: string): NodeConnectionOptions {
  const credentials = settings.natsCredentials;
  const auth: Partial<NodeConnectionOptions> =
    credentials.kind === 'user-password'
      ? { user: credentials.user, pass: credentials.password }
      : credentials.kind === 'token'
        ? { token: credentials.token }
        : credentials.kind === 'creds-file'
          ? // Read at each connect, so a rotated creds file is used after a restart.
            { authenticator: credsAuthenticator(readFileSync(credentials.path)) }
          : {};
  return {
    servers: settings.natsUrl.split(',').map((s) => s.trim()),
    name,
    inboxPrefix: inboxPrefixOf(credentials),
    ...auth,
    ...(settings.natsTlsCa ? { tls: { caFile: settings.natsTlsCa } } : {}),
  };
}

/**
 * Replies (JetStream API answers, pulled messages) go to `_INBOX.<user>.…`, so the server can
 * let each user subscribe to its own replies only (deploy/nats/auth.conf): the analytics user
 * can then neither read the service's replies nor learn its inbox subjects. Without a user name
 * (no auth, token, creds file) the nats.js default `_INBOX` stays.
 */
export function inboxPrefixOf(credentials: NatsConnectionSettings['natsCredentials']): string {
  return credentials.kind === 'user-password' && /^[A-Za-z0-9_-]{1,64}$/.test(credentials.user) ? `_INBOX.${credentials.user}` : '_INBOX';
}

function secretsOf(settings: NatsConnectionSettings): string[] {
  const credentials = settings.natsCredentials;
  return credentials.kind === 'user-password' ? [credentials.password] : credentials.kind === 'token' ? [credentials.token] : [];
}

const TLS_ERROR_CODE = /^(ERR_TLS_|ERR_SSL_|UNABLE_TO_|SELF_SIGNED_|DEPTH_ZERO_|CERT_|HOSTNAME_MISMATCH)/;

function classify(error: unknown): NatsConnectFailure {
  for (let current: unknown = error, depth = 0; current instanceof Error && depth < 5; current = current.cause, depth++) {
    if (current instanceof AuthorizationError || /authorization violation|authentication/i.test(current.message)) return 'authentication';
    const code = (current as { code?: unknown }).code;
    if ((typeof code === 'string' && TLS_ERROR_CODE.test(code)) || /\btls\b|certificate/i.test(current.message)) return 'tls';
  }
  return 'unreachable';
}

function describeCause(cause: unknown): string {
  const parts: string[] = [];
  for (let current: unknown = cause, depth = 0; current !== undefined && depth < 3; depth++) {
    const message = current instanceof Error ? current.message : String(current);
    if (message && !parts.includes(message)) parts.push(message);
    current = current instanceof Error ? current.cause : undefined;
  }
  return parts.join(': ').replace(/\s+/g, ' ');
}
