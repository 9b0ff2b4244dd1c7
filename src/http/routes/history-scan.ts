import type { RawStoredMessage } from '../../event-store/event-store.ts';

/**
 * Several ascending streams of stored messages merged into one, in stream order. Used to
 * read a run's own subjects (its account subject, run subject, action and quota subjects)
 * as one history, without scanning the rest of the account. Closing the merged generator
 * closes every source (each holds a consumer on the server).
 */
export async function* mergeBySequence(sources: readonly AsyncGenerator<RawStoredMessage>[]): AsyncGenerator<RawStoredMessage> {
  try {
    // Inside the try: a source whose first read fails must not leave the others' consumers open.
    const heads = await Promise.all(sources.map((source) => source.next()));
    for (;;) {
      let best = -1;
      for (let i = 0; i < heads.length; i++) {
        const head = heads[i]!;
        if (head.done) continue;
        if (best === -1 || head.value.seq < (heads[best]!.value as RawStoredMessage).seq) best = i;
      }
      if (best === -1) return;
      const message = heads[best]!.value as RawStoredMessage;
      heads[best] = await sources[best]!.next();
      // A subject that also matches another source's filter shows up once.
      for (let i = 0; i < heads.length; i++) {
        const head = heads[i]!;
        if (!head.done && head.value.seq === message.seq) heads[i] = await sources[i]!.next();
      }
      yield message;
    }
  } finally {
    await Promise.all(sources.map((source) => source.return(undefined).catch(() => undefined)));
  }
}
