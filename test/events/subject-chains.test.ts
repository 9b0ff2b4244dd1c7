import { expect } from 'chai';
import { GENESIS_HASH } from '../../src/events/envelope.ts';
import { ChainPlace, SubjectChains } from '../../src/events/subject-chains.ts';

/** An event's chain fields: `hash` h<n>, after `prev`. */
const link = (n: number, prev: string) => ({ prev_hash: prev, hash: `h${n}` });

/** What `chains` makes of these events, handed to it in this (stream) order. */
async function judge(chains: SubjectChains, events: readonly [seq: number, subject: string, event: { prev_hash: string; hash: string }][]): Promise<ChainPlace[]> {
  const places: ChainPlace[] = [];
  for (const [seq, subject, event] of events) places.push(await chains.place(seq, subject, event));
  return places;
}

describe('SubjectChains: where a reader of the stream finds each event in its subject\'s chain', () => {
  it('follows a subject from its first event, and a replayed copy is broken while the events after it continue', async () => {
    const chains = new SubjectChains();
    const places = await judge(chains, [
      [1, 'a', link(1, GENESIS_HASH)],
      [2, 'a', link(2, 'h1')],
      [3, 'a', link(2, 'h1')], // the stored bytes of seq 2 again
      [4, 'a', link(3, 'h2')],
    ]);
    expect(places).to.deep.equal([ChainPlace.Continues, ChainPlace.Continues, ChainPlace.Broken, ChainPlace.Continues]);
  });

  it('cannot judge a subject that started before the read, until an anchor starts it', async () => {
    const chains = new SubjectChains().anchorFrom('b', 5);
    const places = await judge(chains, [
      [3, 'a', link(7, 'h6')],
      [4, 'b', link(8, 'h7')], // before the anchor
      [5, 'b', link(9, 'h8')], // the anchor: believed in place
      [6, 'b', link(8, 'h7')], // seq 4 again
      [7, 'b', link(10, 'h9')],
    ]);
    expect(places).to.deep.equal([ChainPlace.Unknown, ChainPlace.Unknown, ChainPlace.Continues, ChainPlace.Broken, ChainPlace.Continues]);
  });

  it('starts an anchored subject at the first event it is handed at or after the anchor, when the anchored one is not believed', async () => {
    const chains = new SubjectChains().anchorFrom('b', 5);
    expect(await judge(chains, [[6, 'b', link(9, 'h8')], [7, 'b', link(10, 'h9')]])).to.deep.equal([ChainPlace.Continues, ChainPlace.Continues]);
  });

  it('takes a first event on an unseen subject as its start only where the subject\'s chain starts: a replayed one is broken and does not move the chain', async () => {
    const firstOf = new Map([
      ['a', 2],
      ['c', 12],
    ]);
    const asked: string[] = [];
    const chains = new SubjectChains({
      chainStartOf: async (subject) => {
        asked.push(subject);
        return firstOf.get(subject) ?? null;
      },
    });
    // The read starts at 10: subject a began at 2, and its first event is published again at 10;
    // subject c begins at 12.
    const places = await judge(chains, [
      [10, 'a', link(1, GENESIS_HASH)],
      [11, 'a', link(5, 'h4')],
      [12, 'c', link(20, GENESIS_HASH)],
      [13, 'c', link(21, 'h20')],
    ]);
    expect(places).to.deep.equal([ChainPlace.Broken, ChainPlace.Unknown, ChainPlace.Continues, ChainPlace.Continues]);
    expect(asked, 'one look per first event').to.deep.equal(['a', 'c']);
  });

  it('follows a bounded number of subjects: those first seen longest ago are dropped and judged unknown after', async () => {
    const chains = new SubjectChains({ maxSubjects: 10 });
    for (let n = 0; n < 11; n++) await chains.place(n + 1, `s${n}`, link(n, GENESIS_HASH));
    expect(await chains.place(20, 's0', link(100, 'h0'))).to.equal(ChainPlace.Unknown);
    expect(await chains.place(21, 's10', link(101, 'h10'))).to.equal(ChainPlace.Continues);
  });
});
