import type { DomainEvent } from '../../src/events/catalogue/index.ts';
import { AggregateRepository, type LoadedAggregate, type SnapshotCache } from '../../src/event-store/aggregate-repository.ts';
import type { EventStore } from '../../src/event-store/event-store.ts';
import type { AdmissionResult } from '../../src/events/event-admission.ts';
import type { SubjectAddress, Subjects } from '../../src/event-store/subjects.ts';
import type { Command, Decider } from './decider.ts';
import { withOutageRideThrough } from './outage.ts';

export interface AggregatesOptions {
  /** How long a load waits out an unreachable event log (0, the default: fail at once). */
  readonly outageRideThroughMs?: number;
}

/**
 * Loads deciders' state from the event store, one repository (in-process cache plus
 * persisted snapshots) per decider. Shared by `handle` (the command side) and the
 * queries (commands/queries.ts), so a read right after a command costs no fold.
 *
 * @example
 * ```ts
 * const aggregates = new Aggregates(new InMemoryEventStore(), new Subjects('test'), null);
 * const { state } = await aggregates.load(workspaceDecider, streams.workspace('ws'));
 * ```
 */
export class Aggregates {
  readonly store: EventStore;
  readonly subjects: Subjects;
  private readonly snapshots: SnapshotCache | null;
  private readonly repositories: Map<Decider<never, unknown>, AggregateRepository<unknown, DomainEvent>>;
  /** How long loads (and, by default, commands handled on these aggregates) wait out an unreachable log. */
  readonly outageRideThroughMs: number;

  constructor(
    store: EventStore,
    subjects: Subjects,
    snapshots: SnapshotCache | null,
    options: AggregatesOptions = {},
    repositories = new Map<Decider<never, unknown>, AggregateRepository<unknown, DomainEvent>>(),
  ) {
    this.store = store;
    this.subjects = subjects;
    this.snapshots = snapshots;
    this.outageRideThroughMs = options.outageRideThroughMs ?? 0;
    this.repositories = repositories;
  }

  /** The same aggregates (and caches) with another outage policy, e.g. fail-fast for the API. */
  withOptions(options: AggregatesOptions): Aggregates {
    return new Aggregates(this.store, this.subjects, this.snapshots, options, this.repositories);
  }

  subjectOf(address: SubjectAddress): string {
    return this.subjects.forAggregate(address);
  }

  load<C extends Command, S>(decider: Decider<C, S>, address: SubjectAddress): Promise<LoadedAggregate<S>> {
    const repository = this.repositoryOf(decider);
    const subject = this.subjectOf(address);
    return withOutageRideThrough(() => repository.load(subject), this.outageRideThroughMs);
  }

  /**
   * Hands a stream message, seen in stream order by a reader of every event (the run-state
   * follower of an HTTP process), to each repository: a subject whose state this process
   * remembers stays current when another process writes it (see AggregateRepository.followed).
   */
  followed(result: AdmissionResult): void {
    const { seq, subject } = result.ok ? result.stored : result.corrupt;
    const event = result.ok ? (result.stored.event as DomainEvent) : null;
    for (const repository of this.repositories.values()) repository.followed(subject, seq, event);
  }

  repositoryOf<C extends Command, S>(decider: Decider<C, S>): AggregateRepository<S, DomainEvent> {
    let repository = this.repositories.get(decider as Decider<never, unknown>);
    if (!repository) {
      repository = new AggregateRepository<S, DomainEvent>(this.store, this.snapshots, decider) as AggregateRepository<unknown, DomainEvent>;
      this.repositories.set(decider as Decider<never, unknown>, repository);
    }
    return repository as AggregateRepository<S, DomainEvent>;
  }
}
