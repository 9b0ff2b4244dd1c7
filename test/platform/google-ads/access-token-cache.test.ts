import { expect } from 'chai';
import { AccessTokenCache } from '../../../src/platform/google-ads/access-token-cache.ts';

describe('access token cache (per account, single-flight)', () => {
  let clock = 0;
  let exchanges = 0;
  let release: (() => void) | undefined;
  const cache = (lifetimeMs = 3_600_000, gate = false) =>
    new AccessTokenCache(
      async (accountId) => {
        exchanges++;
        const n = exchanges;
        if (gate) await new Promise<void>((resolve) => (release = resolve));
        return { token: `${accountId}-t${n}`, expiresAt: clock + lifetimeMs };
      },
      { now: () => clock },
    );
  beforeEach(() => {
    clock = 1_000_000;
    exchanges = 0;
  });

  it('keeps a token until 60 s before it expires, per account', async () => {
    const tokens = cache();
    expect(await tokens.get('a')).to.equal('a-t1');
    clock += 3_600_000 - 61_000;
    expect(await tokens.get('a')).to.equal('a-t1');
    expect(await tokens.get('b')).to.equal('b-t2');
    clock += 2_000;
    expect(await tokens.get('a')).to.equal('a-t3');
    expect(exchanges).to.equal(3);
  });

  it('reuses a short-lived token for half its lifetime', async () => {
    const tokens = cache(30_000);
    await tokens.get('a');
    clock += 14_000;
    await tokens.get('a');
    expect(exchanges).to.equal(1);
    clock += 2_000;
    await tokens.get('a');
    expect(exchanges).to.equal(2);
  });

  it('makes one exchange for concurrent callers, and one refresh for every caller that saw the same token refused', async () => {
    const tokens = cache(3_600_000, true);
    const waiting = Promise.all([tokens.get('a'), tokens.get('a'), tokens.get('a')]);
    await new Promise((resolve) => setImmediate(resolve));
    release!();
    expect(await waiting).to.deep.equal(['a-t1', 'a-t1', 'a-t1']);
    const refreshing = Promise.all([tokens.refresh('a', 'a-t1'), tokens.refresh('a', 'a-t1'), tokens.refresh('a', 'a-t1')]);
    await new Promise((resolve) => setImmediate(resolve));
    release!();
    expect(await refreshing).to.deep.equal(['a-t2', 'a-t2', 'a-t2']);
    // A late 401 for the old token gets the new one, without another exchange.
    expect(await tokens.refresh('a', 'a-t1')).to.equal('a-t2');
    expect(exchanges).to.equal(2);
  });

  it('a failed exchange is not cached: the next call tries again', async () => {
    let fail = true;
    const tokens = new AccessTokenCache(async () => {
      exchanges++;
      if (fail) throw new Error('invalid_grant');
      return { token: 'ok', expiresAt: clock + 3_600_000 };
    }, { now: () => clock });
    await tokens.get('a').then(() => expect.fail('should throw'), (e: Error) => expect(e.message).to.equal('invalid_grant'));
    fail = false;
    expect(await tokens.get('a')).to.equal('ok');
    expect(exchanges).to.equal(2);
  });
});
