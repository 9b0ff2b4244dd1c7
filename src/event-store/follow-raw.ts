import { DeliverPolicy, type JetStreamClient } from '@nats-io/jetstream';
import type { RawStoredMessage } from './event-store.ts';

/**
 * Every message matching `filter` from `fromSeq` on, then each new one, unparsed, until
 * `signal` aborts — for readers that must survive a message they cannot believe (the SSE
 * route). Unlike a listener added after the consumer exists, an abort that lands while
 * the consumer is being created is seen: the consumer is deleted at once, so a client
 * that disconnects during setup leaves no consumer behind on the server.
 */
export async function* followRaw(js: JetStreamClient, stream: string, filter: string, fromSeq: number, signal: AbortSignal): AsyncGenerator<RawStoredMessage> {
  if (signal.aborted) return;
  const consumer = await js.consumers.get(stream, {
    filter_subjects: filter,
    deliver_policy: DeliverPolicy.StartSequence,
    opt_start_seq: Math.max(1, fromSeq),
  });
  let messages: Awaited<ReturnType<typeof consumer.consume>> | undefined;
  const stop = () => messages?.stop();
  signal.addEventListener('abort', stop, { once: true });
  try {
    if (signal.aborted) return;
    messages = await consumer.consume({ max_messages: 256 });
    if (signal.aborted) return;
    for await (const message of messages) {
      if (signal.aborted) return;
      yield { seq: message.seq, subject: message.subject, text: message.string(), data: message.data };
    }
  } finally {
    signal.removeEventListener('abort', stop);
    messages?.stop();
    await consumer.delete().catch(() => undefined);
  }
}
