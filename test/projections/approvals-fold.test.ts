import { expect } from 'chai';
import { sql } from 'kysely';
import { approvalsProjection } from '../../projections/approvals/approvals-projection.ts';
import { foldIntoSchema } from '../../projections/runtime/rebuild.ts';
import { newEvent, type CommandMeta } from '../../commands/shared/new-event.ts';
import type { EventData, EventType } from '../../src/events/catalogue/index.ts';
import { streams } from '../../src/event-store/subjects.ts';
import { openInfrastructure, type Infrastructure } from '../../src/runtime/infrastructure.ts';
import { actionProposal } from '../support/action-fixtures.ts';
import { ChainedAppender } from '../support/chained-appender.ts';
import { dropIsolated, isolatedConfig } from '../support/isolation.ts';

const WORKSPACE = 'ws-fold';
const ACCOUNT = 'acc-fold';
const META: CommandMeta = { actor: { kind: 'api_key', id: 'k_fold' }, correlationId: 'fold' };

/**
 * The approvals projection folds a batch in memory and writes each row once. Folded in one
 * batch and one event at a time, a stream must give the same rows (the second is what one
 * statement per event gave), including where a batch holds an action's whole life.
 */
describe('approvals projection: a batch folded at once writes the rows of one event at a time', () => {
  const config = isolatedConfig('approvalsfold');
  let infra: Infrastructure;

  before(async () => {
    infra = await openInfrastructure(config, 'test-approvals-fold');
  });
  after(async () => {
    for (const schema of ['fold_whole', 'fold_single']) await sql`drop schema if exists ${sql.id(`${config.databaseSchema}_${schema}`)} cascade`.execute(infra.database.db);
    await infra.close();
    await dropIsolated(config);
  });

  it('gives the same rows and parks the same events', async () => {
    const appender = new ChainedAppender(infra);
    let minute = 0;
    const append = async <T extends EventType>(actionId: string, type: T, data: EventData<T>) => {
      const address = streams.action(WORKSPACE, ACCOUNT, actionId);
      const at = new Date(Date.UTC(2026, 0, 1, 0, minute++, 0, 123));
      await appender.append(infra.subjects.forAggregate(address), newEvent(type, data, address, { ...META, now: at }));
    };
    const version = (summary: string, target: number) => ({ summary, params: { campaign_id: 'c1', target_cpa: target }, based_on: {}, risk_tier: 'review' as const, policy_reasons: [`r-${summary}`] });

    await append('a1', 'ActionProposed', actionProposal({ action_id: 'a1', summary: 'first' }));
    await append('a2', 'ActionProposed', actionProposal({ action_id: 'a2', summary: 'second', disposition: 'queued' }));
    await append('a1', 'ActionEdited', { before: version('first', 21), after: version('edited', 22), edit: { target_cpa: 22 } });
    await append('a1', 'ActionReturnedToQueue', { reason: 'look again' });
    await append('a1', 'ActionEdited', { before: version('edited', 22), after: version('edited again', 23), edit: { target_cpa: 23 } });
    await append('a1', 'ActionApproved', { note: 'fine' });
    await append('a1', 'ActionApplyStarted', { worker_id: 'w1', attempt: 1, claim_id: 'c-1', lease_until: '2026-01-01T01:00:00.000Z' });
    await append('a1', 'ActionApplyFailed', { worker_id: 'w1', attempt: 1, error: 'platform down', will_retry: true });
    await append('a2', 'ActionRejected', { reason: 'no' });
    await append('a1', 'ActionApplyStarted', { worker_id: 'w1', attempt: 2, claim_id: 'c-2', lease_until: '2026-01-01T01:00:00.000Z' });
    await append('a1', 'ActionApplied', { worker_id: 'w1', attempt: 2, partial_failures: [{ subject: 'keyword 1', error_code: 'X', message: 'refused' }] });
    // An action nobody proposed: its events change nothing.
    await append('a9', 'ActionApproved', { note: 'orphan' });
    // A second proposal of an existing id, on another subject: Postgres refuses it, it is parked.
    await append('a3', 'ActionProposed', actionProposal({ action_id: 'a1', summary: 'duplicate' }));
    await append('a4', 'ActionProposed', actionProposal({ action_id: 'a4', summary: 'fourth' }));

    const fold = async (schema: string, batchSize: number) => {
      const target = `${config.databaseSchema}_${schema}`;
      const result = await foldIntoSchema({ db: infra.database.db, store: infra.store, schema: target, filterSubject: infra.subjects.all, projection: approvalsProjection, batchSize });
      const { rows } = await sql<Record<string, unknown>>`select * from ${sql.id(target, 'approvals')} order by id`.execute(infra.database.db);
      return { result, rows };
    };
    // The first 12 events (every action's life but the duplicate's) in one batch, folded in
    // memory; the batch with the duplicate is refused whole and applied event by event.
    const whole = await fold('fold_whole', 12);
    const single = await fold('fold_single', 1);

    expect(whole.rows).to.deep.equal(single.rows);
    expect(whole.result).to.deep.equal(single.result);
    expect(whole.result.parked).to.equal(1);
    expect(whole.rows.map((r) => [r.id, r.status, r.summary, r.status_reason, r.apply_attempts])).to.deep.equal([
      ['a1', 'applied', 'edited again', 'applied except keyword 1: refused (X)', 2],
      ['a2', 'rejected', 'second', 'no', 0],
      ['a4', 'queued', 'fourth', null, 0],
    ]);
    expect((whole.rows[0]!.original as { summary: string }).summary).to.equal('first');
  });
});
