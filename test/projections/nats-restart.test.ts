import { OUTAGE_RIDE_THROUGH_MS } from '../../commands/shared/outage.ts';
import { expect } from 'chai';
import { readCheckpoint } from '../../projections/runtime/checkpoints.ts';
import { openInfrastructure, type Infrastructure } from '../../src/runtime/infrastructure.ts';
import { workspaceCreated } from '../support/event-factory.ts';
import { eventually } from '../support/eventually.ts';
import { dropIsolated, isolatedConfig } from '../support/isolation.ts';
import { ChainedAppender } from '../support/chained-appender.ts';
import { ledgerProjector, ledgerRows } from '../support/ledger-projection.ts';
import { PrivateNats } from '../support/private-nats.ts';

describe('a NATS crash in the middle of a stream of appends', function () {
  this.timeout(60_000);
  let nats: PrivateNats;
  let infra: Infrastructure;
  let config: ReturnType<typeof isolatedConfig>;

  before(async () => {
    nats = await PrivateNats.start();
    config = isolatedConfig('natsrestart', { NATS_URL: nats.url });
    infra = await openInfrastructure(config, 'test-nats-restart');
  });
  after(async () => {
    await infra?.close();
    await nats.restart().catch(() => undefined);
    await dropIsolated(config).catch(() => undefined);
    await nats.dispose();
  });

  it('keeps every acknowledged event, and projects each exactly once', async () => {
    const projector = ledgerProjector(infra);
    await projector.start();

    const acknowledged: string[] = [];
    const appender = new ChainedAppender(infra);
    let retries = 0;
    const appendWithRetry = async (i: number) => {
      const id = `agg-${i % 8}`;
      const subject = appender.workspaceSubject(id);
      const event = workspaceCreated(id);
      for (;;) {
        try {
          // Retrying the same event id is safe: JetStream answers a duplicate with the original sequence.
          await appender.append(subject, event);
          acknowledged.push(event.id);
          return;
        } catch {
          retries++;
          appender.forget(subject);
          await new Promise((resolve) => setTimeout(resolve, 100));
        }
      }
    };

    for (let i = 0; i < 300; i++) {
      if (i === 120) {
        await nats.kill();
        setTimeout(() => void nats.restart(), 1500);
      }
      await appendWithRetry(i);
    }
    expect(retries, 'the outage was felt by the writer').to.be.greaterThan(0);

    const stored = new Set<string>();
    for await (const { event } of infra.store.readFiltered(infra.subjects.all, 1)) stored.add(event.id);
    expect(acknowledged.filter((id) => !stored.has(id)), 'acknowledged but missing').to.deep.equal([]);

    const head = await infra.store.lastSequence();
    await eventually(async () => expect((await readCheckpoint(infra.database.db, 'ledger'))!.lastSeq).to.equal(head), 30_000);
    await projector.stop();
    const rows = await ledgerRows(infra.database.db);
    expect(rows).to.have.length(head);
    expect(rows.filter((r) => r.applied !== 1)).to.deep.equal([]);
    expect(new Set(rows.map((r) => r.event_id))).to.include.all.keys(...acknowledged);
  });

  it('answers API clients 503 instead of hanging or 500 while NATS is down, and recovers by itself', async () => {
    const { startTestService } = await import('../support/test-service.ts');
    const { campaignsByStrategy, targetPath } = await import('../safe-apply/helpers.ts');
    const svc = await startTestService('natsoutage-api', { NATS_URL: nats.url });
    try {
      const tenant = await svc.tenant();
      const post = () => svc.request('POST', '/api/v1/runs', { key: tenant.keys.write, body: { brief: 'b', project_id: tenant.accounts.disconnected } });
      const { cpa } = await campaignsByStrategy(svc, tenant.keys.read, tenant.accounts.sandbox);
      const proposeTarget = () =>
        svc.request('POST', targetPath(tenant.accounts.sandbox, cpa.id), { key: tenant.keys.write, body: { target_cpa: cpa.bidding_strategy.target_cpa! * 1.05, reason: 'outage test' } });
      await nats.kill();
      const started = Date.now();
      const during = await post();
      expect(during.status).to.equal(503);
      expect(during.headers.get('retry-after')).to.be.a('string');
      expect(Date.now() - started, 'answers within the request timeout, never hangs').to.be.below(20_000);
      // Like every API write, the target endpoint does not wait out the outage (the workers' 15 s ride-through).
      const proposalStarted = Date.now();
      const proposal = await proposeTarget();
      expect(proposal.status, await proposal.clone().text()).to.equal(503);
      expect(Date.now() - proposalStarted, 'a target proposal answers 503 without riding the outage out').to.be.below(OUTAGE_RIDE_THROUGH_MS);
      await nats.restart();
      await eventually(async () => expect((await post()).status).to.equal(202), 30_000, 500);
    } finally {
      await svc.stop();
    }
  });
});
