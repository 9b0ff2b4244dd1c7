import { expect } from 'chai';
import { cachedRunBytes, TerminalRunCache, type CachedRun } from '../../src/http/routes/terminal-run-cache.ts';

const run = (size: number, workspaceId = 'ws'): CachedRun => ({ workspaceId, body: 'x'.repeat(size), etag: '"r-1"' });

describe('terminal-run cache', () => {
  it('keeps at most maxBytes: long result texts evict the least recently used runs', () => {
    const cache = new TerminalRunCache({ maxEntries: 1_000, maxBytes: 100_000 });
    for (let i = 0; i < 10; i++) cache.set(`run-${i}`, run(20_000));
    expect(cache.bytes).to.be.at.most(100_000);
    expect(cache.size).to.equal(2);
    expect(cache.get('run-9')).to.not.equal(undefined);
    expect(cache.get('run-0')).to.equal(undefined);
  });

  it('counts bytes down as well as up, so replacing and evicting frees room', () => {
    const cache = new TerminalRunCache({ maxBytes: 1_000_000 });
    cache.set('a', run(1_000));
    cache.set('a', run(1_000));
    cache.set('b', run(2_000));
    expect(cache.bytes).to.equal(cachedRunBytes('a', run(1_000)) + cachedRunBytes('b', run(2_000)));
  });

  it('a read makes a run recent: the other one is evicted first', () => {
    const cache = new TerminalRunCache({ maxBytes: 2 * cachedRunBytes('a', run(10_000)) + 10 });
    cache.set('a', run(10_000));
    cache.set('b', run(10_000));
    cache.get('a');
    cache.set('c', run(10_000));
    expect(cache.get('a')).to.not.equal(undefined);
    expect(cache.get('b')).to.equal(undefined);
  });

  it('does not keep a run larger than the whole budget', () => {
    const cache = new TerminalRunCache({ maxBytes: 10_000 });
    cache.set('small', run(100));
    cache.set('huge', run(50_000));
    expect(cache.get('huge')).to.equal(undefined);
    expect(cache.get('small')).to.not.equal(undefined);
  });

  it('still bounds entries', () => {
    const cache = new TerminalRunCache({ maxEntries: 3 });
    for (let i = 0; i < 5; i++) cache.set(`run-${i}`, run(10));
    expect(cache.size).to.equal(3);
  });
});
