import { expect } from 'chai';
import { sql } from 'kysely';
import { QuotaExceededError } from '../../src/http/quota/quota-errors.ts';
import { USAGE_READ_TTL_MS, WorkspaceQuotas } from '../../src/http/quota/workspace-quotas.ts';
import { startTestService, type TestService } from '../support/test-service.ts';

const HOUR_MS = 3_600_000;

/**
 * WorkspaceQuotas on a real runs read model with a clock of the test's own: what the quotas
 * decide when runs leave the window or tokens are used up between two requests, which the
 * HTTP tests cannot wait an hour for.
 */
describe('workspace quotas against a clock (the read model as the projector leaves it)', function () {
  this.timeout(30_000);
  let svc: TestService;
  const base = Date.parse('2026-11-26T12:00:00.000Z');
  let clock = base;

  before(async () => {
    svc = await startTestService('quota-clock', { ROLES: 'http,projectors' });
  });

  after(async () => {
    await svc?.stop();
  });

  /** Runs of `workspaceId` as the runs projection would have stored them, queued at `at`. */
  const storeRuns = async (workspaceId: string, at: number, count: number) => {
    const db = svc.service.infrastructure.database.db;
    for (let i = 0; i < count; i++) {
      await sql`
        insert into runs (id, workspace_id, account_id, key_id, scope, status, brief, auto_apply, created_at, usage, tool_calls, queued_seq, last_seq)
        values (${`${workspaceId}-run-${i}`}, ${workspaceId}, 'acc', 'key', 'write', 'queued', 'b', false, ${new Date(at).toISOString()}::timestamptz,
                '{"input_tokens":0,"output_tokens":0,"steps":0}'::jsonb, '[]'::jsonb, 1, 1)`.execute(db);
    }
  };

  const quotas = (limits: { runsPerHour: number; modelTokensPerDay: number }) =>
    new WorkspaceQuotas(svc.service.infrastructure.database.db, limits, () => new Date(clock));

  /** Admits a run; what `queue` is asked to do is counted. */
  const admit = async (subject: WorkspaceQuotas, workspaceId: string, runId: string) => {
    let queued = 0;
    try {
      await subject.admit(workspaceId, runId, async () => ++queued, () => undefined);
      return { queued };
    } catch (error) {
      if (!(error instanceof QuotaExceededError)) throw error;
      return { queued, refused: error.details as { quota: string; used: number; resets_at: string } };
    }
  };

  it('given a workspace at its run quota, when its oldest runs leave the window a moment after a refusal, then the next request is admitted (a refusal is never decided on an earlier read)', async () => {
    clock = base;
    // Queued an hour ago less 200 ms: in the window now, out of it 500 ms from now.
    await storeRuns('ws-window', base - HOUR_MS + 200, 3);
    const subject = quotas({ runsPerHour: 3, modelTokensPerDay: 0 });
    const first = await admit(subject, 'ws-window', 'run-a');
    expect(first.refused).to.include({ quota: 'runs_per_hour', used: 3 });
    expect(first.refused!.resets_at).to.equal(new Date(base + 200).toISOString());
    clock = base + 500;
    expect(clock - base, 'still within the time one read serves').to.be.lessThan(USAGE_READ_TTL_MS);
    expect(await admit(subject, 'ws-window', 'run-b')).to.deep.equal({ queued: 1 });
  });

  it('given a workspace whose tokens of today reach its token quota, when a run is asked for, then it is refused until the next UTC midnight', async () => {
    clock = base;
    const db = svc.service.infrastructure.database.db;
    await sql`insert into workspace_token_usage (workspace_id, day, tokens) values ('ws-tokens', '2026-11-26', 5000)`.execute(db);
    await sql`insert into workspace_token_usage (workspace_id, day, tokens) values ('ws-tokens-yesterday', '2026-11-25', 5000)`.execute(db);
    const subject = quotas({ runsPerHour: 0, modelTokensPerDay: 5000 });
    const refused = await admit(subject, 'ws-tokens', 'run-t');
    expect(refused.queued).to.equal(0);
    expect(refused.refused).to.include({ quota: 'model_tokens_per_day', used: 5000, resets_at: '2026-11-27T00:00:00.000Z' });
    expect(await admit(subject, 'ws-tokens-yesterday', 'run-y'), 'yesterday’s tokens do not count today').to.deep.equal({ queued: 1 });
  });
});
