import type { EventEnvelope } from '../events/envelope.ts';
import { EMPTY_POSITION, type EventStore, type SubjectPosition } from './event-store.ts';

/** A folded aggregate state as of a stream position. */
export interface Snapshot<S> extends SubjectPosition {
  /** Version of the state's shape; a snapshot of another version is ignored and refolded. */
  readonly stateVersion: number;
  readonly state: S;
}

/** Where folded states are persisted between processes (a JetStream KV bucket in production: snapshot-store.ts). */
export interface SnapshotCache {
  read<S>(subject: string): Promise<Snapshot<S> | null>;
  write<S>(subject: string, snapshot: Snapshot<S>): Promise<void>;
}

/** How one aggregate type folds its events. `evolve` must be pure. */
export interface AggregateFolder<S, E extends EventEnvelope = EventEnvelope> {
  /** Bump when the state's shape changes: older snapshots are then refolded. */
  readonly stateVersion: number;
  initialState(): S;
  evolve(state: S, event: E): S;
}

export interface LoadedAggregate<S> extends SubjectPosition {
  readonly state: S;
}

/** Persist a snapshot once this many events were folded past the last persisted one. */
const SNAPSHOT_EVERY = 64;
const CACHE_LIMIT = 20_000;

/**
 * Loads decision state in time independent of an aggregate's history: one direct get of
 * the subject's last sequence, then the in-process cache (or the persisted snapshot)
 * plus only the events after it. Any copy of the service may have appended in between;
 * the tail read catches up, and the append's expected sequence catches the rest.
 */
export class AggregateRepository<S, E extends EventEnvelope = EventEnvelope> {
  private readonly cache = new Map<string, Snapshot<S>>();
  /** Per subject: events folded or appended here since a snapshot was last persisted. */
  private readonly eventsSincePersisted = new Map<string, number>();

  private readonly store: EventStore;
  private readonly snapshots: SnapshotCache | null;
  private readonly folder: AggregateFolder<S, E>;

  constructor(
    store: EventStore,
    snapshots: SnapshotCache | null,
    folder: AggregateFolder<S, E>,
  ) {
    this.store = store;
    this.snapshots = snapshots;
    this.folder = folder;
  }

  /**
   * Decision state is folded from admitted events only (src/events/event-admission.ts): a
   * corrupt or forged message on the subject changes no decision. Nor does a validly signed
   * event that does not continue the subject's hash chain: a replayed copy of an old event
   * (say KillSwitchReleased) is signed but names an older `prev_hash`. Either still counts for
   * the position, since the next append must expect the subject's real last sequence; the
   * chain continues from the last believed event's hash (projections apply the same rule,
   * projections/runtime/chain-heads.ts).
   */
  async load(subject: string): Promise<LoadedAggregate<S>> {
    const last = await this.store.lastOfChecked(subject);
    if (!last) return { ...EMPTY_POSITION, state: this.folder.initialState() };
    const head = { seq: last.ok ? last.stored.seq : last.corrupt.seq };
    let base = this.usable(this.cache.get(subject), head.seq);
    if (!base && this.snapshots) {
      base = this.usable(await this.snapshots.read<S>(subject), head.seq);
      if (base) this.eventsSincePersisted.set(subject, 0);
    }
    let state = base ? base.state : this.folder.initialState();
    let position: SubjectPosition = base ?? EMPTY_POSITION;
    for await (const result of this.store.readSubjectChecked(subject, position.lastSequence, head.seq)) {
      if (!result.ok) {
        position = { lastSequence: result.corrupt.seq, lastHash: position.lastHash };
        continue;
      }
      const stored = result.stored;
      if (stored.event.prev_hash !== position.lastHash) {
        position = { lastSequence: stored.seq, lastHash: position.lastHash };
        continue;
      }
      state = this.folder.evolve(state, stored.event as E);
      position = { lastSequence: stored.seq, lastHash: stored.event.hash };
      this.eventsSincePersisted.set(subject, (this.eventsSincePersisted.get(subject) ?? 0) + 1);
    }
    const loaded = { ...position, state };
    this.remember(subject, loaded, 0);
    return loaded;
  }

  /**
   * The state this process last loaded or appended for `subject`, without asking the store
   * whether it is still the newest: only for a writer that proves it by its append's expected
   * sequence (see `preferRemembered` in commands/shared/handle.ts). Null when none is held.
   */
  remembered(subject: string): LoadedAggregate<S> | null {
    const snapshot = this.cache.get(subject);
    if (!snapshot) return null;
    const { lastSequence, lastHash, state } = snapshot;
    return { lastSequence, lastHash, state };
  }

  /**
   * Keeps the remembered state of `subject` current with an event another writer appended,
   * seen by a reader that follows the stream in order: `event` is the admitted envelope at
   * `seq`, or null for a message that could not be admitted. A subject nothing is remembered
   * of, and events at or below what is remembered, are ignored. An event that continues the
   * remembered chain is folded in; anything else (a message that is not believed, a replay,
   * or a gap after events the reader missed) forgets the subject, so its next command loads
   * it. A remembered state is only ever an optimisation: the append's expected sequence still
   * proves it current (see `remembered`).
   */
  followed(subject: string, seq: number, event: E | null): void {
    const remembered = this.cache.get(subject);
    if (!remembered || seq <= remembered.lastSequence) return;
    if (event !== null && event.prev_hash === remembered.lastHash) {
      try {
        this.cache.set(subject, { ...remembered, state: this.folder.evolve(remembered.state, event), lastSequence: seq, lastHash: event.hash });
        return;
      } catch {
        // A fold that cannot take it here is left to the next load, which reports it where a command is decided.
      }
    }
    this.cache.delete(subject);
    this.eventsSincePersisted.delete(subject);
  }

  /**
   * Records the state a successful append produced, so the next load needs no fold, and
   * persists a snapshot once 64 events of this subject went by since the last one: a
   * fresh process then folds at most that many.
   */
  remember(subject: string, loaded: LoadedAggregate<S>, appended = 1): void {
    const snapshot: Snapshot<S> = { ...loaded, stateVersion: this.folder.stateVersion };
    this.cache.delete(subject);
    this.cache.set(subject, snapshot);
    if (this.cache.size > CACHE_LIMIT) {
      const oldest = this.cache.keys().next().value;
      if (oldest !== undefined) {
        this.cache.delete(oldest);
        this.eventsSincePersisted.delete(oldest);
      }
    }
    const pending = (this.eventsSincePersisted.get(subject) ?? 0) + appended;
    if (pending >= SNAPSHOT_EVERY && this.snapshots) {
      this.eventsSincePersisted.set(subject, 0);
      void this.snapshots.write(subject, snapshot).catch(() => this.eventsSincePersisted.set(subject, pending));
    } else {
      this.eventsSincePersisted.set(subject, pending);
    }
  }

  private usable(snapshot: Snapshot<S> | null | undefined, headSeq: number): Snapshot<S> | null {
    if (!snapshot || snapshot.stateVersion !== this.folder.stateVersion || snapshot.lastSequence > headSeq) return null;
    return snapshot;
  }
}
