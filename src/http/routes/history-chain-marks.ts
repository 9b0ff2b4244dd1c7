import type { Kysely } from 'kysely';
import { readCheckpoint } from '../../../projections/runtime/checkpoints.ts';
import { chainBreaksAmong } from '../../../projections/runtime/quarantine.ts';
import { RUNS_PROJECTION } from '../../../projections/runs/runs-projection.ts';
import type { Database } from '../../db/schema.ts';
import { InadmissibleCode } from '../../events/event-admission.ts';
import type { ReadBarrier } from '../../runtime/read-barrier.ts';

/** A stored message that is not a trustworthy event: shown with its place, never its content. */
export interface CorruptEntry {
  readonly seq: number;
  readonly subject: string;
  readonly corrupt: true;
  /** Why it was not believed: not-json, schema, unknown-type, subject-mismatch, bad-text, untrusted, chain-broken. */
  readonly code: string;
  readonly error: string;
}

/** One entry of a history page: an event (its envelope and `seq`) or a corrupt message. */
export type HistoryEntry = Record<string, unknown> | CorruptEntry;

/** An entry with where it was read from. */
export interface PageItem {
  readonly seq: number;
  readonly subject: string;
  readonly entry: HistoryEntry;
}

/** Which stored events continue their subject's chain, as someone who follows every chain from its start judged them. */
export interface ChainVerdicts {
  /** Waits, bounded, until the verdicts cover `seq`; false when they still do not. */
  reach(seq: number): Promise<boolean>;
  /** The last stream sequence the verdicts cover now. */
  judgedUpTo(): Promise<number>;
  /** Those of `seqs` judged chain-broken, with why. */
  breaksAmong(seqs: readonly number[]): Promise<ReadonlyMap<number, string>>;
}

/**
 * The runs projection's verdicts: every projection follows every subject's chain from its
 * first event and parks a replayed copy as `chain-broken` (projections/runtime/chain-heads.ts),
 * in the transaction that moves its checkpoint.
 */
export function runsProjectionVerdicts(barrier: ReadBarrier, db: Kysely<Database>): ChainVerdicts {
  return {
    reach: (seq) => barrier.reach(RUNS_PROJECTION, seq),
    judgedUpTo: async () => (await readCheckpoint(db, RUNS_PROJECTION))?.lastSeq ?? 0,
    breaksAmong: (seqs) => chainBreaksAmong(db, RUNS_PROJECTION, seqs),
  };
}

/**
 * A validly signed event that does not continue its subject's chain is the stored copy of an
 * older event published again (a replay) or one inserted: the page lists it in its place like
 * any other corrupt message, never as an event that happened. Entries past what the verdicts
 * cover have none yet: the page waits for them (`reach`), and when they are still behind, it
 * ends at the last judged sequence, which `cutAt` gives as the page's `next_cursor` (never
 * below `cursor`), so a client walking on gets the rest once they are judged.
 */
export async function markChainBreaks(
  verdicts: ChainVerdicts,
  items: readonly PageItem[],
  cursor: number,
): Promise<{ entries: HistoryEntry[]; cutAt: number | null }> {
  const believed = items.filter((item) => item.entry.corrupt !== true).map((item) => item.seq);
  if (believed.length === 0) return { entries: items.map((item) => item.entry), cutAt: null };
  let judged = items;
  let cutAt: number | null = null;
  const newest = Math.max(...believed);
  if (!(await verdicts.reach(newest))) {
    // Asked again: a batch judged since the wait's last look may cover the whole page.
    const judgedUpTo = await verdicts.judgedUpTo();
    if (judgedUpTo < newest) {
      judged = items.filter((item) => item.seq <= judgedUpTo);
      cutAt = Math.max(cursor, judgedUpTo);
    }
  }
  const breaks = await verdicts.breaksAmong(believed);
  const entries = judged.map(({ seq, subject, entry }): HistoryEntry => {
    const error = entry.corrupt === true ? undefined : breaks.get(seq);
    return error === undefined ? entry : { seq, subject, corrupt: true, code: InadmissibleCode.ChainBroken, error };
  });
  return { entries, cutAt };
}
