/**
 * Credentials inside URLs never reach a log line, an error message or a startup failure line:
 * `nats://user:secret@host` becomes `nats://user:***@host`. NATS also takes a bare token as the
 * userinfo (`nats://s3cret@host`), so for NATS schemes a userinfo without a colon is masked
 * whole; for others (`postgres://postgres@host`) it is only a user name and stays readable.
 */
const URL_WITH_USERINFO = /\b([a-z][a-z0-9+.-]*):\/\/([^\s/?#@'"]*)@/gi;
const TOKEN_SCHEMES = new Set(['nats', 'tls', 'ws', 'wss']);
export const REDACTED = '***';

/** Masks the secret part of every `scheme://userinfo@` in `text` (a URL, a list of URLs, or a message). */
export function redactUrls(text: string): string {
  return text.replace(URL_WITH_USERINFO, (_match, scheme: string, userinfo: string) => {
    const colon = userinfo.indexOf(':');
    if (colon >= 0) return `${scheme}://${userinfo.slice(0, colon)}:${REDACTED}@`;
    return TOKEN_SCHEMES.has(scheme.toLowerCase()) ? `${scheme}://${REDACTED}@` : `${scheme}://${userinfo}@`;
  });
}

/**
 * One configured URL, possibly malformed, with its userinfo masked. A password holding an
 * unencoded `#`, `/`, `?`, `@` or space is exactly what makes a URL invalid, and what
 * {@link redactUrls} (which reads userinfo as a URL parser would) cannot see the end of: here
 * everything between `scheme://` and the last `@` is userinfo, and all of it but the user name
 * is masked.
 *
 * @example
 * redactUrlValue('postgres://postgres:Xy#9secret@127.0.0.1:5432/db'); // 'postgres://postgres:***@127.0.0.1:5432/db'
 */
export function redactUrlValue(value: string): string {
  const match = /^(\s*[a-z][a-z0-9+.-]*:\/\/)([\s\S]*)@([^@]*)$/i.exec(value);
  if (!match) return redactUrls(value);
  const [, scheme, userinfo, rest] = match as unknown as [string, string, string, string];
  const colon = userinfo.indexOf(':');
  if (colon >= 0) return `${scheme}${userinfo.slice(0, colon)}:${REDACTED}@${rest}`;
  return TOKEN_SCHEMES.has(scheme.trim().replace(/:\/\/$/, '').toLowerCase()) ? `${scheme}${REDACTED}@${rest}` : value;
}

/** Replaces each secret (a password or token from the configuration) wherever it occurs in `text`. */
export function redactSecrets(text: string, secrets: readonly (string | undefined)[]): string {
  let redacted = text;
  for (const secret of secrets) if (secret) redacted = redacted.split(secret).join(REDACTED);
  return redacted;
}
