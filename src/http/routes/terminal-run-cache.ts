/**
 * Finished runs never change, so their serialized response is kept in process: a poll
 * of a finished run, or a conditional GET, costs no database round trip.
 */
export interface CachedRun {
  readonly workspaceId: string;
  readonly body: string;
  readonly etag: string;
}

export class TerminalRunCache {
  private readonly entries = new Map<string, CachedRun>();

  constructor(private readonly capacity = 10_000) {}

  get(runId: string): CachedRun | undefined {
    const entry = this.entries.get(runId);
    if (entry) {
      this.entries.delete(runId);
      this.entries.set(runId, entry);
    }
    return entry;
  }

  set(runId: string, entry: CachedRun): void {
    this.entries.delete(runId);
    this.entries.set(runId, entry);
    if (this.entries.size > this.capacity) {
      const oldest = this.entries.keys().next().value;
      if (oldest !== undefined) this.entries.delete(oldest);
    }
  }
}
