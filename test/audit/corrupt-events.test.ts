import { expect } from 'chai';
import { randomUUID } from 'node:crypto';
import { headers as natsHeaders } from '@nats-io/nats-core';
import pg from 'pg';
import { exampleConsumerOn } from '../support/example-consumer.ts';
import { runCli } from '../support/cli.ts';
import { eventually } from '../support/eventually.ts';
import { startTestService, type TestService, type TestTenant } from '../support/test-service.ts';

/**
 * Issue #9 item 3: readers outside the projectors (events tail, audit verify, the example
 * analytics consumer) meet corrupt messages on the stream and report them without dying.
 */
describe('readers surviving corrupt events: events tail, audit verify, analytics example', function () {
  this.timeout(90_000);
  let svc: TestService;
  let tenant: TestTenant;
  let account: string;
  let schema: string;
  /** Stream sequences of the corrupt messages, in order, with the admission code expected for each. */
  const corrupt: { seq: number; code: string }[] = [];
  const realActions: string[] = [];

  const actionSubject = (accountId: string, actionId: string) => `${svc.config.subjectPrefix}.v1.${tenant.workspaceId}.${accountId}.action.${actionId}`;

  async function autoApplied(): Promise<void> {
    const campaigns = (await (await svc.request('GET', `/api/v1/accounts/${account}/campaigns`, { key: tenant.keys.read })).json()) as { data: any[] };
    const campaign = campaigns.data.find(
      (c) => c.status === 'enabled' && c.bidding_strategy.type === 'maximize_conversions' && c.bidding_strategy.target_cpa !== null && c.bidding_strategy.portfolio === null,
    );
    const response = await svc.request('POST', `/api/v1/accounts/${account}/campaigns/${campaign.id}/target`, {
      key: tenant.keys.write,
      body: { target_cpa: Math.round(campaign.bidding_strategy.target_cpa * 1.05 * 100) / 100, reason: 'corrupt-events test', auto_apply: true },
    });
    const body = (await response.json()) as { id: string; disposition: string };
    expect(response.status, JSON.stringify(body)).to.equal(200);
    expect(body.disposition).to.equal('auto_applied');
    realActions.push(body.id);
  }

  before(async () => {
    svc = await startTestService('corrupt-readers', { ROLES: 'http,projectors' });
    schema = `${svc.config.databaseSchema}_analytics`;
    tenant = await svc.tenant('corrupt');
    account = tenant.accounts.sandbox;
    await autoApplied();

    const js = svc.service.infrastructure.js;
    const approvedHeaders = () => {
      const h = natsHeaders();
      h.set('Ads-Event-Type', 'ActionApproved');
      h.set('Ads-Event-Version', '1');
      return h;
    };
    const envelope = (accountId: string, extra: Record<string, unknown> = {}) => ({
      id: randomUUID(),
      type: 'ActionApproved',
      version: 1,
      time: new Date().toISOString(),
      workspace_id: tenant.workspaceId,
      account_id: accountId,
      aggregate: { type: 'action', id: 'forged' },
      actor: { kind: 'api_key', id: 'forged' },
      correlation_id: 'forged',
      data: { note: 'x' },
      prev_hash: '0'.repeat(64),
      hash: 'f'.repeat(64),
      ...extra,
    });
    const publish = async (code: string, subject: string, payload: string) =>
      corrupt.push({ seq: (await js.publish(subject, payload, { headers: approvedHeaders() })).seq, code });
    // A lone surrogate in a string: JSON is fine, the text is not.
    await publish('bad-text', actionSubject(account, 'forged'), JSON.stringify(envelope(`${account}\ud800`)));
    await publish('not-json', actionSubject(account, 'garbage'), '\u0000garbage{');
    // Approves on this account's subject, claims another account: would count for a tenant that did nothing.
    await publish('subject-mismatch', actionSubject(account, 'forged'), JSON.stringify(envelope(tenant.accounts.sandbox2)));
    await publish('schema', actionSubject(account, 'forged'), 'null');
    // Looks like a time, is no date: the example consumer once retried it forever (Postgres 22008).
    await publish('schema', actionSubject(account, 'forged'), JSON.stringify(envelope(account, { time: '2024-13-45T00:00:00.000Z' })));
    await autoApplied();
  });

  after(async () => {
    await svc?.stop();
    if (!svc) return;
    const client = new pg.Client({ connectionString: svc.config.databaseUrl });
    await client.connect();
    await client.query(`DROP SCHEMA IF EXISTS "${schema}" CASCADE`);
    await client.end();
  });

  it('events tail prints each corrupt message as a marked JSON line with its sequence and code, and goes on', async () => {
    const result = await runCli(svc.config, ['events', 'tail', '--account', account]);
    expect(result.code, result.stderr).to.equal(0);
    const lines = result.stdout.trim().split('\n').map((line) => JSON.parse(line) as Record<string, unknown>);
    const marked = lines.filter((line) => line.corrupt === true);
    expect(marked.map((line) => [line.seq, line.code])).to.deep.equal(corrupt.map((c) => [c.seq, c.code]));
    const lastCorrupt = corrupt[corrupt.length - 1]!.seq;
    expect(lines.some((line) => line.type === 'ActionProposed' && (line.seq as number) > lastCorrupt), 'events after the corrupt ones').to.equal(true);
  });

  it('audit verify names the first corrupt message and exits 1 without crashing, and the next one from a later sequence', async () => {
    const first = await runCli(svc.config, ['audit', 'verify', '--json']);
    expect(first.code, first.stderr).to.equal(1);
    expect(first.stderr, first.stderr).not.to.match(/\n\s+at /);
    const report = JSON.parse(first.stdout);
    expect(report.discrepancy.seq).to.equal(corrupt[0]!.seq);
    expect(report.discrepancy.kind).to.equal('schema_invalid');
    expect(report.discrepancy.detail).to.match(/unpaired/);

    for (const [index, kind] of [[1, 'not_an_event'], [2, 'subject_mismatch'], [3, 'schema_invalid']] as const) {
      const next = await runCli(svc.config, ['audit', 'verify', '--json', '--from-seq', String(corrupt[index]!.seq)]);
      expect(next.code, next.stderr).to.equal(1);
      const nextReport = JSON.parse(next.stdout);
      expect([nextReport.discrepancy.seq, nextReport.discrepancy.kind]).to.deep.equal([corrupt[index]!.seq, kind]);
    }
  });

  it('the example analytics consumer logs and skips each corrupt message and counts the real events exactly', async () => {
    const logged: string[] = [];
    const consumer = exampleConsumerOn(svc.config, schema, { log: (line) => logged.push(line) });
    await consumer.start();
    try {
      await eventually(async () => expect(consumer.getStats().counted).to.equal(realActions.length), 20_000);
      expect(consumer.getStats().corrupt).to.equal(corrupt.length);
      const counts = await consumer.counts();
      expect(counts.map((c) => [c.account_id, c.auto_applied, c.approved])).to.deep.equal([[account, 2, 0]]);
      for (const { seq } of corrupt) expect(logged.some((line) => line.includes(`stream sequence ${seq} `))).to.equal(true);
    } finally {
      await consumer.stop();
    }
  });

  it('the projectors parked them and the service stays ready', async () => {
    const ready = await svc.request('GET', '/readyz');
    expect(ready.status).to.equal(200);
    const listed = await runCli(svc.config, ['projections', 'quarantine', 'list', '--json']);
    const parked = (JSON.parse(listed.stdout).events as { projection: string; seq: number; code: string }[]).filter((e) => e.projection === 'approvals');
    expect(parked.map((e) => [e.seq, e.code])).to.deep.equal(corrupt.map((c) => [c.seq, c.code]));
  });
});
