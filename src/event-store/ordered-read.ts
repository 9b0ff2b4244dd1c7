import { DeliverPolicy, type ConsumerMessages, type JetStreamClient, type JetStreamManager, type JsMsg } from '@nats-io/jetstream';
import { retryWhileNatsUnavailable } from './nats-retry.ts';

/** How often a read waiting on the server checks whether it should have had a message by now. */
export const READ_STALL_CHECK_MS = 2000;

/** How long a finished read waits for its consumer's deletion before it lets go. */
const DELETE_WAIT_MS = 2000;

/** What a restarted read reports (for a log line or a metric). */
export interface ReadStall {
  readonly filter: string;
  /** The sequence the read was waiting for. */
  readonly waitingFor: number;
  /** The last sequence the filter matches, which the read had not delivered. */
  readonly lastMatching: number;
}

export interface OrderedReadOptions {
  readonly filter: string;
  readonly fromSeq: number;
  /** Last sequence to deliver (inclusive); without it the read follows new messages until `signal` aborts. */
  readonly endSeq?: number;
  readonly signal?: AbortSignal;
  /** Messages the client asks the server for at a time. */
  readonly batch: number;
  readonly stallCheckMs?: number;
  readonly onStall?: (stall: ReadStall) => void;
}

/**
 * The messages of one filter of the stream, from `fromSeq` on, in order and without gaps,
 * through nats.js ordered consumers — and a new consumer where the last one stalled.
 *
 * An ordered consumer lives on one server (R1). When that server goes away while the
 * cluster keeps the stream (a node of three killed), nats.js keeps waiting on it: it only
 * recreates an ordered consumer the server reports as not found, and one whose server is
 * down reports nothing. The read would stop silently for as long as the node stays down
 * (the cluster test saw HTTP processes serve finished runs as `queued` for 90 s). So while
 * the read waits on the server, it checks every `stallCheckMs` whether the filter has a
 * message it has not delivered; if one has been there for a whole check without arriving,
 * the consumer is dropped and the read goes on from the next sequence with a new one,
 * which the stream's current leader places on a live server.
 *
 * @example
 * ```ts
 * for await (const message of orderedRead(js, jsm, 'EVENTS', { filter: 'ads.>', fromSeq: 1, endSeq: 500, batch: 512 })) {
 *   handle(message.seq, message.data);
 * }
 * ```
 */
export async function* orderedRead(js: JetStreamClient, jsm: JetStreamManager, stream: string, options: OrderedReadOptions): AsyncGenerator<JsMsg> {
  const { filter, endSeq, signal } = options;
  let next = Math.max(1, options.fromSeq);
  let restartedAt: number | undefined;
  while (!signal?.aborted && (endSeq === undefined || next <= endSeq)) {
    const open = () => js.consumers.get(stream, { filter_subjects: filter, deliver_policy: DeliverPolicy.StartSequence, opt_start_seq: next });
    // A first consumer that cannot be made is the caller's error (an outage it reports). After a
    // stall the cluster is usually electing leaders: a follow waits for it as long as it is
    // wanted, a bounded read for RESTART_WITHIN_MS.
    const consumer = restartedAt === undefined ? await open() : await retryWhileNatsUnavailable(open, { signal, deadline: endSeq === undefined ? Infinity : restartedAt + RESTART_WITHIN_MS });
    if (consumer === undefined) return;
    let messages: ConsumerMessages | undefined;
    const stopOnAbort = () => messages?.stop();
    signal?.addEventListener('abort', stopOnAbort, { once: true });
    // `waiting`: the read is inside the iterator, waiting on the server (not on its own caller).
    const watch = { waiting: true, arrived: false, stalled: false };
    let timer: NodeJS.Timeout | undefined;
    try {
      // An abort while the consumer was being set up is seen here, and the consumer still deleted.
      if (signal?.aborted) return;
      messages = await consumer.consume({ max_messages: options.batch });
      if (signal?.aborted) return;
      const consumed = messages;
      timer = setInterval(() => {
        if (!watch.waiting || watch.arrived) {
          watch.arrived = false;
          return;
        }
        const waitingFor = next;
        lastMatchingSeq(jsm, stream, filter).then(
          (lastMatching) => {
            if (!watch.waiting || watch.arrived || next !== waitingFor || lastMatching < waitingFor || watch.stalled) return;
            watch.stalled = true;
            options.onStall?.({ filter, waitingFor, lastMatching });
            consumed.stop();
          },
          // The server cannot say either (an election under way): the next check asks again.
          () => undefined,
        );
      }, options.stallCheckMs ?? READ_STALL_CHECK_MS);
      timer.unref();
      for await (const message of consumed) {
        watch.arrived = true;
        if (endSeq !== undefined && message.seq > endSeq) return;
        next = message.seq + 1;
        watch.waiting = false;
        yield message;
        watch.waiting = true;
        if (endSeq !== undefined && message.seq >= endSeq) return;
      }
    } finally {
      clearInterval(timer);
      signal?.removeEventListener('abort', stopOnAbort);
      messages?.stop();
      // Bounded: the consumer's server may be the one that is gone (it expires on its own then).
      await Promise.race([consumer.delete().catch(() => undefined), new Promise((resolve) => setTimeout(resolve, DELETE_WAIT_MS).unref())]);
    }
    // Ended by the library (its consumer closed) or by an abort: the caller decides what that means.
    if (!watch.stalled) return;
    restartedAt = Date.now();
  }
}

/** How long a bounded read that stalled keeps trying to make its next consumer. */
const RESTART_WITHIN_MS = 15_000;

/** The last stream sequence `filter` matches (0 when none). */
export async function lastMatchingSeq(jsm: JetStreamManager, stream: string, filter: string): Promise<number> {
  const message = await jsm.direct.getMessage(stream, { last_by_subj: filter });
  return message?.seq ?? 0;
}
