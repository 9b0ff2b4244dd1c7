import { ProblemError } from '../errors/problem-error.ts';
import type { KeyScope } from '../events/catalogue/index.ts';

export class UnauthorizedError extends ProblemError {
  constructor(detail: string) {
    super({
      type: 'unauthorized',
      status: 401,
      title: 'Missing or invalid API key',
      detail,
      headers: { 'WWW-Authenticate': 'Bearer realm="api"' },
    });
  }
}

export class InsufficientScopeError extends ProblemError {
  constructor(required: KeyScope, held: KeyScope) {
    super({
      type: 'insufficient-scope',
      status: 403,
      title: 'The API key lacks the required scope',
      detail: `This operation needs a key with ${required} scope or higher; this key has ${held} scope.`,
      extensions: { required_scope: required, key_scope: held },
      headers: { 'WWW-Authenticate': `Bearer realm="api", error="insufficient_scope", scope="${required}"` },
    });
  }
}
