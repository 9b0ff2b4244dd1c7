import { expect } from 'chai';
import { sql } from 'kysely';
import { eventually } from '../support/eventually.ts';
import { sampleOf } from '../support/prometheus.ts';
import { ServiceMetrics } from '../../src/metrics/service-metrics.ts';
import { startRun, waitForTerminalRun } from '../support/runs.ts';
import { startTestService, type TestService, type TestTenant } from '../support/test-service.ts';

describe('GET /metrics and a stalled projector', function () {
  this.timeout(60_000);
  let svc: TestService;
  let tenant: TestTenant;

  before(async () => {
    svc = await startTestService('metrics');
    tenant = await svc.tenant();
  });
  after(async () => svc?.stop());

  const metrics = async () => {
    const response = await svc.request('GET', '/metrics');
    expect(response.status).to.equal(200);
    expect(response.headers.get('content-type')).to.include('text/plain');
    return response.text();
  };

  it('counts requests by route template, runs by outcome, and shows projector positions', async () => {
    const run = await waitForTerminalRun(svc, tenant.keys.write, await startRun(svc, tenant.keys.write, tenant.accounts.sandbox, 'Find wasted spend', true));
    expect(run.status).to.equal('succeeded');
    await eventually(async () => {
      const text = await metrics();
      expect(sampleOf(text, 'agent_runs_finished_total{outcome="succeeded",code=""}')).to.equal(1);
      expect(sampleOf(text, 'http_request_duration_seconds_count{method="POST",route="/api/v1/runs",status="202"}')).to.equal(1);
      expect(text).to.include('route="/api/v1/runs/:runId"').and.not.include(`route="/api/v1/runs/${run.id}"`);
      expect(sampleOf(text, 'projector_stalled{projection="runs"}')).to.equal(0);
      expect(sampleOf(text, 'projector_checkpoint_sequence{projection="runs"}')).to.be.greaterThan(0);
      // Every auto-applied action ends applied or returned (a re-check can send it back).
      const ended = (sampleOf(text, 'apply_results_total{result="applied"}') ?? 0) + (sampleOf(text, 'apply_results_total{result="returned"}') ?? 0);
      expect(ended).to.equal(run.result.actions.filter((a: { disposition: string }) => a.disposition === 'auto_applied').length);
    });
  });

  it('reports a projector that cannot apply its events in the metrics and in /readyz, until it recovers', async () => {
    const db = svc.service.infrastructure.database.db;
    // Writes to the approvals table fail (reads still work: proposing reads it for the policy).
    // The error is not a data error, so the projector retries in order and stalls, as it would
    // with Postgres half-down.
    await sql`create function approvals_offline() returns trigger language plpgsql as $$ begin raise exception 'approvals table offline (test)'; end $$`.execute(db);
    await sql`create trigger approvals_offline before insert or update on approvals for each row execute function approvals_offline()`.execute(db);
    try {
      // Any new action event makes the approvals projector fail.
      const campaigns = (await (await svc.request('GET', `/api/v1/accounts/${tenant.accounts.sandbox2}/campaigns`, { key: tenant.keys.read })).json()) as {
        data: { id: string; status: string; bidding_strategy: { type: string; target_cpa: number | null; portfolio: unknown } }[];
      };
      const cpa = campaigns.data.find((c) => c.bidding_strategy.type === 'maximize_conversions' && c.bidding_strategy.target_cpa !== null && !c.bidding_strategy.portfolio)!;
      const proposed = await svc.request('POST', `/api/v1/accounts/${tenant.accounts.sandbox2}/campaigns/${cpa.id}/target`, {
        key: tenant.keys.write,
        body: { target_cpa: Math.round(cpa.bidding_strategy.target_cpa! * 103) / 100, reason: 'test' },
      });
      expect(proposed.status).to.equal(200);
      await eventually(async () => {
        expect(sampleOf(await metrics(), 'projector_stalled{projection="approvals"}')).to.equal(1);
        const ready = await svc.request('GET', '/readyz');
        expect(ready.status).to.equal(503);
        const body = (await ready.json()) as { checks: { projections: { ok: boolean; detail: string } } };
        expect(body.checks.projections.detail).to.include('approvals stalled');
      });
      expect(sampleOf(await metrics(), 'projector_lag_events{projection="approvals"}')).to.be.greaterThan(0);
    } finally {
      await sql`drop trigger approvals_offline on approvals`.execute(db);
      await sql`drop function approvals_offline()`.execute(db);
    }
    await eventually(async () => {
      expect(sampleOf(await metrics(), 'projector_stalled{projection="approvals"}')).to.equal(0);
      expect((await svc.request('GET', '/readyz')).status).to.equal(200);
    }, 15_000);
  });
});

describe('projector metrics of a copy that goes from active to standby', () => {
  it('stop reporting the projections it no longer runs, and show the lease', async () => {
    let statuses = [{ name: 'runs', lastSeq: 40, stalled: true, lastError: 'connection lost', parked: 0 }];
    let copy = { role: 'active' as const, takeovers: 0 } as { role: 'active' | 'standby'; takeovers: number };
    const metrics = new ServiceMetrics({ projectors: () => statuses, streamHead: async () => 50, projectorCopy: () => copy });
    const text = () => metrics.registry.metrics();

    const active = await text();
    expect(sampleOf(active, 'projector_stalled{projection="runs"}')).to.equal(1);
    expect(sampleOf(active, 'projector_checkpoint_sequence{projection="runs"}')).to.equal(40);
    expect(sampleOf(active, 'projector_lag_events{projection="runs"}')).to.equal(10);
    expect(sampleOf(active, 'projector_lease_held')).to.equal(1);

    statuses = [];
    copy = { role: 'standby', takeovers: 0 };
    const standby = await text();
    // An alert on projector_stalled would otherwise fire for as long as the copy stands by.
    expect(sampleOf(standby, 'projector_stalled{projection="runs"}')).to.equal(undefined);
    expect(sampleOf(standby, 'projector_checkpoint_sequence{projection="runs"}')).to.equal(undefined);
    expect(sampleOf(standby, 'projector_lag_events{projection="runs"}')).to.equal(undefined);
    expect(sampleOf(standby, 'projector_lease_held')).to.equal(0);
  });
});

describe('projector lease metrics of a process without the projectors role', () => {
  it('are absent, not 0 (a 0 from every worker process would read as copies standing by)', async () => {
    const metrics = new ServiceMetrics({ projectors: () => [], streamHead: async () => 50 });
    const text = await metrics.registry.metrics();
    expect(text).to.not.include('projector_lease_held');
    expect(text).to.not.include('projector_lease_takeovers_total');
  });
});
