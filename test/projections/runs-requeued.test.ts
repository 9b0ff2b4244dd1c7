import { expect } from 'chai';
import type { Kysely } from 'kysely';
import { v4 as uuidv4 } from 'uuid';
import { newEvent } from '../../commands/shared/new-event.ts';
import { runsProjection } from '../../projections/runs/runs-projection.ts';
import type { Database } from '../../src/db/schema.ts';
import { openDatabase, type DatabaseHandle } from '../../src/db/database.ts';
import type { StoredEvent } from '../../src/event-store/event-store.ts';
import { dropIsolated, isolatedConfig } from '../support/isolation.ts';

/**
 * The runs projection copies runs first queued in a batch in (COPY: cheaper for Postgres
 * than an upsert) and writes every other run with an upsert. A RunQueued whose run is
 * already stored must still be upserted as it always was (the run is queued again; who queued
 * it, when and its brief are kept), and never fail the batch.
 */
describe('runs projection: a run queued in a batch is inserted, or upserted when already stored', () => {
  const config = isolatedConfig('runs-requeued');
  let handle: DatabaseHandle;
  let db: Kysely<Database>;
  let seq = 0;

  before(async () => {
    handle = await openDatabase(config.databaseUrl, config.databaseSchema);
    db = handle.db;
    await runsProjection.createTables(db);
  });
  after(async () => {
    await handle.close();
    await dropIsolated(config);
  });

  const meta = { actor: { kind: 'system' as const, id: 'test' }, correlationId: 'c' };
  const address = (accountId: string) => ({ workspaceId: 'ws', accountId, aggregate: { type: 'account' as const, id: accountId } });
  const stored = (event: ReturnType<typeof newEvent>): StoredEvent => ({ seq: ++seq, subject: 's', event: { ...event, prev_hash: '0'.repeat(64), hash: '0'.repeat(64) } as any });
  const queued = (runId: string, accountId: string, brief: string) =>
    stored(newEvent('RunQueued', { run_id: runId, brief, auto_apply: false, key_id: 'k', scope: 'write' }, address(accountId), meta));
  const canceled = (runId: string, accountId: string) => stored(newEvent('RunCanceled', { run_id: runId }, address(accountId), meta));
  const apply = (events: StoredEvent[]) => db.transaction().execute((trx) => runsProjection.apply(trx, events));
  const row = (runId: string) => db.selectFrom('runs').select(['account_id', 'brief', 'status', 'queued_seq', 'finished_at']).where('id', '=', runId).executeTakeFirstOrThrow();

  it('inserts new runs, updates them in later batches, and upserts a stored run on a second RunQueued', async () => {
    const [a, b] = [uuidv4(), uuidv4()];
    const first = queued(a, 'acc-1', 'first brief');
    await apply([first, queued(b, 'acc-1', 'other'), canceled(b, 'acc-1')]);
    expect(await row(a)).to.include({ account_id: 'acc-1', brief: 'first brief', status: 'queued' });
    expect(await row(b)).to.include({ status: 'canceled' });

    await apply([canceled(a, 'acc-1')]);
    expect((await row(a)).status).to.equal('canceled');

    // The same run id queued again, with a new run beside it in the same batch.
    const again = queued(a, 'acc-2', 'second brief');
    const c = uuidv4();
    await apply([again, queued(c, 'acc-2', 'third')]);
    const requeued = await row(a);
    expect(requeued).to.include({ account_id: 'acc-1', brief: 'first brief', status: 'queued', finished_at: null });
    expect(Number(requeued.queued_seq)).to.equal(first.seq);
    expect((await row(c)).status).to.equal('queued');
    expect(Number((await db.selectFrom('runs').select((eb) => eb.fn.countAll().as('n')).executeTakeFirstOrThrow()).n)).to.equal(3);
  });
  it('unguarded (the projector\'s fast path), a second RunQueued fails the whole transaction, and the same batch then applies guarded', async () => {
    const [a, b] = [uuidv4(), uuidv4()];
    await apply([queued(a, 'acc-3', 'stored brief')]);
    const batch = [queued(b, 'acc-3', 'new'), queued(a, 'acc-3', 'queued again')];
    const unguarded = await db
      .transaction()
      .execute((trx) => runsProjection.apply(trx, batch, { guarded: false }))
      .catch((error: unknown) => error);
    expect((unguarded as { code?: string }).code).to.equal('23505');
    expect(await db.selectFrom('runs').select('id').where('id', '=', b).executeTakeFirst()).to.equal(undefined);

    await db.transaction().execute((trx) => runsProjection.apply(trx, batch, { guarded: true }));
    expect(await row(a)).to.include({ brief: 'stored brief', status: 'queued' });
    expect(await row(b)).to.include({ brief: 'new', status: 'queued' });
  });
});
