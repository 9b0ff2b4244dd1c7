import { GENESIS_HASH, type EventEnvelope } from '../../events/envelope.ts';

/** What a run's event stream makes of a believed event's place in its subject's chain. */
export const ChainPlace = {
  /** It continues a chain the stream follows: show it. */
  Continues: 'continues',
  /** It names another predecessor than the last event the stream believed there: a replayed or inserted copy. */
  Broken: 'broken',
  /** A subject whose start the stream has not seen (its events before the run): nothing the stream shows. */
  Unknown: 'unknown',
} as const;
export type ChainPlace = (typeof ChainPlace)[keyof typeof ChainPlace];

/**
 * The hash chains of the subjects a run's event stream shows, followed from the run's
 * RunQueued on: the account subject from that event (the read model believed it, at
 * `queued_seq`), and every subject that starts during the run (its run subject, its actions')
 * from its first event. A validly signed event published again later (a replay) names an older
 * predecessor and is not shown as something that happened twice.
 *
 * @example
 * const chains = new RunStreamChains(accountSubject, queuedSeq);
 * if (chains.place(seq, subject, event) === ChainPlace.Broken) skip();
 */
export class RunStreamChains {
  private readonly heads = new Map<string, string>();
  private readonly accountSubject: string;
  private readonly queuedSeq: number;

  constructor(accountSubject: string, queuedSeq: number) {
    this.accountSubject = accountSubject;
    this.queuedSeq = queuedSeq;
  }

  /** Judges the next event of the stream (in stream order) and moves its subject's head when it continues. */
  place(seq: number, subject: string, event: Pick<EventEnvelope, 'prev_hash' | 'hash'>): ChainPlace {
    const head = this.heads.get(subject);
    if (head === undefined) {
      const starts = event.prev_hash === GENESIS_HASH || (subject === this.accountSubject && seq === this.queuedSeq);
      if (!starts) return ChainPlace.Unknown;
    } else if (event.prev_hash !== head) {
      return ChainPlace.Broken;
    }
    this.heads.set(subject, event.hash);
    return ChainPlace.Continues;
  }
}
