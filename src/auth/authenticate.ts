import type { Context, Next } from 'koa';
import { parseApiKey, secretMatches } from './api-key.ts';
import { UnauthorizedError } from './auth-errors.ts';
import type { KeyDirectory, KeyRecord } from './key-directory.ts';
import type { Principal } from './scopes.ts';

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
  if (!record || !secretMatches(secret, record.secretHash)) return { kind: 'rejected', error: new UnauthorizedError('The API key is not valid.') };
  if (record.revoked) return { kind: 'rejected', error: new UnauthorizedError('The API key has been revoked.') };
  return { kind: 'authenticated', principal: { keyId: record.keyId, workspaceId: record.workspaceId, scope: record.scope } };
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
 * answers 401. Reuses what the rate limiter already established for this request.
 */
export function authenticate(keys: KeyDirectory) {
  return async (ctx: Context, next: Next): Promise<void> => {
    const known = ctx.state.authentication as Authentication | undefined;
    const authentication = known ?? (await authenticateHeader(keys, ctx.get('authorization')));
    if (authentication.kind === 'rejected') throw authentication.error;
    ctx.state.principal = authentication.principal;
    await next();
  };
}

export function principalOf(ctx: Context): Principal {
  const principal = ctx.state.principal as Principal | undefined;
  if (!principal) throw new UnauthorizedError('Authentication is required.');
  return principal;
}
