import type { Context, Next } from 'koa';
import { parseApiKey, secretMatches } from './api-key.ts';
import { UnauthorizedError } from './auth-errors.ts';
import type { KeyDirectory, KeyRecord } from './key-directory.ts';
import { hasScope, requireScope, type Principal } from './scopes.ts';
import type { KeyScope } from '../events/catalogue/index.ts';

/** What the `Authorization` header of a request proved. */
export type Authentication =
  | { readonly kind: 'authenticated'; readonly principal: Principal }
  | { readonly kind: 'rejected'; readonly error: UnauthorizedError };

/** The key id and secret of `Authorization: Bearer <key>`, or why the header cannot hold one. */
export function presentedKey(header: string): { keyId: string; secret: string } | UnauthorizedError {
  if (!header) return new UnauthorizedError('Send the API key as `Authorization: Bearer <key>`.');
  const match = /^Bearer\s+(\S+)\s*$/i.exec(header);
  if (!match) return new UnauthorizedError('The Authorization header must use the Bearer scheme.');
  return parseApiKey(match[1]!) ?? new UnauthorizedError('The API key is malformed.');
}

/**
 * Checks a presented secret against the key's record. Unknown key ids and wrong secrets
 * get the same answer, so the response tells an attacker nothing about which key ids exist.
 */
export function verifyKey(secret: string, record: KeyRecord | null): Authentication {
  if (!record || !matchesRecord(secret, record)) return { kind: 'rejected', error: new UnauthorizedError('The API key is not valid.') };
  if (record.revoked) return { kind: 'rejected', error: new UnauthorizedError('The API key has been revoked.') };
  let principal = principals.get(record);
  if (!principal) {
    principal = { keyId: record.keyId, workspaceId: record.workspaceId, scope: record.scope };
    principals.set(record, principal);
  }
  return { kind: 'authenticated', principal };
}

/**
 * The secret that matched each key record, so a key's every request after its first costs a
 * hash-table lookup instead of a SHA-256 and a constant-time comparison. Keyed by the record
 * object: the key directory replaces or drops a record on any key event (and on a reconnect),
 * which forgets the match with it. A Set lookup compares string hashes before any characters,
 * so a wrong secret leaks no prefix timing; a wrong secret is still checked by hash every time.
 */
const verifiedSecrets = new WeakMap<KeyRecord, Set<string>>();
const principals = new WeakMap<KeyRecord, Principal>();

function matchesRecord(secret: string, record: KeyRecord): boolean {
  if (verifiedSecrets.get(record)?.has(secret)) return true;
  if (!secretMatches(secret, record.secretHash)) return false;
  verifiedSecrets.set(record, new Set([secret]));
  return true;
}

/**
 * The principal of an `Authorization` header whose key the key cache holds and which is
 * valid for at least `scope`; undefined whenever answering would take a database lookup or
 * the answer is a refusal (the normal request path answers those, with their problems).
 * Not counted as a key lookup: the caller counts it once it uses the answer.
 */
export function cachedPrincipal(keys: KeyDirectory, header: string, scope: KeyScope): Principal | undefined {
  const presented = presentedKey(header);
  if (presented instanceof UnauthorizedError) return undefined;
  const record = keys.cachedUncounted(presented.keyId);
  if (record === undefined || record === 'unknown') return undefined;
  const authentication = verifyKey(presented.secret, record);
  if (authentication.kind !== 'authenticated' || !hasScope(authentication.principal, scope)) return undefined;
  return authentication.principal;
}

export async function authenticateHeader(keys: KeyDirectory, header: string): Promise<Authentication> {
  const presented = presentedKey(header);
  if (presented instanceof UnauthorizedError) return { kind: 'rejected', error: presented };
  return verifyKey(presented.secret, await keys.find(presented.keyId));
}

/** Set by the rate limiter, which has to know the caller first; `authenticate` then reuses it. */
export function rememberAuthentication(ctx: Context, authentication: Authentication): void {
  ctx.state.authentication = authentication;
}

/**
 * Resolves `Authorization: Bearer <key>` to a principal on `ctx.state.principal`, or
 * answers 401; with `scope`, also 403 for a key below it. Reuses what the rate limiter
 * already established for this request.
 *
 * @example
 * ```ts
 * router.post('/api/v1/runs', authenticate(keys, 'read'), handler);
 * ```
 */
export function authenticate(keys: KeyDirectory, scope?: KeyScope) {
  return async (ctx: Context, next: Next): Promise<void> => {
    const known = ctx.state.authentication as Authentication | undefined;
    const authentication = known ?? (await authenticateHeader(keys, ctx.get('authorization')));
    if (authentication.kind === 'rejected') throw authentication.error;
    if (scope) requireScope(authentication.principal, scope);
    ctx.state.principal = authentication.principal;
    await next();
  };
}

export function principalOf(ctx: Context): Principal {
  const principal = ctx.state.principal as Principal | undefined;
  if (!principal) throw new UnauthorizedError('Authentication is required.');
  return principal;
}
