import { expect } from 'chai';
import { openInfrastructure, type Infrastructure } from '../../src/runtime/infrastructure.ts';
import { ChainedAppender } from '../support/chained-appender.ts';
import { toolCalled, workspaceCreated } from '../support/event-factory.ts';
import { dropIsolated, isolatedConfig } from '../support/isolation.ts';

/** Fails the test instead of hanging when a read does not end. */
async function collect<T>(read: AsyncGenerator<T>, timeoutMs = 5000): Promise<T[]> {
  const items: T[] = [];
  const timeout = new Promise<never>((_, reject) => setTimeout(() => reject(new Error('the read did not end')), timeoutMs).unref());
  await Promise.race([(async () => { for await (const item of read) items.push(item); })(), timeout]);
  return items;
}

describe('event store: filtered reads end where the filter ends', function () {
  this.timeout(120_000);
  const config = isolatedConfig('filteredreads');
  let infra: Infrastructure;
  const expected = new Map<string, number[]>();

  before(async () => {
    infra = await openInfrastructure(config, 'test-filtered-reads');
    // Two workspaces, interleaved, several aggregates each; the second keeps writing after the
    // first stops. Large events spread the stream over several file-store blocks, where
    // nats-server 2.9 over-counts num_pending for wildcard filters.
    const appender = new ChainedAppender(infra);
    for (let i = 0; i < 90; i++) {
      const workspace = i < 60 && i % 3 !== 0 ? 'wa' : 'wb';
      const large = i % 2 === 0;
      const id = `${workspace}-agg${i % 4}`;
      const subject = large
        ? infra.subjects.forAggregate({ workspaceId: workspace, accountId: 'acc', aggregate: { type: 'run', id } })
        : infra.subjects.forAggregate({ workspaceId: workspace, accountId: null, aggregate: { type: 'workspace', id } });
      const stored = await appender.append(subject, (position) =>
        large ? toolCalled(workspace, id, position.lastSequence + 1, 300_000) : workspaceCreated(id),
      );
      expected.set(workspace, [...(expected.get(workspace) ?? []), stored.seq]);
    }
  });
  after(async () => {
    await infra.close();
    await dropIsolated(config);
  });

  it('reads a wildcard filter from every start position, ending after its last match', async () => {
    const seqs = expected.get('wa')!;
    const filter = infra.subjects.filter('wa');
    for (let from = 1; from <= seqs[seqs.length - 1]! + 1; from++) {
      const read = await collect(infra.store.readFiltered(filter, from));
      expect(read.map((e) => e.seq), `from ${from}`).to.deep.equal(seqs.filter((s) => s >= from));
    }
  });

  it('stops at uptoSeq and returns nothing for a filter with no match', async () => {
    const seqs = expected.get('wb')!;
    const middle = seqs[Math.floor(seqs.length / 2)]!;
    const read = await collect(infra.store.readFiltered(infra.subjects.filter('wb'), 1, middle));
    expect(read.map((e) => e.seq)).to.deep.equal(seqs.filter((s) => s <= middle));
    expect(await collect(infra.store.readFiltered(infra.subjects.filter('nobody'), 1))).to.deep.equal([]);
  });
});
