import type { StoredEvent, SubjectPosition } from '../../src/event-store/event-store.ts';
import type { UnsealedEvent } from '../../src/events/envelope.ts';
import type { Infrastructure } from '../../src/runtime/infrastructure.ts';

/**
 * Appends to many aggregate subjects, remembering each subject's position so every append
 * carries the right expectation without reloading. `forget` drops a position (after a
 * failed append, whose outcome is unknown), so the next append reloads it.
 */
export class ChainedAppender {
  private readonly positions = new Map<string, SubjectPosition>();

  private readonly infra: Infrastructure;

  constructor(infra: Infrastructure) {
    this.infra = infra;
  }

  async append(subject: string, event: UnsealedEvent | ((position: SubjectPosition) => UnsealedEvent)): Promise<StoredEvent> {
    const position = this.positions.get(subject) ?? (await this.infra.store.positionOf(subject));
    const [stored] = await this.infra.store.append(subject, [typeof event === 'function' ? event(position) : event], position);
    this.positions.set(subject, { lastSequence: stored!.seq, lastHash: stored!.event.hash });
    return stored!;
  }

  forget(subject: string): void {
    this.positions.delete(subject);
  }

  /** The subject of a workspace aggregate, the usual target of store-level tests. */
  workspaceSubject(id: string): string {
    return this.infra.subjects.forAggregate({ workspaceId: id, accountId: null, aggregate: { type: 'workspace', id } });
  }
}
