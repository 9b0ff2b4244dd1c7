import { JetStreamApiCodes, JetStreamApiError } from '@nats-io/jetstream';
import { expect } from 'chai';
import { createServer } from 'node:net';
import { loadConfig } from '../../src/config/config.ts';
import { createLogger } from '../../src/log/logger.ts';
import { startService, type RunningService } from '../../src/runtime/service.ts';
import { AGENT_WORKER_CONSUMER } from '../../src/workers/agent-worker.ts';
import { serviceEnv } from '../support/cli.ts';
import { expectProblemResponse } from '../support/problem.ts';
import { sampleOf } from '../support/prometheus.ts';
import { startRun, waitForTerminalRun } from '../support/runs.ts';
import { startTestService, type TestService, type TestTenant } from '../support/test-service.ts';

/** The value of one series (0 when the series is absent). */
const sample = (metrics: string, series: string): number => sampleOf(metrics, series) ?? 0;

/**
 * A process without the http role (an agent worker scaled out on its own) still answers its
 * orchestrator's probes and Prometheus's scrapes on PORT, and only those: the runs it works on
 * are counted there and nowhere else.
 */
describe('a process without the http role serves health and metrics on its port', function () {
  this.timeout(60_000);
  let api: TestService;
  let worker: RunningService;
  let workerUrl: string;
  let tenant: TestTenant;

  before(async () => {
    api = await startTestService('opsport', { ROLES: 'http,projectors' });
    worker = await startService(loadConfig({ ...serviceEnv(api.config), PORT: '0', HOST: '127.0.0.1', ROLES: 'agent-worker' }), createLogger('silent'));
    workerUrl = worker.operations!.url;
    tenant = await api.tenant('ops');
  });
  after(async () => {
    await worker?.stop();
    await api?.stop();
  });

  it('has no API: the process of the http role has no operations listener, the worker no API routes and no console', async () => {
    expect(api.service.operations).to.equal(undefined);
    expect(worker.http).to.equal(undefined);
    await expectProblemResponse(await fetch(`${workerUrl}/api/v1/runs`, { headers: { authorization: `Bearer ${tenant.keys.read}` } }), 404, 'not-found');
    await expectProblemResponse(await fetch(`${workerUrl}/metrics`, { method: 'POST' }), 405, 'method-not-allowed');
    // No console either; the API process serves it.
    expect((await fetch(`${api.baseUrl}/console`)).status).to.equal(200);
    await expectProblemResponse(await fetch(`${workerUrl}/console`), 404, 'not-found');
  });

  it('answers /healthz and /readyz with its own checks', async () => {
    expect((await fetch(`${workerUrl}/healthz`)).status).to.equal(200);
    const ready = await fetch(`${workerUrl}/readyz`);
    expect(ready.status).to.equal(200);
    const readiness = (await ready.json()) as { checks: Record<string, { ok: boolean }> };
    expect(Object.keys(readiness.checks).sort()).to.deep.equal(['nats', 'postgres', 'read models']);
  });

  it("counts the runs it worked on and times each step where it ran, in its own /metrics", async () => {
    const before = await (await fetch(`${workerUrl}/metrics`)).text();
    const runId = await startRun(api, tenant.keys.write, tenant.accounts.sandbox, 'Find wasted spend in the search campaigns');
    const run = await waitForTerminalRun(api, tenant.keys.read, runId);
    expect(run.status).to.equal('succeeded');
    const toolCalls = (run.result.tool_calls as unknown[]).length;
    expect(toolCalls, 'the brief makes the agent call tools').to.be.greaterThan(0);

    const after = await (await fetch(`${workerUrl}/metrics`)).text();
    const added = (series: string) => sample(after, series) - sample(before, series);
    expect(added('agent_runs_finished_total{outcome="succeeded",code=""}')).to.equal(1);
    expect(added('agent_step_duration_seconds_count{step="model_turn"}')).to.equal(run.result.usage.steps);
    for (const step of ['check', 'tool', 'record']) expect(added(`agent_step_duration_seconds_count{step="${step}"}`), step).to.equal(toolCalls);
    expect(added('agent_step_duration_seconds_sum{step="record"}')).to.be.greaterThan(0);
    // The API process worked on no run: its counters did not move.
    const apiMetrics = await (await fetch(`${api.baseUrl}/metrics`)).text();
    expect(sample(apiMetrics, 'agent_step_duration_seconds_count{step="model_turn"}')).to.equal(0);
  });
});

describe('a process without the http role whose port is taken', function () {
  this.timeout(60_000);
  let api: TestService;

  before(async () => {
    api = await startTestService('opsportclash', { ROLES: 'http,projectors' });
  });
  after(async () => api?.stop());

  it('fails to start before it takes any work: a queued run stays queued for a worker that can start', async () => {
    const tenant = await api.tenant('clash');
    const runId = await startRun(api, tenant.keys.write, tenant.accounts.sandbox, 'Find wasted spend');
    const holder = createServer();
    await new Promise<void>((resolve) => holder.listen(0, '127.0.0.1', resolve));
    const port = (holder.address() as { port: number }).port;
    try {
      const config = loadConfig({ ...serviceEnv(api.config), PORT: String(port), HOST: '127.0.0.1', ROLES: 'agent-worker' });
      const failure = await startService(config, createLogger('silent')).then(
        async (started) => {
          await started.stop();
          return null;
        },
        (error: unknown) => error as NodeJS.ErrnoException,
      );
      expect(failure?.code).to.equal('EADDRINUSE');
    } finally {
      holder.close();
    }
    // Nothing was ever delivered to an agent worker: its durable consumer was not made, or made and never fed.
    const { jsm } = api.service.infrastructure;
    const consumer = await jsm.consumers.info(api.config.eventStream, AGENT_WORKER_CONSUMER).catch((error: unknown) => {
      if (error instanceof JetStreamApiError && error.code === JetStreamApiCodes.ConsumerNotFound) return null;
      throw error;
    });
    expect(consumer?.delivered.stream_seq ?? 0, 'no message reached an agent worker').to.equal(0);
    await new Promise((resolve) => setTimeout(resolve, 500));
    const run = await (await api.request('GET', `/api/v1/runs/${runId}`, { key: tenant.keys.read })).json();
    expect(run.status, 'no worker picked the run up').to.equal('queued');
  });
});
