import { expect } from 'chai';
import pg from 'pg';
import { readCheckpoint } from '../../projections/runtime/checkpoints.ts';
import { CopyRole, LeasedProjector } from '../../projections/runtime/leased-projector.ts';
import { ProjectorLease, ProjectorLeaseLostError, projectorLeaseName } from '../../projections/runtime/projector-lease.ts';
import { createLogger } from '../../src/log/logger.ts';
import { openInfrastructure, type Infrastructure } from '../../src/runtime/infrastructure.ts';
import { ChainedAppender } from '../support/chained-appender.ts';
import { workspaceCreated } from '../support/event-factory.ts';
import { eventually } from '../support/eventually.ts';
import { dropIsolated, isolatedConfig, TEST_DATABASE_URL } from '../support/isolation.ts';
import { ledgerProjector, ledgerRows } from '../support/ledger-projection.ts';

const leaseOf = (name: string, heartbeatMs?: number) =>
  new ProjectorLease({ connect: () => new pg.Client({ connectionString: TEST_DATABASE_URL }), name, heartbeatMs });

/** Ends, from another session, the Postgres session that holds the lease `name` (as a Postgres restart or a dropped connection would). */
async function endHolderSession(name: string): Promise<number> {
  const admin = new pg.Client({ connectionString: TEST_DATABASE_URL });
  await admin.connect();
  try {
    const { rows } = await admin.query<{ ended: boolean }>(
      `select pg_terminate_backend(pid) as ended from pg_locks
        where locktype = 'advisory' and granted and ((classid::bigint << 32) | objid::bigint) = hashtextextended($1, 0)`,
      [name],
    );
    return rows.filter((row) => row.ended).length;
  } finally {
    await admin.end();
  }
}

describe('the projectors lease: one copy of the role projects, the others stand by', function () {
  this.timeout(60_000);

  describe('ProjectorLease', () => {
    const name = projectorLeaseName(`t_lease_${process.pid}`, `S_${Date.now()}`);
    const open: ProjectorLease[] = [];
    const lease = (leaseName = name, heartbeatMs?: number) => {
      const made = leaseOf(leaseName, heartbeatMs);
      open.push(made);
      return made;
    };
    afterEach(async () => {
      await Promise.all(open.splice(0).map((l) => l.release()));
    });

    it('is held by one session at a time, and taken by the next once released', async () => {
      const first = lease();
      const second = lease();
      expect(await first.tryTake()).to.equal(true);
      expect(await second.tryTake()).to.equal(false);
      expect(await second.tryTake()).to.equal(false);
      expect(first.isHeld).to.equal(true);
      expect(second.isHeld).to.equal(false);
      await first.release();
      expect(await second.tryTake()).to.equal(true);
    });

    it('does not stand in the way of another deployment (another schema or stream)', async () => {
      expect(await lease().tryTake()).to.equal(true);
      expect(await lease(projectorLeaseName(`t_lease_other_${process.pid}`, 'S')).tryTake()).to.equal(true);
    });

    it('settles lost() when Postgres ends its session, and a standby then takes it', async () => {
      const holder = lease();
      const standby = lease();
      expect(await holder.tryTake()).to.equal(true);
      const lost = holder.lost();
      expect(await endHolderSession(name)).to.equal(1);
      const error = await lost;
      expect(error).to.be.instanceOf(ProjectorLeaseLostError);
      expect(error.message).to.match(/^the projectors lease was lost: its connection/);
      expect(holder.isHeld).to.equal(false);
      await eventually(async () => expect(await standby.tryTake()).to.equal(true));
    });

    it('takes it again after a loss, with a new session', async () => {
      const holder = lease();
      expect(await holder.tryTake()).to.equal(true);
      const lost = holder.lost();
      await endHolderSession(name);
      await lost;
      expect(await holder.tryTake()).to.equal(true);
      expect(await lease().tryTake()).to.equal(false);
    });

    it('counts a session that stops answering its heartbeat as lost', async () => {
      const holder = lease(name, 200);
      expect(await holder.tryTake()).to.equal(true);
      // The heartbeat's `select 1` waits behind this statement on the lease's own session.
      void (holder as unknown as { client: pg.Client }).client.query('select pg_sleep(1)').catch(() => undefined);
      const error = await holder.lost();
      expect(error.message).to.include('did not answer within 200 ms');
      await eventually(async () => expect(await lease().tryTake()).to.equal(true));
    });

    it('given a holder gone silent (its host frozen or cut off, its socket left open), then Postgres ends its session after three heartbeats and a standby takes it', async () => {
      const holder = lease(name, 300);
      expect(await holder.tryTake()).to.equal(true);
      // A frozen host sends nothing: no heartbeat and no goodbye.
      clearInterval((holder as unknown as { heartbeat: NodeJS.Timeout }).heartbeat);
      const silentSince = Date.now();
      const standby = lease();
      expect(await standby.tryTake()).to.equal(false);
      // Without idle_session_timeout the session, and its lock, would live until TCP gave up: hours.
      await eventually(async () => expect(await standby.tryTake()).to.equal(true), 5000);
      expect(Date.now() - silentSince).to.be.at.least(800);
    });

    it('given a standby whose session does not answer, then its try fails within a heartbeat instead of hanging', async () => {
      expect(await lease().tryTake()).to.equal(true);
      const standby = lease(name, 200);
      expect(await standby.tryTake()).to.equal(false);
      // Its next try waits behind this statement on the standby's own session, as behind a half-open connection.
      void (standby as unknown as { client: pg.Client }).client.query('select pg_sleep(1)').catch(() => undefined);
      const started = Date.now();
      let failure: unknown;
      await standby.tryTake().catch((error: unknown) => (failure = error));
      expect(failure, 'the try fails').to.be.instanceOf(Error);
      expect(Date.now() - started).to.be.below(900);
    });

    it('says so when asked for a loss of a lease never taken', () => {
      expect(() => lease().lost()).to.throw('not held');
    });
  });

  describe('LeasedProjector: copies of a projector', () => {
    const config = isolatedConfig('projectorlease');
    let infra: Infrastructure;
    let appender: ChainedAppender;
    const copies: LeasedProjector[] = [];
    const leaseName = projectorLeaseName(config.databaseSchema, config.eventStream);

    before(async () => {
      infra = await openInfrastructure(config, 'test-projector-lease');
      appender = new ChainedAppender(infra);
    });
    afterEach(async () => {
      await Promise.all(copies.splice(0).map((copy) => copy.stop()));
    });
    after(async () => {
      await infra.close();
      await dropIsolated(config);
    });

    const copy = () => {
      const made = new LeasedProjector({ lease: leaseOf(leaseName), projector: () => ledgerProjector(infra, { batchSize: 25 }), logger: createLogger('silent'), pollMs: 100 });
      copies.push(made);
      return made;
    };

    let workspaces = 0;
    const appendEvents = async (count: number) => {
      for (let i = 0; i < count; i++) await appender.append(appender.workspaceSubject(`ws-lease-${workspaces++}`), workspaceCreated(`ws-lease-${workspaces - 1}`));
    };
    const head = () => infra.store.lastSequence();
    const caughtUp = async () => {
      const last = await head();
      await eventually(async () => expect((await readCheckpoint(infra.database.db, 'ledger'))?.lastSeq).to.equal(last), 20_000);
      return last;
    };
    const expectEachEventAppliedOnce = async (last: number) => {
      const rows = await ledgerRows(infra.database.db);
      expect(rows.map((r) => r.seq)).to.deep.equal(Array.from({ length: last }, (_, i) => i + 1));
      expect(rows.filter((r) => r.applied !== 1)).to.deep.equal([]);
    };

    it('runs one copy and keeps the other standing by, which holds no subscription', async () => {
      const first = copy();
      const second = copy();
      await first.start();
      await second.start();
      expect(first.role).to.equal(CopyRole.Active);
      expect(second.role).to.equal(CopyRole.Standby);
      expect(second.projector).to.equal(undefined);
      expect(second.statuses()).to.deep.equal([]);
      await appendEvents(300);
      const last = await caughtUp();
      // Copies sharing the consumer restarted their subscriptions against each other; one copy never needs to.
      expect(first.projector!.subscriptionRestarts).to.equal(0);
      expect(second.role).to.equal(CopyRole.Standby);
      await expectEachEventAppliedOnce(last);
    });

    it('hands over to the standby when the active copy stops', async () => {
      const first = copy();
      const second = copy();
      await first.start();
      await second.start();
      await appendEvents(50);
      await first.stop();
      await eventually(() => expect(second.role).to.equal(CopyRole.Active), 5000);
      expect(second.takeovers).to.equal(1);
      await appendEvents(50);
      await expectEachEventAppliedOnce(await caughtUp());
    });

    it('fails over within seconds when the active copy loses its session while events flow, each event applied once', async () => {
      const first = copy();
      const second = copy();
      await first.start();
      await second.start();
      const before = await head();
      let appending = true;
      const flow = (async () => {
        while (appending) await appendEvents(10);
      })();
      try {
        // Mid-work: the active copy has applied some of the flow.
        await eventually(async () => expect((await readCheckpoint(infra.database.db, 'ledger'))?.lastSeq ?? 0).to.be.greaterThan(before + 50));
        const lostAt = Date.now();
        expect(await endHolderSession(leaseName)).to.equal(1);
        await eventually(() => expect(second.role).to.equal(CopyRole.Active), 10_000);
        const takeoverMs = Date.now() - lostAt;
        expect(takeoverMs).to.be.below(5000);
        expect(first.role).to.equal(CopyRole.Standby);
        await eventually(() => expect(first.projector).to.equal(undefined));
        await new Promise((resolve) => setTimeout(resolve, 300));
      } finally {
        appending = false;
        await flow;
      }
      const last = await caughtUp();
      expect(last).to.be.greaterThan(0);
      await expectEachEventAppliedOnce(last);
      // The copy that lost it stands by and takes it back when the other goes.
      await second.stop();
      await eventually(() => expect(first.role).to.equal(CopyRole.Active), 5000);
      expect(first.takeovers).to.equal(1);
    });
  });
});
