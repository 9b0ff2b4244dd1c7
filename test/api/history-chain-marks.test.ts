import { expect } from 'chai';
import { markChainBreaks, type ChainVerdicts, type PageItem } from '../../src/http/routes/history-chain-marks.ts';

/** A page of events at these sequences, all on subject `s`. */
const page = (...seqs: number[]): PageItem[] => seqs.map((seq) => ({ seq, subject: 's', entry: { seq, type: 'ActionApproved' } }));

/** Verdicts whose wait gives `reached`, that cover the stream up to `upTo` when asked after it, with these breaks. */
function verdicts(options: { reached: boolean; upTo: number; breaks?: Record<number, string> }): ChainVerdicts {
  return {
    reach: async () => options.reached,
    judgedUpTo: async () => options.upTo,
    breaksAmong: async (seqs) => new Map(seqs.filter((seq) => options.breaks?.[seq] !== undefined).map((seq) => [seq, options.breaks![seq]!])),
  };
}

describe('history chain marks: a page as the projections judged it', () => {
  it('lists a replayed copy in its place as a chain-broken corrupt entry, and every other entry as it is', async () => {
    const { entries, cutAt } = await markChainBreaks(verdicts({ reached: true, upTo: 12, breaks: { 11: 'a replay' } }), page(10, 11, 12), 9);
    expect(cutAt).to.equal(null);
    expect(entries).to.deep.equal([
      { seq: 10, type: 'ActionApproved' },
      { seq: 11, subject: 's', corrupt: true, code: 'chain-broken', error: 'a replay' },
      { seq: 12, type: 'ActionApproved' },
    ]);
  });

  it('ends the page at the last judged sequence when the verdicts stay behind it', async () => {
    const { entries, cutAt } = await markChainBreaks(verdicts({ reached: false, upTo: 11 }), page(10, 11, 12), 9);
    expect(entries.map((entry) => entry.seq)).to.deep.equal([10, 11]);
    expect(cutAt).to.equal(11);
  });

  it('sends the walk back to its own cursor when nothing past it is judged', async () => {
    const { entries, cutAt } = await markChainBreaks(verdicts({ reached: false, upTo: 5 }), page(10, 11), 9);
    expect(entries).to.deep.equal([]);
    expect(cutAt).to.equal(9);
  });

  it('does not cut a page the verdicts came to cover after the wait gave up (its next_cursor would skip what the page did not read)', async () => {
    const { entries, cutAt } = await markChainBreaks(verdicts({ reached: false, upTo: 20 }), page(10, 11, 12), 9);
    expect(entries.map((entry) => entry.seq)).to.deep.equal([10, 11, 12]);
    expect(cutAt).to.equal(null);
  });
});
