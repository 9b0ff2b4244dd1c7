import { expect } from 'chai';
import { readCheckpoint } from '../../projections/runtime/checkpoints.ts';
import { openInfrastructure, type Infrastructure } from '../../src/runtime/infrastructure.ts';
import { workspaceCreated } from '../support/event-factory.ts';
import { eventually } from '../support/eventually.ts';
import { dropIsolated, isolatedConfig } from '../support/isolation.ts';
import { ChainedAppender } from '../support/chained-appender.ts';
import { ledgerProjector, ledgerRows } from '../support/ledger-projection.ts';
import { PrivatePostgres } from '../support/private-postgres.ts';

describe('a Postgres crash while a projector works', function () {
  this.timeout(90_000);
  let postgres: PrivatePostgres;
  let infra: Infrastructure;
  let config: ReturnType<typeof isolatedConfig>;

  before(async function () {
    if (!PrivatePostgres.available()) this.skip();
    postgres = await PrivatePostgres.start();
    config = isolatedConfig('pgoutage', { DATABASE_URL: postgres.url });
    infra = await openInfrastructure(config, 'test-pg-outage');
  });
  after(async () => {
    await infra?.close().catch(() => undefined);
    await dropIsolated({ ...config, databaseUrl: postgres.url }).catch(() => undefined);
    await postgres?.dispose();
  });

  it('waits the outage out with backoff, then projects every event exactly once', async () => {
    const projector = ledgerProjector(infra);
    await projector.start();
    const appender = new ChainedAppender(infra);
    const append = async (i: number) => {
      const id = `agg-${i % 5}`;
      await appender.append(appender.workspaceSubject(id), workspaceCreated(id));
    };

    for (let i = 0; i < 60; i++) await append(i);
    await postgres.kill();
    // Events keep arriving while Postgres is down: the log does not depend on it.
    for (let i = 60; i < 150; i++) await append(i);
    await eventually(() => expect(projector.currentStatus().stalled).to.equal(true), 20_000);
    await postgres.restart();

    const head = await infra.store.lastSequence();
    await eventually(async () => expect((await readCheckpoint(infra.database.db, 'ledger'))?.lastSeq).to.equal(head), 40_000, 200);
    expect(projector.currentStatus().stalled).to.equal(false);
    await projector.stop();
    const rows = await ledgerRows(infra.database.db);
    expect(rows).to.have.length(head);
    expect(rows.filter((r) => r.applied !== 1)).to.deep.equal([]);
  });

  it('answers API clients 503 with Retry-After while Postgres is down, never 500, and recovers by itself', async () => {
    const { startTestService } = await import('../support/test-service.ts');
    const svc = await startTestService('pgoutage-api', { DATABASE_URL: postgres.url });
    try {
      const tenant = await svc.tenant();
      expect((await svc.request('GET', '/api/v1/accounts', { key: tenant.keys.read })).status).to.equal(200);
      await postgres.kill();

      const accounts = await svc.request('GET', '/api/v1/accounts', { key: tenant.keys.read });
      expect(accounts.status).to.equal(503);
      expect(accounts.headers.get('retry-after')).to.equal('5');
      expect(accounts.headers.get('content-type')).to.include('application/problem+json');
      expect(((await accounts.json()) as { type: string }).type).to.match(/service-unavailable$/);
      const unknownRun = await svc.request('GET', '/api/v1/runs/00000000-0000-4000-8000-000000000000', { key: tenant.keys.read });
      expect(unknownRun.status).to.equal(503);
      expect((await svc.request('GET', '/readyz')).status).to.equal(503);
      expect((await svc.request('GET', '/healthz')).status).to.equal(200);

      await postgres.restart();
      await eventually(async () => expect((await svc.request('GET', '/api/v1/accounts', { key: tenant.keys.read })).status).to.equal(200), 20_000, 200);
      await eventually(async () => expect((await svc.request('GET', '/readyz')).status).to.equal(200), 20_000, 200);
      // The lease's session died with Postgres: the copy stood by, took the lease again and projects what comes after.
      await eventually(() => expect(svc.service.projectorCopy?.role).to.equal('active'), 10_000);
      expect(svc.service.projectorCopy?.takeovers).to.equal(1);
      const later = await svc.tenant();
      await eventually(async () => expect((await svc.request('GET', '/api/v1/accounts', { key: later.keys.read })).status).to.equal(200), 20_000, 200);
    } finally {
      await svc.stop();
    }
  });
});
