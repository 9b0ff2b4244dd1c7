import { expect } from 'chai';
import { headers } from '@nats-io/nats-core';
import { PROJECTIONS } from '../../projections/index.ts';
import { readCheckpoint } from '../../projections/runtime/checkpoints.ts';
import { computeEventHash } from '../../src/events/event-hash.ts';
import type { EventEnvelope } from '../../src/events/envelope.ts';
import { runCli } from '../support/cli.ts';
import { eventually } from '../support/eventually.ts';
import { startRun, waitForTerminalRun } from '../support/runs.ts';
import { startTestService, type TestService, type TestTenant } from '../support/test-service.ts';
import { streams } from '../../src/event-store/subjects.ts';

describe('adsagent audit verify', function () {
  this.timeout(120_000);
  let svc: TestService;
  let tenant: TestTenant;

  before(async () => {
    svc = await startTestService('auditverify');
    tenant = await svc.tenant();
    const runId = await startRun(svc, tenant.keys.write, tenant.accounts.sandbox, 'Find wasted spend and add negative keywords', true);
    await waitForTerminalRun(svc, tenant.keys.write, runId);
    await settled();
  });
  after(async () => svc?.stop());

  /** Every projector has applied the whole stream (the apply worker may still be appending). */
  const settled = () =>
    eventually(async () => {
      const head = await svc.service.infrastructure.store.lastSequence();
      for (const projection of PROJECTIONS) {
        expect((await readCheckpoint(svc.service.infrastructure.database.db, projection.name))!.lastSeq).to.equal(head);
      }
      const pending = await svc.service.infrastructure.database.db.selectFrom('approvals').select('status').where('status', 'in', ['auto_applied', 'approved', 'applying']).execute();
      expect(pending).to.deep.equal([]);
    }, 20_000);

  it('passes an untouched log and read models, exit 0', async () => {
    const result = await runCli(svc.config, ['audit', 'verify', '--json']);
    expect(result.code, result.stderr).to.equal(0);
    const report = JSON.parse(result.stdout);
    expect(report.ok).to.equal(true);
    expect(report.events).to.equal(await svc.service.infrastructure.store.lastSequence());
    expect(report.readModelsChecked).to.deep.equal(PROJECTIONS.map((p) => p.name));
  });

  it('checks one account from a sequence on', async () => {
    const result = await runCli(svc.config, ['audit', 'verify', '--account', tenant.accounts.sandbox, '--from-seq', '3', '--json']);
    expect(result.code, result.stderr).to.equal(0);
    const report = JSON.parse(result.stdout);
    expect(report.events).to.be.greaterThan(5);
    expect(report.readModelsChecked).to.deep.equal([]);
  });

  it('catches a read model that differs from a fresh fold', async () => {
    const db = svc.service.infrastructure.database.db;
    const row = await db.selectFrom('runs').select(['id', 'result_text']).executeTakeFirstOrThrow();
    await db.updateTable('runs').set({ result_text: 'edited behind the log' }).where('id', '=', row.id).execute();
    try {
      const result = await runCli(svc.config, ['audit', 'verify', '--json']);
      expect(result.code).to.equal(1);
      const report = JSON.parse(result.stdout);
      expect(report.discrepancy.kind).to.equal('read_model_mismatch');
      expect(report.discrepancy.subject).to.equal('runs.runs');
      expect(report.discrepancy.detail).to.include('edited behind the log');
    } finally {
      await db.updateTable('runs').set({ result_text: row.result_text }).where('id', '=', row.id).execute();
    }
  });

  it('catches an event forged into a subject, naming its stream sequence', async () => {
    const { store, js, subjects } = svc.service.infrastructure;
    const subject = subjects.forAggregate(streams.account(tenant.workspaceId, tenant.accounts.sandbox));
    const genuine = (await store.lastOf(subject))!.event as EventEnvelope<string, Record<string, unknown>>;
    // An attacker with publish rights appends a copy with altered data, keeping the old hash.
    const forged = { ...genuine, id: crypto.randomUUID(), data: { ...genuine.data, text: 'all good, nothing to see' } };
    const h = headers();
    h.set('Ads-Event-Type', forged.type);
    const ack = await js.publish(subject, JSON.stringify(forged), { headers: h });

    const result = await runCli(svc.config, ['audit', 'verify', '--json']);
    expect(result.code).to.equal(1);
    const report = JSON.parse(result.stdout);
    expect(report.discrepancy).to.include({ kind: 'hash_mismatch', seq: ack.seq, subject });
    const human = await runCli(svc.config, ['audit', 'verify']);
    expect(human.code).to.equal(1);
    expect(human.stdout).to.include(`DISCREPANCY at stream sequence ${ack.seq}`);
  });

  it('catches a well-hashed event that breaks its aggregate chain', async () => {
    const other = await startTestService('auditchain');
    try {
      const t = await other.tenant();
      const { store, js, subjects } = other.service.infrastructure;
      const subject = subjects.forAggregate(streams.account(t.workspaceId, t.accounts.sandbox));
      const genuine = (await store.lastOf(subject))!.event;
      // Internally consistent (its hash matches its content) but linked to the genesis, not its predecessor.
      const inserted = { ...genuine, id: crypto.randomUUID(), prev_hash: '0'.repeat(64) } as EventEnvelope;
      const sealed = { ...inserted, hash: computeEventHash(inserted, inserted.prev_hash) };
      const ack = await js.publish(subject, JSON.stringify(sealed));
      const result = await runCli(other.config, ['audit', 'verify', '--json']);
      expect(result.code).to.equal(1);
      expect(JSON.parse(result.stdout).discrepancy).to.include({ kind: 'chain_broken', seq: ack.seq });
    } finally {
      await other.stop();
    }
  });
});
