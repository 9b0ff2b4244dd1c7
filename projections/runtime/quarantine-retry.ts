import { InadmissibleCode } from '../../src/events/event-admission.ts';
import type { Kysely } from 'kysely';
import type { Database } from '../../src/db/schema.ts';
import type { JetStreamEventStore as EventStore } from '../../src/event-store/jetstream-event-store.ts';
import { applyIsolating } from './apply-isolating.ts';
import { lockCheckpoint, writeCheckpoint } from './checkpoints.ts';
import type { Projection } from './projection.ts';
import { listQuarantine, parkEvent, releaseQuarantined } from './quarantine.ts';

/** What a retry did for one projection that had parked the event. */
export const RetryOutcome = {
  /** Applied and removed from the quarantine. */
  Applied: 'applied',
  /** Still inadmissible or still refused; stays parked with the new error. */
  StillFailing: 'still-failing',
  /** A later event of the same aggregate is already applied; not retried without --force. */
  OutOfOrder: 'out-of-order',
  /** The projection named in the row is not one this build knows. */
  UnknownProjection: 'unknown-projection',
  /** The stream no longer holds the sequence (retention); nothing to apply. */
  Gone: 'gone',
} as const;
export type RetryOutcome = (typeof RetryOutcome)[keyof typeof RetryOutcome];

export interface RetryResult {
  readonly projection: string;
  readonly seq: number;
  readonly outcome: RetryOutcome;
  readonly detail: string;
}

export interface RetryOptions {
  readonly db: Kysely<Database>;
  readonly store: EventStore;
  readonly projections: readonly Projection[];
  readonly seq: number;
  /** Apply even when a later event of the same aggregate was applied already. */
  readonly force?: boolean;
}

/**
 * Re-applies a parked event to every projection that parked it, under that projection's
 * checkpoint lock (the live projector waits meanwhile). The event is applied alone, after
 * events that followed it, so it is applied OUT OF ORDER: a projection that keeps the latest
 * state of an aggregate would let it overwrite newer state. That is why a retry is refused
 * (`out-of-order`) when a later event of the same subject is at or below the checkpoint,
 * unless forced; with no later event of its aggregate applied, applying it now gives the
 * rows an in-order replay would have given for that aggregate.
 */
export async function retryQuarantined(options: RetryOptions): Promise<RetryResult[]> {
  const { db, store, seq } = options;
  const results: RetryResult[] = [];
  for (const entry of await listQuarantine(db, seq)) {
    const projection = options.projections.find((p) => p.name === entry.projection);
    const result = (outcome: RetryOutcome, detail: string) => results.push({ projection: entry.projection, seq, outcome, detail });
    if (!projection) {
      result(RetryOutcome.UnknownProjection, `no projection named ${entry.projection}`);
      continue;
    }
    const message = await store.rawAt(seq);
    if (!message) {
      result(RetryOutcome.Gone, `stream sequence ${seq} is no longer stored`);
      continue;
    }
    const admitted = store.admission.tryAdmit(message);
    if (!admitted.ok) {
      // Still not believable: nothing to apply, whatever the order.
      await parkEvent(db, { ...entry, code: admitted.corrupt.code, error: admitted.corrupt.error, payload: message.data });
      result(RetryOutcome.StillFailing, admitted.corrupt.error);
      continue;
    }
    const outcome = await db.transaction().execute(async (trx) => {
      const checkpoint = await lockCheckpoint(trx, projection.name);
      const applied = checkpoint?.lastSeq ?? 0;
      if (!options.force) {
        for await (const later of store.readRaw(message.subject, seq + 1, applied)) {
          return { outcome: RetryOutcome.OutOfOrder, detail: `sequence ${later.seq} of ${message.subject} is already applied; use --force to apply out of order` };
        }
      }
      // An event Postgres refused had continued its chain when first seen; any other was never in it.
      const checkChain = entry.code !== InadmissibleCode.Refused;
      const { parked } = await applyIsolating(trx, projection, [{ result: admitted, payload: message.data }], { checkChain });
      if (parked.length > 0) return { outcome: RetryOutcome.StillFailing, detail: parked[0]!.error };
      await releaseQuarantined(trx, projection.name, seq);
      // The retry may have moved a chain head: a projector remembering heads sees the checkpoint
      // written by someone else and reads them again.
      if (checkpoint) await writeCheckpoint(trx, projection.name, checkpoint);
      return { outcome: RetryOutcome.Applied, detail: 'applied and removed from the quarantine' };
    });
    result(outcome.outcome, outcome.detail);
  }
  return results;
}
