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

  describe('tokenising any script (NFKC, lower case, letters/digits/marks)', () => {
    it('folds full-width and compatibility forms to plain lower-case letters', () => {
      expect(tokensOf('ＦＲＥＥ　Ｔｅｎｔ')).to.deep.equal(['free', 'tent']);
      expect(tokensOf('ﬁre pit')).to.deep.equal(['fire', 'pit']);
      expect(blocks('free tent', 'exact', 'ＦＲＥＥ ＴＥＮＴ')).to.equal(true);
    });

    it('keeps letters of every script, with their combining marks', () => {
      expect(tokensOf('Zelt günstig kaufen')).to.deep.equal(['zelt', 'günstig', 'kaufen']);
      expect(tokensOf('Palatka (палатка) недорого!')).to.deep.equal(['palatka', 'палатка', 'недорого']);
      expect(tokensOf('خيمة رخيصة')).to.deep.equal(['خيمة', 'رخيصة']);
      expect(tokensOf('सस्ता तम्बू')).to.deep.equal(['सस्ता', 'तम्बू']);
      expect(tokensOf('เต็นท์ ราคาถูก')).to.deep.equal(['เต็นท์', 'ราคาถูก']);
      expect(tokensOf('帐篷 便宜')).to.deep.equal(['帐篷', '便宜']);
      // A decomposed "é" (e + U+0301) becomes the same word as the composed one.
      expect(tokensOf('cafe\u0301')).to.deep.equal(tokensOf('café'));
      expect(blocks('палатка', 'broad', 'купить ПАЛАТКА дешево')).to.equal(true);
      expect(blocks('सस्ता', 'phrase', 'सस्ता तम्बू')).to.equal(true);
    });

    it('a text of only punctuation, symbols or emoji has no words and blocks nothing', () => {
      expect(tokensOf('!!! ??? ---')).to.deep.equal([]);
      expect(tokensOf('🔥🔥')).to.deep.equal([]);
      expect(blocks('🔥', 'broad', 'hot deals 🔥')).to.equal(false);
    });
  });
});
