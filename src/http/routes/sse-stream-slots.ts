import { AppError, ErrorKind } from '../../errors/app-error.ts';

/** 429: the key already holds SSE_MAX_STREAMS_PER_KEY open streams in this process. */
export class TooManyStreamsError extends AppError {
  readonly kind = ErrorKind.LimitExceeded;

  constructor(limit: number, retryAfterSeconds: number) {
    super(
      'too-many-streams',
      `This API key already holds ${limit} open event streams on this server; close one, or poll GET /api/v1/runs/{runId}.`,
      { details: { limit }, retryAfterSeconds },
    );
  }
}

/**
 * Open SSE streams per API key, counted in this process. Per process on purpose: a stream
 * holds resources of the process that serves it (a socket, a consumer), and a shared count
 * would outlive a crashed process's streams. Behind a load balancer with N HTTP processes a
 * key can hold up to N × the limit (docs/api.md).
 */
export class SseStreamSlots {
  private readonly open = new Map<string, number>();

  private readonly limit: number;

  constructor(limit: number) {
    this.limit = limit;
  }

  /**
   * Takes a slot for `keyId`; the returned release is idempotent.
   * @throws TooManyStreamsError when the key holds `limit` streams already.
   */
  acquire(keyId: string, retryAfterSeconds: number): () => void {
    const held = this.open.get(keyId) ?? 0;
    if (held >= this.limit) throw new TooManyStreamsError(this.limit, retryAfterSeconds);
    this.open.set(keyId, held + 1);
    let released = false;
    return () => {
      if (released) return;
      released = true;
      const now = (this.open.get(keyId) ?? 1) - 1;
      if (now <= 0) this.open.delete(keyId);
      else this.open.set(keyId, now);
    };
  }

  heldBy(keyId: string): number {
    return this.open.get(keyId) ?? 0;
  }
}
