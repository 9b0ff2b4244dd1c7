import { expect } from 'chai';
import canonicalize from 'canonicalize';
import { randomInt } from 'node:crypto';
import { canonicalJson, inCanonicalOrder } from '../../src/events/canonical-json.ts';
import { sealEvent } from '../../src/events/event-hash.ts';
import { GENESIS_HASH } from '../../src/events/envelope.ts';
import { toolCalled } from '../support/event-factory.ts';

/**
 * Every event hash and signature is taken over canonical JSON, so the fast writer must give
 * exactly the `canonicalize` package's bytes (and refusals) for anything it is handed: a
 * single differing byte would make every stored event look forged.
 */
describe('canonical JSON', () => {
  const same = (value: unknown) => expect(canonicalJson(value), JSON.stringify(value)).to.equal(canonicalize(value));

  it('writes a sealed event as the package does', () => {
    same(sealEvent(toolCalled('ws_canon', 'run-1', 1, 300), GENESIS_HASH));
  });

  it('sorts keys by UTF-16 code units, integer-like keys included', () => {
    same({ b: 1, a: 2, B: 3, é: 4, '😀': 5, '～': 6, '': 7 });
    same({ 10: 'a', 9: 'b', ' ': 'c', '-1': 'd', '01': 'e', a: { 2: 1, 1: 2 } });
  });

  it('writes numbers, strings and nesting as RFC 8785 says', () => {
    same([0, -0, 1e21, 1e-7, 123.456, -5e-324, Number.MAX_SAFE_INTEGER, 2 ** 70]);
    same({ s: 'tab\there "quoted" \\ \u2028 \u007f é 😀', nested: [[[{ x: [null, true, false] }]]] });
  });

  it('drops undefined members and defers toJSON and undefined array items to the package', () => {
    same({ a: undefined, b: 1 });
    same({ when: new Date(0), list: [1, undefined, 2] });
  });

  it('refuses what the package refuses, with the same messages', () => {
    for (const bad of [Number.NaN, Number.POSITIVE_INFINITY, '\ud800', { ['\udc00']: 1 }, { a: ['ok', 'x\udbff'] }]) {
      expect(() => canonicalJson(bad)).to.throw(messageOf(() => canonicalize(bad)));
    }
    const cycle: Record<string, unknown> = {};
    cycle.self = cycle;
    expect(() => canonicalJson(cycle)).to.throw(/Circular/);
  });

  it('agrees with the package on random JSON values', () => {
    for (let i = 0; i < 2000; i++) same(randomJson(4));
  });

  it('agrees with the package on values already in canonical order (written as they are), and on their near misses', () => {
    for (let i = 0; i < 2000; i++) {
      const ordered = inCanonicalOrder(randomJson(4));
      same(ordered);
      same(JSON.parse(JSON.stringify(ordered)));
    }
    same({ a: 1, b: { d: 1, c: 2 } });
    same({ 1: 'a', 2: 'b', a: 'c' });
    same({ 2: 'a', 10: 'b' });
    same({ a: 'x', b: [1, { y: 1, x: 2 }] });
    for (const bad of [{ a: '\ud800' }, { a: [Number.NaN] }, { '\udc00': 1 }]) {
      expect(() => canonicalJson(bad)).to.throw(messageOf(() => canonicalize(bad)));
    }
  });

  it('refuses a value nested deeper than 64 levels the same way on every stack, and takes 64', () => {
    const nested = (depth: number, leaf: unknown = 1): unknown => {
      let value = leaf;
      for (let i = 0; i < depth; i++) value = [value];
      return value;
    };
    const deep = nested(3_000);
    // Fast path, the package's path (an integer-like key hands a value to it), and the writer's order.
    expect(() => canonicalJson(deep)).to.throw(TypeError, 'nested deeper than 64 levels');
    expect(() => canonicalJson({ 1: 'integer-like key', x: deep })).to.throw(TypeError, 'nested deeper than 64 levels');
    expect(() => sealEvent({ ...toolCalled('ws_canon', 'run-1', 1, 30), data: { deep } } as never, GENESIS_HASH)).to.throw(TypeError, 'nested deeper than 64 levels');
    // The same verdict with thousands of frames already on the stack (the package alone overflowed there).
    const underFrames = (frames: number): unknown => (frames === 0 ? (() => { try { return canonicalJson({ 1: 'k', x: nested(2_000) }); } catch (error) { return error; } })() : underFrames(frames - 1));
    expect(underFrames(2_000)).to.be.instanceOf(TypeError);
    same(nested(63));
    same({ 1: 'integer-like key', x: nested(62) });
  });

  it('seals events with their members in canonical order, so they are stored that way', () => {
    const sealed = sealEvent(toolCalled('ws_canon', 'run-1', 1, 30), GENESIS_HASH);
    expect(JSON.stringify(sealed)).to.equal(canonicalize(sealed));
    expect(Object.keys(sealed)).to.deep.equal([...Object.keys(sealed)].sort());
  });
});

function messageOf(work: () => unknown): string {
  try {
    work();
  } catch (error) {
    return (error as Error).message;
  }
  throw new Error('expected the package to refuse');
}

const KEY_CHARS = ['a', 'b', 'Z', '0', '1', '9', '-', ' ', 'é', '😀', '_', '~'];

function randomString(): string {
  return Array.from({ length: randomInt(0, 5) }, () => KEY_CHARS[randomInt(KEY_CHARS.length)]).join('');
}

function randomJson(depth: number): unknown {
  switch (randomInt(depth > 0 ? 7 : 5)) {
    case 0:
      return null;
    case 1:
      return randomInt(2) === 0;
    case 2:
      return (randomInt(2) === 0 ? 1 : -1) * Math.random() * 10 ** randomInt(-8, 25);
    case 3:
      return randomInt(-1000, 1000);
    case 4:
      return randomString();
    case 5:
      return Array.from({ length: randomInt(4) }, () => randomJson(depth - 1));
    default:
      return Object.fromEntries(Array.from({ length: randomInt(5) }, () => [randomString(), randomJson(depth - 1)]));
  }
}
