import { accessSync, constants, readFileSync } from 'node:fs';

/** How the service proves who it is to NATS (NATS_USER/NATS_PASSWORD, NATS_TOKEN or NATS_CREDS). */
export type NatsCredentials =
  | { readonly kind: 'none' }
  | { readonly kind: 'user-password'; readonly user: string; readonly password: string }
  | { readonly kind: 'token'; readonly token: string }
  | { readonly kind: 'creds-file'; readonly path: string };

export interface NatsAccess {
  readonly natsCredentials: NatsCredentials;
  readonly natsTlsCa: string | undefined;
}

/**
 * Reads NATS_USER/NATS_PASSWORD, NATS_TOKEN, NATS_CREDS and NATS_TLS_CA. At most one way to
 * authenticate may be set, since a server given two would silently use one of them; files must
 * be readable and look like what they claim to be, so a typo fails at start, not at the first
 * reconnect. Problems never quote a password or token.
 */
export function natsAccess(raw: (name: string) => string, problems: string[]): NatsAccess {
  const user = raw('NATS_USER');
  const password = raw('NATS_PASSWORD');
  const token = raw('NATS_TOKEN');
  const credsPath = raw('NATS_CREDS');
  const tlsCa = raw('NATS_TLS_CA');

  if (user && !password) problems.push('NATS_USER is set but NATS_PASSWORD is not');
  if (password && !user) problems.push('NATS_PASSWORD is set but NATS_USER is not');
  const methods = [user || password ? 'NATS_USER/NATS_PASSWORD' : '', token ? 'NATS_TOKEN' : '', credsPath ? 'NATS_CREDS' : ''].filter(Boolean);
  if (methods.length > 1) problems.push(`set only one way to authenticate to NATS, got ${methods.join(' and ')}`);
  if (methods.length > 0 && urlsWithUserinfo(raw('NATS_URL'))) {
    problems.push(`NATS_URL carries credentials (user@host) and ${methods[0]} is set too; use one of them`);
  }
  if (credsPath) readableFile('NATS_CREDS', credsPath, /-----BEGIN NATS USER JWT-----[\s\S]*-----BEGIN USER NKEY SEED-----/, 'a NATS credentials file (user JWT and nkey seed)', problems);
  if (tlsCa) readableFile('NATS_TLS_CA', tlsCa, /-----BEGIN CERTIFICATE-----/, 'a PEM certificate', problems);

  const natsCredentials: NatsCredentials = user && password
    ? { kind: 'user-password', user, password }
    : token
      ? { kind: 'token', token }
      : credsPath
        ? { kind: 'creds-file', path: credsPath }
        : { kind: 'none' };
  return { natsCredentials, natsTlsCa: tlsCa || undefined };
}

function urlsWithUserinfo(urls: string): boolean {
  return urls.split(',').some((part) => {
    try {
      const parsed = new URL(part.trim());
      return parsed.username !== '' || parsed.password !== '';
    } catch {
      return false;
    }
  });
}

function readableFile(name: string, path: string, shape: RegExp, what: string, problems: string[]): void {
  try {
    accessSync(path, constants.R_OK);
    if (!shape.test(readFileSync(path, 'utf8'))) problems.push(`${name} '${path}' is not ${what}`);
  } catch (error) {
    const code = (error as { code?: string }).code;
    problems.push(`${name} '${path}' cannot be read (${code === 'ENOENT' ? 'no such file' : (code ?? String(error))})`);
  }
}
