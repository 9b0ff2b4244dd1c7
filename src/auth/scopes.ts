import type { KeyScope } from '../events/catalogue/index.ts';
import { InsufficientScopeError } from './auth-errors.ts';

const RANK: Readonly<Record<KeyScope, number>> = { read: 1, write: 2, admin: 3 };

/** The caller an authenticated request acts for. */
export interface Principal {
  readonly keyId: string;
  readonly workspaceId: string;
  readonly scope: KeyScope;
}

/** Scopes are ordered read < write < admin; a higher one includes the lower ones. */
export function hasScope(principal: Principal, required: KeyScope): boolean {
  return RANK[principal.scope] >= RANK[required];
}

/** @throws InsufficientScopeError */
export function requireScope(principal: Principal, required: KeyScope): void {
  if (!hasScope(principal, required)) throw new InsufficientScopeError(required, principal.scope);
}
