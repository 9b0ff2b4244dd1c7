import { expect } from 'chai';
import { cutDeeperThan, jsonNestingDepth, nestedTooDeep } from '../../src/text/json-depth.ts';

describe('JSON nesting depth', () => {
  it('counts the deepest arrays and objects of JSON text, brackets inside strings left out', () => {
    expect(jsonNestingDepth('{"edit":{"keywords":["a"]}}')).to.equal(3);
    expect(jsonNestingDepth('{"text":"[[[[{{{{"}')).to.equal(1);
    expect(jsonNestingDepth('"plain"')).to.equal(0);
  });

  it('given a value nested 100,000 levels, when cut at 33, then the copy is 33 deep and every walk after it is safe', () => {
    const depth = 100_000;
    const deep = JSON.parse(`{"deep":${'['.repeat(depth)}1${']'.repeat(depth)}}`) as unknown;
    expect(() => JSON.stringify(deep), 'what the cut is for').to.throw(RangeError);
    const cut = cutDeeperThan(deep, 33);
    const text = JSON.stringify(cut);
    expect(jsonNestingDepth(text)).to.equal(33);
    expect(text).to.include(JSON.stringify(nestedTooDeep(33)));
  });

  it('given a shallow value, when cut, then the copy is equal and keeps a "__proto__" key as a key', () => {
    const value = JSON.parse('{"a":[1,{"b":null}],"__proto__":{"x":1},"s":"t"}') as Record<string, unknown>;
    const cut = cutDeeperThan(value, 33) as Record<string, unknown>;
    expect(JSON.stringify(cut)).to.equal(JSON.stringify(value));
    expect(Object.getPrototypeOf(cut)).to.equal(Object.prototype);
    expect(Object.hasOwn(cut, '__proto__')).to.equal(true);
    expect(cutDeeperThan('text', 1)).to.equal('text');
  });
});
