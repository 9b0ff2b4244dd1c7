import { AppError, ErrorKind } from '../errors/app-error.ts';
import type { KeyScope } from '../events/catalogue/index.ts';

export class UnauthorizedError extends AppError {
  readonly kind = ErrorKind.Unauthenticated;

  constructor(detail: string) {
    super('unauthorized', detail);
  }
}

export class InsufficientScopeError extends AppError {
  readonly kind = ErrorKind.Forbidden;
  readonly requiredScope: KeyScope;

  constructor(required: KeyScope, held: KeyScope) {
    super('insufficient-scope', `This operation needs a key with ${required} scope or higher; this key has ${held} scope.`, {
      details: { required_scope: required, key_scope: held },
    });
    this.requiredScope = required;
  }
}
