import { expect } from 'chai';
import { clientAddressSubject } from '../../src/http/rate-limit/client-address.ts';
import { rateLimitHeaders } from '../../src/http/rate-limit/rate-limit-headers.ts';
import { TokenBuckets } from '../../src/http/rate-limit/token-buckets.ts';

describe('TokenBuckets', () => {
  const policy = { name: 'api-key', ratePerSecond: 2, burst: 4 };

  it('given an idle subject, when it sends burst + 1 requests at once, then the burst passes and the next waits for one token', () => {
    let clock = 0;
    const buckets = new TokenBuckets(policy, 100, () => clock);
    const decisions = Array.from({ length: 5 }, () => buckets.take('k'));
    expect(decisions.map((d) => d.allowed)).to.deep.equal([true, true, true, true, false]);
    expect(decisions.map((d) => d.remaining)).to.deep.equal([3, 2, 1, 0, 0]);
    expect(decisions[4]!.retryAfterSeconds).to.equal(1);
    expect(decisions[4]!.resetSeconds).to.equal(2);
    clock = 500; // half a second: one token back at 2/s
    expect(buckets.take('k').allowed).to.equal(true);
    expect(buckets.take('k').allowed).to.equal(false);
  });

  it('given one subject at its limit, then another subject still has its whole burst', () => {
    const buckets = new TokenBuckets(policy, 100, () => 0);
    for (let i = 0; i < 10; i++) buckets.take('busy');
    expect(buckets.take('other')).to.include({ allowed: true, remaining: 3 });
  });

  it('given more subjects than it may hold, then it forgets full buckets first and never grows past the bound', () => {
    let clock = 0;
    const buckets = new TokenBuckets(policy, 1000, () => clock);
    for (let i = 0; i < 500; i++) buckets.take(`old-${i}`);
    clock = 10_000; // every old bucket has refilled: forgetting them changes nothing
    for (let i = 0; i < 600; i++) for (let j = 0; j < 4; j++) buckets.take(`busy-${i}`);
    expect(buckets.size).to.be.at.most(1000);
    // The busy subjects were kept: each is still empty.
    expect(buckets.take('busy-599').allowed).to.equal(false);
    for (let i = 0; i < 5000; i++) buckets.take(`flood-${i}`);
    expect(buckets.size).to.be.at.most(1000);
  });

  it('announces the draft-10 fields', () => {
    const buckets = new TokenBuckets({ name: 'api-key', ratePerSecond: 20, burst: 40 }, 100, () => 0);
    expect(rateLimitHeaders({ name: 'api-key', ratePerSecond: 20, burst: 40 }, buckets.take('k'))).to.deep.equal({
      'RateLimit-Policy': '"api-key";q=40;w=2',
      RateLimit: '"api-key";r=39;t=1',
    });
  });
});

describe('clientAddressSubject', () => {
  it('keeps IPv4 addresses, also IPv4-mapped ones', () => {
    expect(clientAddressSubject('192.0.2.7')).to.equal('ip:192.0.2.7');
    expect(clientAddressSubject('::ffff:192.0.2.7')).to.equal('ip:192.0.2.7');
  });

  it('counts an IPv6 client per /64, however the address is written', () => {
    const subject = clientAddressSubject('2001:db8:1:2:aaaa:bbbb:cccc:dddd');
    expect(subject).to.equal('ip6:2001:db8:1:2::/64');
    expect(clientAddressSubject('2001:0db8:0001:0002::1')).to.equal(subject);
    expect(clientAddressSubject('2001:db8:1:2::ffff%eth0')).to.equal(subject);
    expect(clientAddressSubject('2001:db8:1:3::1')).to.not.equal(subject);
    expect(clientAddressSubject('::1')).to.equal('ip6:0:0:0:0::/64');
  });
});
