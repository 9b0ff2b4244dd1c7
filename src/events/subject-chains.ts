import { GENESIS_HASH, type EventEnvelope } from './envelope.ts';
import { corruptEventOf, InadmissibleCode, InadmissibleEventError, type AdmissionResult } from './event-admission.ts';

/** Where a believed event stands in its subject's hash chain, as a reader following the stream sees it. */
export const ChainPlace = {
  /** It continues a chain the reader follows. */
  Continues: 'continues',
  /** It is not where its chain says it belongs: a replayed or inserted copy. */
  Broken: 'broken',
  /** Its subject started before the reader's first event, and nothing anchors it: the reader cannot judge it. */
  Unknown: 'unknown',
} as const;
export type ChainPlace = (typeof ChainPlace)[keyof typeof ChainPlace];

/** Why an event is `chain-broken`, as every reader that judges chains says it (projections, `events tail`). */
export function chainBrokenDetail(prevHash: string, expected?: string): string {
  return `prev_hash ${prevHash} does not continue its subject's chain${expected === undefined ? '' : ` (expected ${expected})`}: a replayed or inserted event`;
}

export interface SubjectChainsOptions {
  /**
   * Where a subject's chain starts: the sequence of its first stored message that is believed
   * and names the genesis hash (the store's `firstGenesisSeqOf`; messages published raw before
   * it are passed over). Asked when an event that names the genesis hash shows up on a subject
   * the reader has not seen: it starts the subject only when it is that event, or it is a
   * replayed copy of it. Leave it out only when the reader reads the stream from its first
   * message and nothing was ever removed.
   */
  readonly chainStartOf?: (subject: string) => Promise<number | null>;
  /** Subjects followed at once; past it those first seen longest ago are dropped (and judged unknown after). */
  readonly maxSubjects?: number;
}

const DEFAULT_MAX_SUBJECTS = 100_000;

/**
 * The hash chains of the subjects a reader sees, followed in stream order: a subject from its
 * first event, or from the first believed event at or after an anchor (`anchorFrom`, e.g. a run's
 * RunQueued at the sequence the read model recorded). A validly signed event published again
 * later (a replay) names an older predecessor than the subject's last believed event, or is a
 * first event that is not where the subject's chain starts, and is told apart from the events that
 * happened. The write model and the projections apply the same rule
 * (projections/runtime/chain-heads.ts).
 *
 * @example
 * const chains = new SubjectChains({ chainStartOf: (subject) => store.firstGenesisSeqOf(subject) }).anchorFrom(accountSubject, queuedSeq);
 * for await (const { seq, subject, event } of events) {
 *   if ((await chains.place(seq, subject, event)) === ChainPlace.Broken) markReplayed(seq);
 * }
 */
export class SubjectChains {
  private readonly heads = new Map<string, string>();
  private readonly anchors = new Map<string, number>();
  private readonly chainStartOf: ((subject: string) => Promise<number | null>) | undefined;
  private readonly maxSubjects: number;

  constructor(options: SubjectChainsOptions = {}) {
    this.chainStartOf = options.chainStartOf;
    this.maxSubjects = options.maxSubjects ?? DEFAULT_MAX_SUBJECTS;
  }

  /** The first believed event on `subject` at or after `seq` is in place: its chain is followed from it. */
  anchorFrom(subject: string, seq: number): this {
    this.anchors.set(subject, seq);
    return this;
  }

  /** Judges the reader's next believed event (in stream order) and moves its subject's head when it continues. */
  async place(seq: number, subject: string, event: Pick<EventEnvelope, 'prev_hash' | 'hash'>): Promise<ChainPlace> {
    const head = this.heads.get(subject);
    if (head !== undefined) {
      if (event.prev_hash !== head) return ChainPlace.Broken;
    } else {
      const anchor = this.anchors.get(subject);
      if (anchor !== undefined && seq >= anchor) {
        this.anchors.delete(subject);
      } else if (event.prev_hash !== GENESIS_HASH) {
        return ChainPlace.Unknown;
      } else if (this.chainStartOf && (await this.chainStartOf(subject)) !== seq) {
        return ChainPlace.Broken;
      }
    }
    this.heads.set(subject, event.hash);
    if (this.heads.size > this.maxSubjects) this.forgetOldest();
    return ChainPlace.Continues;
  }

  /**
   * Judges an admission result (in stream order) as {@link place} does: a believed event that
   * is not where its chain says it belongs comes back as a `chain-broken` refusal, so a reader
   * has one branch for everything it cannot believe. `unknownStart` marks a believed event
   * whose subject began before what the reader saw (nothing to judge it by).
   */
  async judge(result: AdmissionResult): Promise<{ readonly result: AdmissionResult; readonly unknownStart: boolean }> {
    if (!result.ok) return { result, unknownStart: false };
    const { seq, subject, event } = result.stored;
    const place = await this.place(seq, subject, event);
    if (place !== ChainPlace.Broken) return { result, unknownStart: place === ChainPlace.Unknown };
    const broken = new InadmissibleEventError(InadmissibleCode.ChainBroken, seq, subject, chainBrokenDetail(String(event.prev_hash)));
    return { result: { ok: false, corrupt: corruptEventOf(broken) }, unknownStart: false };
  }

  /** Drops the tenth of the subjects first seen longest ago, in one pass (one at a time, each drop would walk the dropped ones before it). */
  private forgetOldest(): void {
    let left = Math.ceil(this.maxSubjects / 10);
    for (const subject of this.heads.keys()) {
      this.heads.delete(subject);
      if (--left === 0) return;
    }
  }
}
