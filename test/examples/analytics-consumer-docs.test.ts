import { expect } from 'chai';
import { readFileSync } from 'node:fs';

const read = (path: string) => readFileSync(new URL(`../../${path}`, import.meta.url), 'utf8');

describe('examples/analytics-consumer/README.md', () => {
  it('documents exactly the environment variables the consumer reads', () => {
    const source = read('examples/analytics-consumer/approvals-per-day.ts');
    // Its own variables, and the NATS login ones it reads through the service's natsAccess.
    const reads = new Set([...source.matchAll(/env\.([A-Z][A-Z0-9_]+)/g)].map((match) => match[1]!));
    for (const match of read('src/config/nats-access-config.ts').matchAll(/'(NATS_[A-Z_]+)'/g)) reads.add(match[1]!);
    const documented = new Set<string>();
    for (const line of read('examples/analytics-consumer/README.md').split('\n')) {
      const firstCell = /^\| ([^|]+) \|/.exec(line)?.[1];
      if (!firstCell) continue;
      for (const name of firstCell.matchAll(/`([A-Z][A-Z0-9_]+)`/g)) documented.add(name[1]!);
    }
    expect([...documented].sort()).to.deep.equal([...reads].sort());
  });
});
