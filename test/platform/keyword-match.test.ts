import { expect } from 'chai';
import { negativeBlocks, tokensOf } from '../../src/platform/keyword-match.ts';

describe('negative keyword match types', () => {
  const blocks = (text: string, match_type: 'exact' | 'phrase' | 'broad', term: string) => negativeBlocks({ text, match_type }, term);

  it('exact blocks only the same words in the same order', () => {
    expect(blocks('free tent', 'exact', 'free tent')).to.equal(true);
    expect(blocks('free tent', 'exact', 'Free  Tent!')).to.equal(true);
    expect(blocks('free tent', 'exact', 'free tent sale')).to.equal(false);
    expect(blocks('free tent', 'exact', 'tent free')).to.equal(false);
  });

  it('phrase blocks the words together and in order, anywhere in the term', () => {
    expect(blocks('second hand', 'phrase', 'second hand hiking boots')).to.equal(true);
    expect(blocks('second hand', 'phrase', 'boots second hand')).to.equal(true);
    expect(blocks('second hand', 'phrase', 'hand second boots')).to.equal(false);
    expect(blocks('second hand', 'phrase', 'second pair of hand warmers')).to.equal(false);
  });

  it('matches whole words, never parts of words', () => {
    expect(blocks('free', 'phrase', 'gluten freeze dried')).to.equal(false);
    expect(blocks('free', 'broad', 'freebies')).to.equal(false);
  });

  it('broad blocks when every word appears, in any order', () => {
    expect(blocks('tent repair', 'broad', 'how to repair my tent')).to.equal(true);
    expect(blocks('tent repair', 'broad', 'tent poles')).to.equal(false);
  });

  it('an empty keyword blocks nothing', () => {
    expect(blocks('  ', 'broad', 'anything')).to.equal(false);
    expect(tokensOf('Hello, World!')).to.deep.equal(['hello', 'world']);
  });
});
