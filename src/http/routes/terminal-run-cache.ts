/**
 * Finished runs never change, so their serialized response is kept in process: a poll
 * of a finished run, or a conditional GET, costs no database round trip.
 */
export interface CachedRun {
  readonly workspaceId: string;
  readonly body: string;
  readonly etag: string;
}

export interface TerminalRunCacheLimits {
  /** Most runs kept. */
  readonly maxEntries?: number;
  /** Most bytes kept, counted as {@link cachedRunBytes} does; one run's result text can be large. */
  readonly maxBytes?: number;
}

/** Map entry, key and object headers: what a run costs beyond its strings (measured order of magnitude). */
const ENTRY_OVERHEAD_BYTES = 160;

/**
 * What a cached run holds in memory, near enough: its strings at two bytes a character (V8
 * keeps non-Latin-1 text that way; Latin-1 text takes half) plus the entry itself.
 */
export function cachedRunBytes(runId: string, entry: CachedRun): number {
  return 2 * (runId.length + entry.workspaceId.length + entry.body.length + entry.etag.length) + ENTRY_OVERHEAD_BYTES;
}

/**
 * Least-recently-used cache of terminal runs' responses, bounded both by entries and by
 * bytes: ten thousand runs with long result texts must not grow the process without end.
 *
 * @example
 * ```ts
 * const cache = new TerminalRunCache({ maxEntries: 10_000, maxBytes: 16 * 1024 * 1024 });
 * cache.set(runId, { workspaceId, body, etag });
 * cache.get(runId)?.etag;
 * ```
 */
export class TerminalRunCache {
  private readonly entries = new Map<string, CachedRun>();
  private readonly maxEntries: number;
  private readonly maxBytes: number;
  private heldBytes = 0;

  constructor(limits: TerminalRunCacheLimits = {}) {
    this.maxEntries = limits.maxEntries ?? 10_000;
    this.maxBytes = limits.maxBytes ?? 16 * 1024 * 1024;
  }

  /** Bytes held, as {@link cachedRunBytes} counts them. */
  get bytes(): number {
    return this.heldBytes;
  }

  get size(): number {
    return this.entries.size;
  }

  get(runId: string): CachedRun | undefined {
    const entry = this.entries.get(runId);
    if (entry) {
      this.entries.delete(runId);
      this.entries.set(runId, entry);
    }
    return entry;
  }

  set(runId: string, entry: CachedRun): void {
    this.remove(runId);
    const size = cachedRunBytes(runId, entry);
    // A run larger than the whole budget is not kept: it would evict everything else.
    if (size > this.maxBytes) return;
    this.entries.set(runId, entry);
    this.heldBytes += size;
    while (this.entries.size > this.maxEntries || this.heldBytes > this.maxBytes) {
      const oldest = this.entries.keys().next().value;
      if (oldest === undefined) break;
      this.remove(oldest);
    }
  }

  private remove(runId: string): void {
    const entry = this.entries.get(runId);
    if (!entry) return;
    this.entries.delete(runId);
    this.heldBytes -= cachedRunBytes(runId, entry);
  }
}
