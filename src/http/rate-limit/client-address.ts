/**
 * The bucket subject of a request without a valid key: its socket address (X-Forwarded-For
 * is never trusted, see app.ts). An IPv6 client usually holds a whole /64, so IPv6 addresses
 * are limited per /64 prefix; otherwise one host could rotate through 2^64 addresses.
 */
export function clientAddressSubject(address: string): string {
  const bare = address.startsWith('::ffff:') && address.includes('.') ? address.slice(7) : address;
  if (!bare.includes(':')) return `ip:${bare}`;
  const [head = '', tail] = bare.split('%')[0]!.split('::');
  const left = head === '' ? [] : head.split(':');
  const right = tail === undefined || tail === '' ? [] : tail.split(':');
  const groups = tail === undefined ? left : [...left, ...Array<string>(Math.max(0, 8 - left.length - right.length)).fill('0'), ...right];
  return `ip6:${groups.slice(0, 4).map((group) => (group === '' ? '0' : group.toLowerCase().replace(/^0+(?=.)/, ''))).join(':')}::/64`;
}
