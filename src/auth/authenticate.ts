import type { Context, Next } from 'koa';
import { parseApiKey, secretMatches } from './api-key.ts';
import { UnauthorizedError } from './auth-errors.ts';
import type { KeyDirectory } from './key-directory.ts';
import type { Principal } from './scopes.ts';

/**
 * Resolves `Authorization: Bearer <key>` to a principal on `ctx.state.principal`.
 * Unknown key ids and wrong secrets get the same answer, so the response tells an
 * attacker nothing about which key ids exist.
 */
export function authenticate(keys: KeyDirectory) {
  return async (ctx: Context, next: Next): Promise<void> => {
    const header = ctx.get('authorization');
    if (!header) throw new UnauthorizedError('Send the API key as `Authorization: Bearer <key>`.');
    const match = /^Bearer\s+(\S+)\s*$/i.exec(header);
    if (!match) throw new UnauthorizedError('The Authorization header must use the Bearer scheme.');
    const parsed = parseApiKey(match[1]!);
    if (!parsed) throw new UnauthorizedError('The API key is malformed.');
    const record = await keys.find(parsed.keyId);
    if (!record || !secretMatches(parsed.secret, record.secretHash)) throw new UnauthorizedError('The API key is not valid.');
    if (record.revoked) throw new UnauthorizedError('The API key has been revoked.');
    const principal: Principal = { keyId: record.keyId, workspaceId: record.workspaceId, scope: record.scope };
    ctx.state.principal = principal;
    await next();
  };
}

export function principalOf(ctx: Context): Principal {
  const principal = ctx.state.principal as Principal | undefined;
  if (!principal) throw new UnauthorizedError('Authentication is required.');
  return principal;
}
