import { expect } from 'chai';
import { sql, type Kysely, type Transaction } from 'kysely';
import { readCheckpoint } from '../../projections/runtime/checkpoints.ts';
import type { Projection } from '../../projections/runtime/projection.ts';
import { auditVerifier, verifyEventLog } from '../../src/audit/verify-event-log.ts';
import type { Database } from '../../src/db/schema.ts';
import type { StoredEvent } from '../../src/event-store/event-store.ts';
import { openInfrastructure, type Infrastructure } from '../../src/runtime/infrastructure.ts';
import { ChainedAppender } from '../support/chained-appender.ts';
import { workspaceCreated } from '../support/event-factory.ts';
import { eventually } from '../support/eventually.ts';
import { dropIsolated, isolatedConfig } from '../support/isolation.ts';
import { ledgerProjection, slowedProjection, testProjector } from '../support/ledger-projection.ts';

/** Events per subject: a second read model beside the ledger, kept at another checkpoint. */
const tallyProjection: Projection = {
  name: 'tally',
  version: 1,
  tables: ['tally'],
  async createTables(db: Kysely<any>) {
    await db.schema.createTable('tally').addColumn('subject', 'text', (c) => c.primaryKey()).addColumn('events', 'integer', (c) => c.notNull()).execute();
  },
  async apply(trx: Transaction<Database>, events: readonly StoredEvent[]) {
    for (const { subject } of events) {
      await sql`insert into tally (subject, events) values (${subject}, 1) on conflict (subject) do update set events = tally.events + 1`.execute(trx);
    }
  },
};

describe('audit verify of read models at different checkpoints, folded in one pass', function () {
  this.timeout(60_000);
  const config = isolatedConfig('verifyreadmodels');
  let infra: Infrastructure;
  let appender: ChainedAppender;

  const project = async (projection: Projection) => {
    const projector = testProjector(infra, projection, { signatures: true });
    await projector.start();
    const head = await infra.store.lastSequence();
    await eventually(async () => expect((await readCheckpoint(infra.database.db, projection.name))?.lastSeq).to.equal(head));
    await projector.stop();
  };
  const append = async (from: number, count: number) => {
    for (let i = from; i < from + count; i++) {
      // Two events on every other subject, so the tally has counts above 1.
      await appender.append(appender.workspaceSubject(`ws-rm-${Math.floor(i / 2)}`), workspaceCreated(`ws-rm-${Math.floor(i / 2)}`));
    }
  };
  const verify = async () => {
    const phases = new Set<string>();
    const report = await verifyEventLog({
      store: infra.store,
      subjects: infra.subjects,
      verifier: auditVerifier(infra.signing),
      readModels: { db: infra.database.db, schema: config.databaseSchema, projections: [tallyProjection, ledgerProjection] },
      onProgress: (phase) => phases.add(phase),
    });
    return { report, phases: [...phases] };
  };

  before(async () => {
    infra = await openInfrastructure(config, 'test-verify-read-models');
    appender = new ChainedAppender(infra);
    await append(0, 40);
    await project(tallyProjection);
    await append(40, 30);
    await project(ledgerProjection);
    expect((await readCheckpoint(infra.database.db, 'tally'))?.lastSeq).to.equal(40);
    expect((await readCheckpoint(infra.database.db, 'ledger'))?.lastSeq).to.equal(70);
  });
  after(async () => {
    await infra.close();
    await dropIsolated(config);
  });

  it('given each read model at its own checkpoint, then each equals a fold up to it, from one read of the log', async () => {
    const { report, phases } = await verify();
    expect(report.discrepancy).to.equal(null);
    expect(report.events).to.equal(70);
    expect(report.readModelsChecked).to.deep.equal(['tally', 'ledger']);
    expect(phases).to.deep.equal(['events', 'fold read models']);
  });

  it('given an audit folding (its fold slowed down), then a second audit started meanwhile waits for it, and both find the read models clean', async () => {
    const slow = slowedProjection(tallyProjection, 0.3);
    const audit = (onProgress?: (phase: string) => void) =>
      verifyEventLog({
        store: infra.store,
        subjects: infra.subjects,
        verifier: auditVerifier(infra.signing),
        readModels: { db: infra.database.db, schema: config.databaseSchema, projections: [slow.projection, ledgerProjection] },
        onProgress,
      });
    const first = audit();
    await slow.firstBatch;
    const secondPhases = new Set<string>();
    const second = audit((phase) => secondPhases.add(phase));
    const reports = await Promise.all([first, second]);
    expect(reports.map((r) => r.discrepancy)).to.deep.equal([null, null]);
    expect(reports.map((r) => r.readModelsChecked)).to.deep.equal([['tally', 'ledger'], ['tally', 'ledger']]);
    expect([...secondPhases]).to.deep.equal(['events', 'wait for another audit', 'fold read models']);
  });

  it('given a row of the later read model edited, then it names that one and has checked both', async () => {
    await sql`update ledger set applied = 2 where seq = 55`.execute(infra.database.db);
    try {
      const { report } = await verify();
      expect(report.discrepancy?.kind).to.equal('read_model_mismatch');
      expect(report.discrepancy?.subject).to.equal('ledger.ledger');
      expect(report.discrepancy?.detail).to.include('applied is 2, a fresh fold gives 1');
      expect(report.readModelsChecked).to.deep.equal(['tally', 'ledger']);
    } finally {
      await sql`update ledger set applied = 1 where seq = 55`.execute(infra.database.db);
    }
  });

  it('given a row of the first read model edited, then it names that one and stops there', async () => {
    await sql`update tally set events = 7 where subject = (select min(subject) from tally)`.execute(infra.database.db);
    try {
      const { report } = await verify();
      expect(report.discrepancy?.subject).to.equal('tally.tally');
      expect(report.discrepancy?.detail).to.include('"events":7');
      expect(report.readModelsChecked).to.deep.equal(['tally']);
    } finally {
      await sql`update tally set events = 2 where subject = (select min(subject) from tally)`.execute(infra.database.db);
    }
  });
});
