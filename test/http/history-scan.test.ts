import { expect } from 'chai';
import type { RawStoredMessage } from '../../src/event-store/event-store.ts';
import { mergeBySequence } from '../../src/http/routes/history-scan.ts';

/** A source of the given sequences that records whether it was closed (each holds a consumer on the server). */
function source(seqs: readonly number[], closed: string[], name: string, failFirst = false): AsyncGenerator<RawStoredMessage> {
  return (async function* () {
    try {
      if (failFirst) throw new Error(`${name}: the server went away`);
      for (const seq of seqs) yield { seq, subject: name, data: new Uint8Array() } as unknown as RawStoredMessage;
    } finally {
      closed.push(name);
    }
  })();
}

describe('history: merging a run\'s subjects by sequence', () => {
  it('merges ascending sources into one stream order, a message on two of them once', async () => {
    const closed: string[] = [];
    const merged: number[] = [];
    for await (const message of mergeBySequence([source([1, 4, 6], closed, 'a'), source([2, 4, 5], closed, 'b')])) merged.push(message.seq);
    expect(merged).to.deep.equal([1, 2, 4, 5, 6]);
    expect(closed.sort()).to.deep.equal(['a', 'b']);
  });

  it('given a source whose first read fails, then the error reaches the reader and every other source is closed', async () => {
    const closed: string[] = [];
    const error = await (async () => {
      for await (const _ of mergeBySequence([source([1, 2], closed, 'a'), source([], closed, 'b', true), source([3], closed, 'c')])) void _;
    })().catch((e: unknown) => e);
    expect((error as Error).message).to.equal('b: the server went away');
    expect(closed.sort()).to.deep.equal(['a', 'b', 'c']);
  });
});
