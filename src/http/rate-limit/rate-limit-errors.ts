import { ErrorKind } from '../../errors/app-error.ts';
import { HttpOnlyError } from '../problems/http-errors.ts';

export class RateLimitedError extends HttpOnlyError {
  readonly kind = ErrorKind.LimitExceeded;

  constructor(policy: string, retryAfterSeconds: number, headers: Readonly<Record<string, string>>) {
    super(
      'rate-limited',
      policy === 'api-key'
        ? `This API key is over its request rate; retry after ${retryAfterSeconds} s.`
        : `Requests without a valid API key from this address are over their rate; retry after ${retryAfterSeconds} s.`,
      { details: { policy }, retryAfterSeconds, headers },
    );
  }
}
