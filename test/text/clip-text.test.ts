import { expect } from 'chai';
import { clipText } from '../../src/text/clip-text.ts';
import { hasHostileText } from '../../src/text/hostile-text.ts';

describe('clipText: a cut never splits a character', () => {
  it('leaves text within the limit as it is', () => {
    expect(clipText('abc', 3)).to.equal('abc');
    expect(clipText('ab😀', 4)).to.equal('ab😀');
  });

  it('cuts plain text at the limit', () => {
    expect(clipText('abcdef', 4)).to.equal('abcd');
  });

  it('leaves out a whole emoji the limit falls inside of, instead of half of it', () => {
    const clipped = clipText('ab😀cd', 3);
    expect(clipped).to.equal('ab');
    expect(hasHostileText(clipped)).to.equal(false);
  });

  it('keeps an emoji that ends exactly at the limit', () => {
    expect(clipText('ab😀cd', 4)).to.equal('ab😀');
  });

  it('gives nothing for a limit of 0', () => {
    expect(clipText('😀', 0)).to.equal('');
  });

  it('never leaves a lone surrogate, at every limit over text full of emoji', () => {
    const text = '😀a😀😀b'.repeat(5);
    for (let max = 0; max <= text.length; max++) {
      const clipped = clipText(text, max);
      expect(clipped.length, `max ${max}`).to.be.at.most(max);
      expect(clipped.length, `max ${max}`).to.be.at.least(max - 1);
      expect(hasHostileText(clipped), `max ${max}`).to.equal(false);
    }
  });
});
