import { expect } from 'chai';
import { spawn, type ChildProcess } from 'node:child_process';
import { sql } from 'kysely';
import { PROJECTIONS } from '../../projections/index.ts';
import { readCheckpoint } from '../../projections/runtime/checkpoints.ts';
import { openInfrastructure, type Infrastructure } from '../../src/runtime/infrastructure.ts';
import { ChainedAppender } from '../support/chained-appender.ts';
import { serviceEnv } from '../support/cli.ts';
import { workspaceCreated } from '../support/event-factory.ts';
import { eventually } from '../support/eventually.ts';
import { dropIsolated, isolatedConfig } from '../support/isolation.ts';
import { freePort } from '../support/private-nats.ts';
import { sampleOf } from '../support/prometheus.ts';

interface Copy {
  readonly child: ChildProcess;
  readonly url: string;
  readonly log: () => string;
}

/**
 * Two processes with only the projectors role, as an operator runs them for availability: one
 * projects, the other stands by, and killing the active one (SIGKILL: no goodbye, its Postgres
 * session simply ends) hands the projections to the other within seconds, nothing lost or doubled.
 */
describe('copies of the projectors role (two processes)', function () {
  this.timeout(120_000);
  const config = isolatedConfig('projectorcopies');
  let infra: Infrastructure;
  const copies: Copy[] = [];

  before(async () => {
    infra = await openInfrastructure(config, 'test-projector-copies');
  });
  after(async () => {
    for (const copy of copies) copy.child.kill('SIGKILL');
    await infra.close();
    await dropIsolated(config);
  });

  async function startCopy(): Promise<Copy> {
    const port = await freePort();
    const child = spawn(process.execPath, ['src/main.ts'], {
      env: { ...process.env, ...serviceEnv(config), LOG_LEVEL: 'info', ROLES: 'projectors', HOST: '127.0.0.1', PORT: String(port) },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    let log = '';
    child.stdout!.on('data', (chunk: Buffer) => (log += chunk.toString()));
    child.stderr!.on('data', (chunk: Buffer) => (log += chunk.toString()));
    const copy = { child, url: `http://127.0.0.1:${port}`, log: () => log };
    copies.push(copy);
    await eventually(() => expect(log).to.include('"msg":"service started"'), 60_000);
    return copy;
  }

  const leaseHeld = async (copy: Copy) => sampleOf(await (await fetch(`${copy.url}/metrics`)).text(), 'projector_lease_held');
  const readiness = async (copy: Copy) => {
    const response = await fetch(`${copy.url}/readyz`);
    return { status: response.status, body: (await response.json()) as { checks: Record<string, { ok: boolean; detail?: string }> } };
  };

  it('projects in one copy, fails over to the other when it is killed mid-work, and applies every event once', async () => {
    const appender = new ChainedAppender(infra);
    let created = 0;
    const createWorkspaces = async (count: number) => {
      for (let i = 0; i < count; i++, created++) await appender.append(appender.workspaceSubject(`ws-copy-${created}`), workspaceCreated(`ws-copy-${created}`));
    };

    const first = await startCopy();
    const second = await startCopy();
    expect(await leaseHeld(first)).to.equal(1);
    expect(await leaseHeld(second)).to.equal(0);
    expect(second.log()).to.include('this one stands by');
    const standby = await readiness(second);
    expect(standby.status).to.equal(200);
    expect(standby.body.checks.projections!.detail).to.match(/^standby \(another copy holds the projectors lease\); caught up at \d+/);

    let appending = true;
    const flow = (async () => {
      while (appending) await createWorkspaces(20);
    })();
    let takeoverMs: number;
    try {
      // Mid-work: the active copy has applied part of the flow.
      await eventually(async () => expect((await readCheckpoint(infra.database.db, 'identity'))?.lastSeq ?? 0).to.be.greaterThan(100), 20_000);
      const killedAt = Date.now();
      first.child.kill('SIGKILL');
      await eventually(async () => expect(await leaseHeld(second)).to.equal(1), 15_000);
      takeoverMs = Date.now() - killedAt;
      await eventually(() => expect(second.log()).to.include('took over the projectors lease'));
    } finally {
      appending = false;
      await flow;
    }
    await createWorkspaces(40);
    const head = await infra.store.lastSequence();
    for (const projection of PROJECTIONS) {
      await eventually(async () => expect((await readCheckpoint(infra.database.db, projection.name))?.lastSeq).to.equal(head), 20_000);
    }
    // One workspace row for each WorkspaceCreated, none missing; nothing parked.
    const { rows } = await sql<{ n: number }>`select count(*)::int as n from workspaces where id like 'ws-copy-%'`.execute(infra.database.db);
    expect(rows[0]!.n).to.equal(created);
    const parked = await sql<{ n: number }>`select count(*)::int as n from event_quarantine`.execute(infra.database.db);
    expect(parked.rows[0]!.n).to.equal(0);
    expect(takeoverMs).to.be.below(10_000);
    const active = await readiness(second);
    expect(active.status).to.equal(200);
    expect(active.body.checks.projections!.detail).to.equal(`caught up at ${head}`);
  });
});
