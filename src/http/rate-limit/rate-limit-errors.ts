import { ProblemError } from '../../errors/problem-error.ts';

export class RateLimitedError extends ProblemError {
  constructor(policy: string, retryAfterSeconds: number, headers: Readonly<Record<string, string>>) {
    super({
      type: 'rate-limited',
      status: 429,
      title: 'Too many requests',
      detail:
        policy === 'api-key'
          ? `This API key is over its request rate; retry after ${retryAfterSeconds} s.`
          : `Requests without a valid API key from this address are over their rate; retry after ${retryAfterSeconds} s.`,
      extensions: { policy },
      headers: { ...headers, 'Retry-After': String(retryAfterSeconds) },
    });
  }
}
