import { expect } from 'chai';
import { randomUUID } from 'node:crypto';
import { GENESIS_HASH } from '../../src/events/envelope.ts';
import { streams } from '../../src/event-store/subjects.ts';
import { workspaceCreated } from '../support/event-factory.ts';
import { runCli } from '../support/cli.ts';
import { startRun, waitForTerminalRun } from '../support/runs.ts';
import { startTestService, type TestService, type TestTenant } from '../support/test-service.ts';

/**
 * `audit verify --from-seq N` (how an auditor goes on after a discrepancy) judges each
 * subject's first event in the range against the last one before it, as a full audit does:
 * a replayed copy of a signed event is a discrepancy wherever the range starts.
 */
describe('adsagent audit verify --from-seq: a replay is caught wherever the range starts', function () {
  this.timeout(60_000);
  let svc: TestService;
  let tenant: TestTenant;
  let replayedSeq: number;
  let subject: string;

  before(async () => {
    svc = await startTestService('auditfromseq');
    tenant = await svc.tenant();
    const infra = svc.service.infrastructure;
    await waitForTerminalRun(svc, tenant.keys.write, await startRun(svc, tenant.keys.write, tenant.accounts.sandbox, 'A run before the replay'));
    subject = infra.subjects.forAggregate(streams.account(tenant.workspaceId, tenant.accounts.sandbox));
    let queuedSeq = 0;
    for await (const { seq, event } of infra.store.readFiltered(subject, 1)) if (event.type === 'RunQueued') queuedSeq = seq;
    // The exact signed bytes of the RunQueued again, as a holder of the NATS password could publish them.
    replayedSeq = (await infra.js.publish(subject, (await infra.store.rawAt(queuedSeq))!.data)).seq;
  });
  after(async () => svc?.stop());

  const verifyFrom = async (fromSeq: number, ...extra: string[]) => {
    const result = await runCli(svc.config, ['audit', 'verify', '--json', '--from-seq', String(fromSeq), ...extra]);
    return { code: result.code, report: JSON.parse(result.stdout) as { ok: boolean; events: number; subjects: number; discrepancy: { kind: string; seq: number; subject: string } | null } };
  };

  for (const [label, from] of [
    ['at the replay itself', 0],
    ['just before it', -1],
  ] as const) {
    it(`given a replayed signed event, when the range starts ${label}, then it is a chain_broken discrepancy at the replay (exit 1)`, async () => {
      const { code, report } = await verifyFrom(replayedSeq + from);
      expect(report.ok).to.equal(false);
      expect(report.discrepancy).to.deep.include({ kind: 'chain_broken', seq: replayedSeq, subject });
      expect(code).to.equal(1);
    });
  }

  it('given a copy of an older event published before the range, when the range starts at a copy of the event after it, then that copy is still chain_broken', async () => {
    const infra = svc.service.infrastructure;
    const genuine: number[] = [];
    for await (const raw of infra.store.readRaw(subject, 1, replayedSeq - 1)) genuine.push(raw.seq);
    const [earlier, later] = genuine.slice(-2) as [number, number];
    // The copy of `earlier` would end the chain before the range if heads were read off the log unjudged:
    // the copy of `later`, which names `earlier` as its predecessor, would then look like it continues it.
    await infra.js.publish(subject, (await infra.store.rawAt(earlier))!.data);
    const second = (await infra.js.publish(subject, (await infra.store.rawAt(later))!.data)).seq;
    const { code, report } = await verifyFrom(second);
    expect(report.discrepancy).to.deep.include({ kind: 'chain_broken', seq: second, subject });
    expect(code).to.equal(1);
  });

  it('given a genuine event copied onto a subject before its first event, when the range starts at that first event, then it verifies', async () => {
    const infra = svc.service.infrastructure;
    const workspaceId = randomUUID();
    const fresh = infra.subjects.forAggregate({ workspaceId, accountId: null, aggregate: { type: 'workspace', id: workspaceId } });
    // Signed bytes of another subject's event: refused there (its envelope names another subject), and no part of the new chain.
    const copied = (await infra.js.publish(fresh, (await infra.store.rawAt(replayedSeq))!.data)).seq;
    const [created] = await infra.store.append(fresh, [workspaceCreated(workspaceId)], { lastSequence: copied, lastHash: GENESIS_HASH });
    const { code, report } = await verifyFrom(created!.seq);
    expect(report.discrepancy, JSON.stringify(report.discrepancy)).to.equal(null);
    expect(report.ok).to.equal(true);
    expect(code).to.equal(0);
  });

  it('given a message whose subject and type carry terminal escape sequences, then the report prints them inert', async () => {
    const infra = svc.service.infrastructure;
    const hostileSubject = `${infra.subjects.prefix}.v1.\u001b]0;PWNED\u0007\u001b[31mRED.x.action.y`;
    const seq = (await infra.js.publish(hostileSubject, JSON.stringify({ type: '\u001b]0;OWNED\u0007\u001b[2J' }))).seq;
    const result = await runCli(svc.config, ['audit', 'verify', '--from-seq', String(seq)]);
    expect(result.code).to.equal(1);
    expect(result.stdout).to.include(`DISCREPANCY at stream sequence ${seq}`);
    // No ESC, BEL or other control character reaches the terminal: they print as U+FFFD.
    expect(result.stdout).to.not.match(/[\u0000-\u0008\u000B-\u001F\u007F-\u009F]/);
    expect(result.stdout).to.include('\uFFFD]0;PWNED\uFFFD');
  });

  it('given the same range for one account, then the replay is caught too, and only the range is read', async () => {
    const { report } = await verifyFrom(replayedSeq, '--account', tenant.accounts.sandbox);
    expect(report.discrepancy).to.deep.include({ kind: 'chain_broken', seq: replayedSeq });
    expect(report.events, 'events read: the replay alone').to.equal(1);
  });
});
