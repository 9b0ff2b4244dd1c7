import { identityProjection } from '../../projections/identity/identity-projection.ts';
import type { IdentityFreshness } from '../auth/key-directory.ts';
import type { EventStore } from '../event-store/event-store.ts';
import { streams, type Subjects } from '../event-store/subjects.ts';
import type { ReadBarrier } from './read-barrier.ts';

/**
 * How current this process's identity read model is, for its key directory: the projection's
 * checkpoint against the event log, for the whole stream (the barrier) or one key's subject.
 *
 * @example
 * keys.watch(nc, subjects.filter('*', '_', 'key'), identityFreshnessOf(store, subjects, barrier));
 */
export function identityFreshnessOf(store: EventStore, subjects: Subjects, barrier: ReadBarrier): IdentityFreshness {
  return {
    projection: identityProjection.name,
    streamHead: () => store.lastSequence(),
    reaches: (seq) => barrier.reach(identityProjection.name, seq),
    lastSeqOfKey: (workspaceId, keyId) => store.leaderLastSequenceOf(subjects.forAggregate(streams.key(workspaceId, keyId))),
  };
}
