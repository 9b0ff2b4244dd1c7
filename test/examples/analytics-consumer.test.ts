import { expect } from 'chai';
import { headers } from '@nats-io/nats-core';
import { generateKeyPairSync } from 'node:crypto';
import pg from 'pg';
import { v4 as uuidv4 } from 'uuid';
import {
  ApprovalsPerDayConsumer,
  formatCounts,
  type CommittedEvent,
  type DayCount,
} from '../../examples/analytics-consumer/approvals-per-day.ts';
import { EVENT_TYPE_HEADER, EVENT_VERSION_HEADER } from '../../src/event-store/event-store.ts';
import type { EventEnvelope, UnsealedEvent } from '../../src/events/envelope.ts';
import { sealEvent } from '../../src/events/event-hash.ts';
import { EventSigner } from '../../src/events/signing/event-signer.ts';
import { eventually } from '../support/eventually.ts';
import { keyIdOf } from '../../src/events/signing/signing-keys.ts';
import { exampleConsumerOn, testServiceSigningKey } from '../support/example-consumer.ts';
import { startTestService, type TestService, type TestTenant } from '../support/test-service.ts';

interface Totals {
  approved: number;
  auto_applied: number;
}

/**
 * examples/analytics-consumer against a real service: actions are created through the HTTP
 * API, counted by the example's durable consumer, and the counts stay exact across a
 * graceful stop mid-stream and a crash between COMMIT and ack, and against forged and
 * replayed events published straight onto the stream.
 */
describe('examples/analytics-consumer: approvals per day', function () {
  this.timeout(60_000);
  let svc: TestService;
  let tenant: TestTenant;
  let accounts: string[];
  const campaignOf = new Map<string, { id: string; targetCpa: number }>();
  const expected = new Map<string, Totals>();
  const consumers: ApprovalsPerDayConsumer[] = [];
  let schema: string;
  /** What the running consumer does after each COMMIT; each phase sets its own. */
  let afterCommit: ((event: CommittedEvent) => void | Promise<void>) | undefined;

  before(async () => {
    // No apply worker: targets never move, so every relative change below stays as computed.
    svc = await startTestService('analytics', { ROLES: 'http,projectors' });
    schema = `${svc.config.databaseSchema}_analytics`;
    tenant = await svc.tenant('analytics');
    accounts = [tenant.accounts.sandbox, tenant.accounts.sandbox2];
    for (const account of accounts) {
      const listed = await call('GET', `/api/v1/accounts/${account}/campaigns`, tenant.keys.read);
      expect(listed.status, JSON.stringify(listed.body)).to.equal(200);
      const campaign = (listed.body.data as any[]).find(
        (c) =>
          c.status === 'enabled' &&
          c.bidding_strategy.type === 'maximize_conversions' &&
          c.bidding_strategy.target_cpa !== null &&
          c.bidding_strategy.portfolio === null,
      );
      if (!campaign) throw new Error(`account ${account} has no target-CPA campaign`);
      campaignOf.set(account, { id: campaign.id, targetCpa: campaign.bidding_strategy.target_cpa });
      expected.set(account, { approved: 0, auto_applied: 0 });
    }
  });

  after(async () => {
    for (const consumer of consumers) await consumer.kill().catch(() => undefined);
    if (!svc) return;
    await svc.stop();
    const client = new pg.Client({ connectionString: svc.config.databaseUrl });
    await client.connect();
    await client.query(`DROP SCHEMA IF EXISTS "${schema}" CASCADE`);
    await client.end();
  });

  const unrelated = new EventSigner(generateKeyPairSync('ed25519').privateKey);

  async function dropSchema(name: string): Promise<void> {
    const client = new pg.Client({ connectionString: svc.config.databaseUrl });
    await client.connect();
    await client.query(`DROP SCHEMA IF EXISTS "${name}" CASCADE`);
    await client.end();
  }

  async function call(method: string, path: string, key: string, body?: unknown): Promise<{ status: number; body: any }> {
    const response = await svc.request(method, path, { key, body });
    const text = await response.text();
    return { status: response.status, body: text === '' ? null : JSON.parse(text) };
  }

  async function proposeTarget(account: string, factor: number, autoApply: boolean): Promise<any> {
    const campaign = campaignOf.get(account)!;
    const target = Math.round(campaign.targetCpa * factor * 100) / 100;
    const result = await call('POST', `/api/v1/accounts/${account}/campaigns/${campaign.id}/target`, tenant.keys.write, {
      target_cpa: target,
      reason: 'analytics example test',
      auto_apply: autoApply,
    });
    expect(result.status, JSON.stringify(result.body)).to.equal(200);
    return result.body;
  }

  /** A ≤10 % change with auto_apply: safe tier, auto-applied. */
  async function autoApplied(account: string): Promise<void> {
    const action = await proposeTarget(account, 1.05, true);
    expect(action.disposition, JSON.stringify(action)).to.equal('auto_applied');
    expected.get(account)!.auto_applied++;
  }

  /** A 30 % change: review tier, queued; then a person approves it. */
  async function approved(account: string): Promise<void> {
    const action = await proposeTarget(account, 1.3, true);
    expect(action.disposition, JSON.stringify(action)).to.equal('queued');
    const result = await call('POST', `/api/v1/accounts/${account}/approvals/${action.id}/approve`, tenant.keys.write, { note: 'ok' });
    expect(result.status, JSON.stringify(result.body)).to.equal(200);
    expected.get(account)!.approved++;
  }

  /** Action events that count nothing: queued then rejected, and queued and left alone. */
  async function noise(account: string): Promise<void> {
    const rejected = await proposeTarget(account, 1.3, false);
    const result = await call('POST', `/api/v1/accounts/${account}/approvals/${rejected.id}/reject`, tenant.keys.write, { reason: 'no' });
    expect(result.status, JSON.stringify(result.body)).to.equal(200);
    const queued = await proposeTarget(account, 1.05, false);
    expect(queued.disposition).to.equal('queued');
  }

  function newConsumer(): ApprovalsPerDayConsumer {
    const consumer = exampleConsumerOn(svc.config, schema, { afterCommit: (event) => afterCommit?.(event) });
    consumers.push(consumer);
    return consumer;
  }

  /** Counts summed over days, per account (a test running across UTC midnight still adds up). */
  function totals(rows: readonly DayCount[]): Map<string, Totals> {
    const sums = new Map<string, Totals>();
    for (const row of rows) {
      const sum = sums.get(row.account_id) ?? { approved: 0, auto_applied: 0 };
      sum.approved += row.approved;
      sum.auto_applied += row.auto_applied;
      sums.set(row.account_id, sum);
    }
    return sums;
  }

  const grandTotal = (map: Map<string, Totals>) => [...map.values()].reduce((n, t) => n + t.approved + t.auto_applied, 0);

  /** The stream sequence of the last action event the service wrote (the consumer's checkpoint once it has read everything). */
  async function lastActionSeq(): Promise<number> {
    let last = 0;
    const filter = `${svc.config.subjectPrefix}.v1.*.*.action.*`;
    for await (const { seq, event } of svc.service.infrastructure.store.readFiltered(filter, 1)) {
      if (typeof event.signature === 'string') last = seq;
    }
    return last;
  }

  /** Counts equal the expectation, and still do once the consumer has nothing pending. */
  async function expectExactCounts(consumer: ApprovalsPerDayConsumer): Promise<void> {
    await eventually(async () => expect(totals(await consumer.counts())).to.deep.equal(expected), 20_000, 100);
    const { jsm } = svc.service.infrastructure;
    await eventually(async () => {
      const info = await jsm.consumers.info(svc.config.eventStream, consumer.durableName);
      expect(info.num_pending, 'messages not yet delivered').to.equal(0);
      expect(info.num_ack_pending, 'messages not yet acked').to.equal(0);
    }, 20_000, 100);
    const rows = await consumer.counts();
    expect(totals(rows), formatCounts(rows)).to.deep.equal(expected);
    expect(await consumer.checkpoint()).to.equal(await lastActionSeq());
    for (const row of rows) {
      expect(row.workspace_id).to.equal(tenant.workspaceId);
      expect(row.day).to.match(/^\d{4}-\d{2}-\d{2}$/);
    }
  }

  it('counts approved and auto-applied actions per account per UTC day', async () => {
    const [a, b] = accounts as [string, string];
    await autoApplied(a);
    await autoApplied(a);
    await approved(a);
    await noise(a);
    await autoApplied(b);
    await approved(b);
    await approved(b);
    const consumer = newConsumer();
    await consumer.start();
    await expectExactCounts(consumer);
    expect(totals(await consumer.counts()).get(a)).to.deep.equal({ approved: 1, auto_applied: 2 });
    expect(totals(await consumer.counts()).get(b)).to.deep.equal({ approved: 2, auto_applied: 1 });
    const stats = consumer.getStats();
    expect(stats.counted).to.equal(6);
    expect(stats.ignored).to.be.greaterThan(0);
    expect(stats.skipped).to.equal(0);
  });

  it('resumes after a stop mid-stream without counting anything twice', async () => {
    const [a, b] = accounts as [string, string];
    const running = consumers.at(-1)!;
    const before = grandTotal(totals(await running.counts()));
    let commits = 0;
    let stopped: Promise<void> | undefined;
    let stoppedAtSeq = 0;
    afterCommit = (event) => {
      if (++commits === 2) {
        stoppedAtSeq = event.seq;
        stopped = running.stop(); // not awaited here: stop() waits for this very message to be acked
      }
    };
    await autoApplied(a);
    await approved(b);
    await autoApplied(b);
    await approved(a);
    await autoApplied(a);
    await eventually(() => expect(stopped).to.not.equal(undefined), 20_000, 20);
    await stopped;
    afterCommit = undefined;
    // Stopped mid-way: exactly the two events before the stop were counted.
    expect(running.running).to.equal(false);
    expect(grandTotal(totals(await running.counts()))).to.equal(before + 2);
    expect(await running.checkpoint()).to.equal(stoppedAtSeq);

    // More events while it is down, then a new process resumes.
    await approved(a);
    await autoApplied(b);
    await noise(b);
    const resumed = newConsumer();
    await resumed.start();
    await expectExactCounts(resumed);
    expect(resumed.getStats().counted).to.equal(5);
  });

  it('stays exact after a crash between COMMIT and ack (the redelivery is skipped)', async () => {
    const [a, b] = accounts as [string, string];
    const running = consumers.at(-1)!;
    const before = grandTotal(totals(await running.counts()));
    let crashed: (seq: number) => void;
    const crashedAt = new Promise<number>((resolve) => (crashed = resolve));
    afterCommit = async (event) => {
      afterCommit = undefined;
      await running.kill(); // the process is gone: COMMIT happened, the ack never will
      crashed(event.seq);
    };
    await approved(a);
    await autoApplied(b);
    await autoApplied(a);
    const seq = await crashedAt;
    expect(grandTotal(totals(await running.counts()))).to.equal(before + 1);
    expect(await running.checkpoint()).to.equal(seq);
    const info = await svc.service.infrastructure.jsm.consumers.info(svc.config.eventStream, running.durableName);
    expect(info.num_ack_pending, 'the committed event is still unacked').to.equal(1);

    const restarted = newConsumer();
    await restarted.start();
    await expectExactCounts(restarted);
    const stats = restarted.getStats();
    expect(stats.skipped, 'the redelivered, already counted event').to.equal(1);
    expect(stats.counted).to.equal(2);
    await restarted.stop();
  });
  it('counts nothing a forger or a replayer publishes onto the stream, and goes on counting what the service writes', async () => {
    const [a] = accounts as [string];
    const logged: string[] = [];
    const consumer = exampleConsumerOn(svc.config, schema, { log: (line) => logged.push(line) });
    consumers.push(consumer);
    const { js, store } = svc.service.infrastructure;
    const publish = async (subject: string, event: EventEnvelope | string) => {
      const h = headers();
      const type = typeof event === 'string' ? (JSON.parse(event) as EventEnvelope).type : event.type;
      h.set(EVENT_TYPE_HEADER, type);
      h.set(EVENT_VERSION_HEADER, '1');
      // No Nats-Msg-Id: de-duplication would otherwise drop a replayed copy.
      return (await js.publish(subject, typeof event === 'string' ? event : JSON.stringify(event), { headers: h })).seq;
    };
    // A queued action the service has not decided on: a forged approval of it continues its chain.
    const queued = await proposeTarget(a, 1.3, false);
    const subject = svc.service.infrastructure.subjects.forAggregate({ workspaceId: tenant.workspaceId, accountId: a, aggregate: { type: 'action', id: queued.id } });
    const head = (await store.lastOf(subject))!;
    const approval = (signer?: EventSigner): EventEnvelope => {
      const unsealed: UnsealedEvent = {
        id: uuidv4(),
        type: 'ActionApproved',
        version: 1,
        time: new Date().toISOString(),
        workspace_id: tenant.workspaceId,
        account_id: a,
        aggregate: { type: 'action', id: queued.id },
        actor: { kind: 'api_key', id: tenant.keyIds.write },
        correlation_id: queued.id,
        data: { note: 'forged' },
      };
      return sealEvent(unsealed, head.event.hash, signer);
    };
    // The stored bytes of an approval the service really wrote (earlier tests made it), published again.
    let earlier: { seq: number; subject: string; text: string } | undefined;
    for await (const { seq, subject: at } of store.readFiltered(`${svc.config.subjectPrefix}.v1.*.*.action.*`, 1)) {
      const raw = (await store.rawAt(seq))!;
      if ((JSON.parse(raw.text) as EventEnvelope).type === 'ActionApproved') earlier = { seq, subject: at, text: raw.text };
    }
    const unsigned = await publish(subject, approval());
    const attacker = new EventSigner(generateKeyPairSync('ed25519').privateKey);
    const foreignKey = await publish(subject, approval(attacker));
    const replayed = await publish(earlier!.subject, earlier!.text);
    // The same signed bytes on an action subject of their own: a chain that starts afresh there.
    const elsewhere = earlier!.subject.replace(/[^.]+$/, uuidv4());
    const copied = await publish(elsewhere, earlier!.text);
    // The service goes on: the real approval of the same action continues the chain the forgeries did not move.
    const result = await call('POST', `/api/v1/accounts/${a}/approvals/${queued.id}/approve`, tenant.keys.write, { note: 'real' });
    expect(result.status, JSON.stringify(result.body)).to.equal(200);
    expected.get(a)!.approved++;

    await consumer.start();
    await expectExactCounts(consumer);
    expect(consumer.getStats().corrupt).to.equal(4);
    const skipped = (seq: number) => logged.find((line) => line.startsWith(`skipped: stream sequence ${seq} `)) ?? '';
    expect(skipped(unsigned)).to.match(/untrusted: unsigned/);
    expect(skipped(foreignKey)).to.match(new RegExp(`untrusted: signed by unknown key "${attacker.keyId}"`));
    expect(skipped(replayed)).to.match(/chain-broken/);
    expect(skipped(copied)).to.match(/envelope does not belong on/);
    await consumer.stop();
  });
  it('reads the signing keys again when an event names a key it does not know (a rotation), at most once every 5 s', async () => {
    const rotationSchema = `${schema}_rotation`;
    let refreshes = 0;
    const consumer = exampleConsumerOn(svc.config, rotationSchema, {
      durableName: 'analytics-rotation',
      // It starts knowing only a key that signed nothing here; the service's key comes with a refresh.
      trust: {
        kind: 'signatures',
        keys: [{ key_id: keyIdOf(unrelated.publicKey), public_key_pem: unrelated.publicKey.export({ format: 'pem', type: 'spki' }).toString() }],
        refreshKeys: async () => {
          refreshes++;
          return [testServiceSigningKey(svc.config)];
        },
      },
    });
    consumers.push(consumer);
    try {
      await consumer.start();
      await expectExactCounts(consumer);
      expect(consumer.getStats().corrupt).to.equal(4);
      // Once for the service's key; once, 5 s later at the earliest, for the forger's, which is still unknown after it.
      expect(refreshes).to.equal(2);
    } finally {
      await consumer.stop();
      await dropSchema(rotationSchema);
    }
  });

  it('refuses to start checking signatures where it read the log without them, even when it counted nothing', async () => {
    const switchSchema = `${schema}_switch`;
    const options = { durableName: 'analytics-switch' };
    const permissive = exampleConsumerOn(svc.config, switchSchema, { ...options, trust: { kind: 'nats-permissions' } });
    consumers.push(permissive);
    try {
      await permissive.start();
      await eventually(async () => {
        const info = await svc.service.infrastructure.jsm.consumers.info(svc.config.eventStream, 'analytics-switch');
        expect(info.num_pending + info.num_ack_pending).to.equal(0);
      }, 20_000, 100);
      await permissive.stop();
      const strict = exampleConsumerOn(svc.config, switchSchema, options);
      const refused = async () => {
        const error = await strict.start().then(() => null, (failure: unknown) => failure as Error);
        expect(error?.message).to.match(/has read the log without checking signatures and chains/);
        expect(error?.message).to.include(`DELETE FROM "${switchSchema}".consumer_chain_heads WHERE consumer = 'analytics-switch'`);
      };
      await refused();
      // As a version before signatures left it: nothing counted, no mode recorded, but its durable consumer read the events.
      const client = new pg.Client({ connectionString: svc.config.databaseUrl });
      await client.connect();
      await client.query(`UPDATE "${switchSchema}".consumer_checkpoint SET last_seq = 0, trust = NULL`);
      await client.end();
      await refused();
    } finally {
      await svc.service.infrastructure.jsm.consumers.delete(svc.config.eventStream, 'analytics-switch').catch(() => undefined);
      await dropSchema(switchSchema);
    }
  });
});
