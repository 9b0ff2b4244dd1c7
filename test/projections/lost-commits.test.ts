import { expect } from 'chai';
import pg from 'pg';
import { sql } from 'kysely';
import { readCheckpoint } from '../../projections/runtime/checkpoints.ts';
import type { Projector } from '../../projections/runtime/projector.ts';
import { openInfrastructure, type Infrastructure } from '../../src/runtime/infrastructure.ts';
import { ChainedAppender } from '../support/chained-appender.ts';
import { workspaceCreated } from '../support/event-factory.ts';
import { eventually } from '../support/eventually.ts';
import { dropIsolated, isolatedConfig } from '../support/isolation.ts';
import { ledgerProjector, ledgerRows } from '../support/ledger-projection.ts';
import { PrivatePostgres } from '../support/private-postgres.ts';

/**
 * Projector transactions commit without waiting for the disk (deferred-flush.ts): a crash of
 * Postgres can take their last commits with it, after the projector acknowledged those events
 * on the stream. So can a restore of the database. Either way the read model must come back to
 * every event exactly once, by itself, without a restart of the projector.
 */
/** The projector's delivery watch ticks every third of this: how soon it reads the stored checkpoints on a quiet stream. */
const QUIET_CHECK_MS = 1500;

describe('a projection whose checkpoint went back under a running projector', function () {
  this.timeout(120_000);

  async function appendEvents(appender: ChainedAppender, from: number, count: number): Promise<void> {
    for (let i = from; i < from + count; i++) {
      const id = `agg-${i % 5}`;
      await appender.append(appender.workspaceSubject(id), workspaceCreated(id));
    }
  }

  async function expectEveryEventOnce(infra: Infrastructure, projector: Projector): Promise<void> {
    const head = await infra.store.lastSequence();
    await eventually(async () => expect((await readCheckpoint(infra.database.db, 'ledger'))?.lastSeq).to.equal(head), 30_000, 100);
    const rows = await ledgerRows(infra.database.db);
    expect(rows.map((row) => Number(row.seq))).to.deep.equal(Array.from({ length: head }, (_, i) => i + 1));
    expect(rows.filter((row) => row.applied !== 1)).to.deep.equal([]);
    expect(projector.currentStatus().lastSeq).to.equal(head);
  }

  describe('restored to an earlier state', () => {
    let infra: Infrastructure;
    let config: ReturnType<typeof isolatedConfig>;
    before(async () => {
      config = isolatedConfig('lostrestore');
      infra = await openInfrastructure(config, 'test-lost-restore');
    });
    after(async () => {
      await infra?.close().catch(() => undefined);
      await dropIsolated(config).catch(() => undefined);
    });

    it('projects the events after the restored checkpoint again, each once, with no new event to show it, and goes on', async () => {
      const projector = ledgerProjector(infra, { deliveryStallMs: QUIET_CHECK_MS });
      await projector.start();
      try {
        const { db } = infra.database;
        const appender = new ChainedAppender(infra);
        await appendEvents(appender, 0, 30);
        await eventually(async () => expect((await readCheckpoint(db, 'ledger'))?.lastSeq).to.equal(30), 20_000, 20);
        // A backup of the projection's state at sequence 30: its rows, chain heads and checkpoint.
        await db.transaction().execute(async (trx) => {
          await sql`create table backup_ledger as select * from ledger`.execute(trx);
          await sql`create table backup_heads as select * from ledger_chain_heads`.execute(trx);
          await sql`create table backup_checkpoint as select * from projection_checkpoints where projection = 'ledger'`.execute(trx);
        });
        await appendEvents(appender, 30, 20);
        await eventually(async () => expect((await readCheckpoint(db, 'ledger'))?.lastSeq).to.equal(50), 20_000, 20);

        // The backup restored under the running projector, which acknowledged up to 50 on the stream.
        await db.transaction().execute(async (trx) => {
          await sql`delete from ledger`.execute(trx);
          await sql`insert into ledger select * from backup_ledger`.execute(trx);
          await sql`delete from ledger_chain_heads`.execute(trx);
          await sql`insert into ledger_chain_heads select * from backup_heads`.execute(trx);
          await sql`update projection_checkpoints c set last_seq = b.last_seq, updated_at = b.updated_at from backup_checkpoint b where c.projection = b.projection`.execute(trx);
        });
        expect((await readCheckpoint(db, 'ledger'))?.lastSeq).to.equal(30);
        // No event arrives meanwhile: the projector notices by itself.
        await expectEveryEventOnce(infra, projector);
        await appendEvents(appender, 50, 30);
        await expectEveryEventOnce(infra, projector);
      } finally {
        await projector.stop();
      }
    });
  });

  describe('lost in a crash of Postgres', () => {
    let postgres: PrivatePostgres;
    let infra: Infrastructure;
    let config: ReturnType<typeof isolatedConfig>;

    before(async function () {
      if (!PrivatePostgres.available()) this.skip();
      // The WAL writer writes a partly filled page of WAL only this often: the last commits stay in memory.
      postgres = await PrivatePostgres.start({ settings: { wal_writer_delay: '10s' } });
      config = isolatedConfig('lostcrash', { DATABASE_URL: postgres.url });
      infra = await openInfrastructure(config, 'test-lost-crash');
    });
    after(async () => {
      await infra?.close().catch(() => undefined);
      await dropIsolated({ ...config, databaseUrl: postgres.url }).catch(() => undefined);
      await postgres?.dispose();
    });

    async function storedCheckpoint(): Promise<number> {
      const client = new pg.Client({ connectionString: postgres.url });
      await client.connect();
      try {
        const { rows } = await client.query<{ last_seq: string }>(`select last_seq from ${config.databaseSchema}.projection_checkpoints where projection = 'ledger'`);
        return Number(rows[0]?.last_seq ?? 0);
      } finally {
        await client.end();
      }
    }

    it('projects what the crash took again, each event once, with no new event to show it, and goes on', async () => {
      const projector = ledgerProjector(infra, { deliveryStallMs: QUIET_CHECK_MS });
      await projector.start();
      try {
        const appender = new ChainedAppender(infra);
        let appended = 0;
        let lost = 0;
        // A crash loses commits only when the last ones did not fill a page of WAL: a few tries at most.
        for (let attempt = 0; attempt < 4 && lost === 0; attempt++) {
          await appendEvents(appender, appended, 60);
          appended += 60;
          await eventually(() => expect(projector.currentStatus().lastSeq).to.equal(appended), 20_000, 20);
          await postgres.kill({ everyProcess: true });
          await postgres.restart();
          lost = appended - (await storedCheckpoint());
        }
        // Else the test shows nothing: Postgres must have lost the projector's acknowledged commits.
        expect(lost, 'events whose projection the crash took').to.be.greaterThan(0);

        await expectEveryEventOnce(infra, projector);
        await appendEvents(appender, appended, 20);
        await expectEveryEventOnce(infra, projector);
      } finally {
        await projector.stop();
      }
    });
  });
});
