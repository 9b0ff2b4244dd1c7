import { GENESIS_HASH, type EventEnvelope } from './envelope.ts';

/** Where a believed event stands in its subject's hash chain, as a reader following the stream sees it. */
export const ChainPlace = {
  /** It continues a chain the reader follows. */
  Continues: 'continues',
  /** It names another predecessor than the last event the reader believed there: a replayed or inserted copy. */
  Broken: 'broken',
  /** Its subject started before the reader's first event, and nothing anchors it: the reader cannot judge it. */
  Unknown: 'unknown',
} as const;
export type ChainPlace = (typeof ChainPlace)[keyof typeof ChainPlace];

/**
 * The hash chains of the subjects a reader sees, followed in stream order: a subject from its
 * first event (`prev_hash` the genesis hash), or from an event the reader already knows to be
 * in place (`anchorAt`, e.g. a run's RunQueued at the sequence the read model recorded). A
 * validly signed event published again later (a replay) names an older predecessor than the
 * subject's last believed event, and is told apart from the events that happened. The write
 * model and the projections apply the same rule (projections/runtime/chain-heads.ts).
 *
 * @example
 * const chains = new SubjectChains().anchorAt(accountSubject, queuedSeq);
 * for await (const { seq, subject, event } of events) {
 *   if (chains.place(seq, subject, event) === ChainPlace.Broken) markReplayed(seq);
 * }
 */
export class SubjectChains {
  private readonly heads = new Map<string, string>();
  private readonly anchors = new Map<string, number>();

  /** The event at `seq` on `subject` is in place: its chain is followed from it. */
  anchorAt(subject: string, seq: number): this {
    this.anchors.set(subject, seq);
    return this;
  }

  /** Judges the reader's next event (in stream order) and moves its subject's head when it continues. */
  place(seq: number, subject: string, event: Pick<EventEnvelope, 'prev_hash' | 'hash'>): ChainPlace {
    const head = this.heads.get(subject);
    if (head === undefined) {
      if (event.prev_hash !== GENESIS_HASH && this.anchors.get(subject) !== seq) return ChainPlace.Unknown;
    } else if (event.prev_hash !== head) {
      return ChainPlace.Broken;
    }
    this.heads.set(subject, event.hash);
    return ChainPlace.Continues;
  }
}
