import { expect } from 'chai';
import { streams } from '../../src/event-store/subjects.ts';
import { createAccount, createWorkspace, issueKey } from '../../src/operator/operator-commands.ts';
import type { PlatformAccountRef, PlatformChange } from '../../src/platform/ads-platform.ts';
import { SandboxPlatform } from '../../src/platform/sandbox/sandbox-platform.ts';
import { RelayedServices } from '../support/relayed-services.ts';

/**
 * Human decisions (approve, reject, edit-then-approve) whose event append reaches JetStream but
 * whose PubAck is lost: the HTTP process (A, http only, behind LostAckRelay) answers 503, and the
 * client decides again. Process B (http, projectors, apply-worker) reaches NATS directly.
 * Checked: the first stored decision wins, the change reaches the platform exactly once, and
 * one's own decision sent again answers 200 with the action as it is (docs/api.md), where it
 * used to answer 409 `action-not-in-queue`, which reads as someone else's decision.
 * (Written by an adversarial helper; the console scenario and the edit scenarios other tests
 * cover were left out for the suite's time.)
 */

type Proc = 'A' | 'B';
interface Answer {
  readonly proc: Proc;
  readonly label: string;
  readonly status: number;
  readonly body: any;
  readonly contentType: string | null;
  readonly ms: number;
  readonly error?: string;
}

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));
const slugOf = (a: Answer): string => (typeof a.body?.type === 'string' ? a.body.type.replace(/^.*\/problems\//, '') : '');
const fmt = (a: Answer) => `${a.label} → ${a.proc} ${a.error ?? a.status} ${slugOf(a) || a.body?.status || ''} ${a.body?.detail ? JSON.stringify(a.body.detail) : ''} (${a.ms} ms)`;

describe('decisions whose append is stored but whose PubAck is lost', function () {
  this.timeout(90_000);
  let pair: RelayedServices | undefined;
  let workspaceId = '';
  const keys = { w1: '', w2: '', read: '' };
  const keyIds = { w1: '', w2: '' };
  const platformCalls: { accountId: string; change: PlatformChange }[] = [];
  let originalApplyChange: SandboxPlatform['applyChange'];

  before(async function () {
    this.timeout(60_000);
    originalApplyChange = SandboxPlatform.prototype.applyChange;
    SandboxPlatform.prototype.applyChange = async function (this: SandboxPlatform, account: PlatformAccountRef, change: PlatformChange) {
      platformCalls.push({ accountId: account.accountId, change: structuredClone(change) });
      return originalApplyChange.call(this, account, change);
    };
    pair = await RelayedServices.start('lostdecisionack', { ROLES: 'http,projectors,apply-worker' });
    const infra = pair.b.infrastructure;
    workspaceId = (await createWorkspace(infra, 'lost decision ack')).value.id;
    const w1 = (await issueKey(infra, workspaceId, 'write', 'approver 1')).value;
    const w2 = (await issueKey(infra, workspaceId, 'write', 'approver 2')).value;
    keys.w1 = w1.key;
    keys.w2 = w2.key;
    keyIds.w1 = w1.id;
    keyIds.w2 = w2.id;
    keys.read = (await issueKey(infra, workspaceId, 'read', 'reader')).value.key;
  });

  afterEach(() => {
    pair?.relay.disarm();
    pair?.relay.heal();
  });

  after(async function () {
    this.timeout(60_000);
    SandboxPlatform.prototype.applyChange = originalApplyChange;
    await pair?.stop();
  });

  async function send(proc: Proc, label: string, method: string, path: string, key: string, body?: unknown, timeoutMs = 30_000): Promise<Answer> {
    const started = performance.now();
    try {
      const response = await fetch(`${pair!.url[proc]}${path}`, {
        method,
        headers: { authorization: `Bearer ${key}`, ...(body === undefined ? {} : { 'content-type': 'application/json' }) },
        body: body === undefined ? undefined : JSON.stringify(body),
        signal: AbortSignal.timeout(timeoutMs),
      });
      const text = await response.text();
      let parsed: any;
      try {
        parsed = text === '' ? undefined : JSON.parse(text);
      } catch {
        parsed = text;
      }
      return { proc, label, status: response.status, body: parsed, contentType: response.headers.get('content-type'), ms: Math.round(performance.now() - started) };
    } catch (error) {
      return { proc, label, status: 0, body: undefined, contentType: null, ms: Math.round(performance.now() - started), error: String(error) };
    }
  }

  const approvals = (account: string) => `/api/v1/accounts/${account}/approvals`;

  /** A fresh sandbox account with one queued set_target_cpa action on its enabled CPA campaign (proposed through B). */
  async function queuedAction(label: string): Promise<{ account: string; action: any; campaignId: string; original: number }> {
    const account = (await createAccount(pair!.b.infrastructure, workspaceId, label, 'sandbox')).value.id;
    const campaigns = await send('B', 'campaigns', 'GET', `/api/v1/accounts/${account}/campaigns`, keys.read);
    expect(campaigns.status, fmt(campaigns)).to.equal(200);
    const cpa = (campaigns.body.data as any[]).find(
      (c) => c.status === 'enabled' && c.bidding_strategy.type === 'maximize_conversions' && c.bidding_strategy.target_cpa !== null && c.bidding_strategy.portfolio === null,
    );
    expect(cpa, 'an enabled target-CPA campaign').to.not.equal(undefined);
    const original = cpa.bidding_strategy.target_cpa as number;
    const value = Math.round(original * 1.05 * 100) / 100;
    const proposed = await send('B', 'propose', 'POST', `/api/v1/accounts/${account}/campaigns/${cpa.id}/target`, keys.w1, { reason: 'lost-ack test', target_cpa: value });
    expect(proposed.status, fmt(proposed)).to.equal(200);
    expect(proposed.body.status, 'the proposal waits for a person').to.equal('queued');
    const listed = await approvalOf(account, proposed.body.id);
    return { account, action: listed, campaignId: cpa.id, original };
  }

  async function approvalOf(account: string, actionId: string, proc: Proc = 'B'): Promise<any> {
    const page = await send(proc, 'list', 'GET', `${approvals(account)}?limit=200`, keys.read);
    expect(page.status, fmt(page)).to.equal(200);
    return (page.body.data as any[]).find((a) => a.id === actionId);
  }

  /** The action's events as stored (read by B, untouched by the fault). */
  async function actionLog(account: string, actionId: string): Promise<{ type: string; actor: string; data: any }[]> {
    const { store, aggregates } = pair!.b.infrastructure;
    const subject = aggregates.subjectOf(streams.action(workspaceId, account, actionId));
    const out: { type: string; actor: string; data: any }[] = [];
    for await (const { event } of store.readFiltered(subject, 1)) out.push({ type: event.type, actor: `${event.actor.kind}:${event.actor.id}`, data: event.data });
    return out;
  }
  const count = (log: { type: string }[], type: string) => log.filter((e) => e.type === type).length;

  /** Waits until the action left approved/applying (the apply worker on B finished), then a little more, and returns its log. */
  async function settled(account: string, actionId: string): Promise<{ type: string; actor: string; data: any }[]> {
    const deadline = performance.now() + 15_000;
    for (;;) {
      const log = await actionLog(account, actionId);
      const last = log.at(-1)?.type;
      const busy = last === 'ActionApproved' || last === 'ActionApplyStarted' || last === 'ActionApplyHeartbeat' || last === 'ActionEdited';
      if (!busy || performance.now() > deadline) {
        await sleep(700);
        return actionLog(account, actionId);
      }
      await sleep(100);
    }
  }

  /** Sends a decision to A with the relay armed for its event; asserts the ack really was lost; heals and waits for A's reconnect. */
  async function lostDecision(label: string, path: string, key: string, body: unknown, eventType: string, actionId: string): Promise<{ answer: Answer; swallowed: number }> {
    const before = pair!.relay.triggers;
    const triggered = pair!.relay.arm([`"type":"${eventType}"`, actionId]);
    const answer = await send('A', label, 'POST', path, key, body);
    const trigger = await Promise.race([triggered, sleep(100).then(() => undefined)]);
    pair!.relay.disarm();
    expect(trigger, `the ${eventType} publish of ${fmt(answer)} never went through the relay: no ack was lost`).to.not.equal(undefined);
    expect(pair!.relay.triggers).to.equal(before + 1);
    const swallowed = pair!.relay.swallowedBytes();
    const healedAt = performance.now();
    expect(pair!.relay.heal(), 'one connection was swallowing').to.equal(1);
    const deadline = performance.now() + 5000;
    while (!pair!.statusesOfA.some((s) => s.type === 'reconnect' && s.at > healedAt)) {
      if (performance.now() > deadline) throw new Error('A did not reconnect');
      await sleep(20);
    }
    return { answer, swallowed };
  }

  /** The lost-ack answer: 503 service-unavailable problem+json (or a 200 if the service found out the decision landed). */
  function expectFaultAnswer(a: Answer, evidence: string) {
    expect(a.status, `lost-ack answer:\n${evidence}`).to.be.oneOf([200, 503]);
    if (a.status === 503) {
      expect(a.contentType ?? '', evidence).to.match(/^application\/problem\+json/);
      expect(slugOf(a), evidence).to.equal('service-unavailable');
    }
  }

  /**
   * The answer to a retry, by the same key, of a decision that was stored: a 200 (the decision
   * stands: the action as it is now), or a 409 that tells the client the decision it retried is
   * the one that was recorded (by naming its key). A bare `action-not-in-queue` ("someone else
   * decided first", docs/api.md) is not truthful here.
   */
  /** docs/api.md: one's own decision sent again after a 503 answers 200 with the action as it is now, and records nothing. */
  function expectOwnRetryTruthful(retry: Answer, ownKeyId: string, evidence: string) {
    expect(retry.status, `a retry of ${ownKeyId}'s own stored decision is not answered as a success:\n${evidence}`).to.equal(200);
    expect(retry.body?.status, evidence).to.not.be.oneOf(['queued', 'returned']);
  }

  const platformCallsOf = (account: string) => platformCalls.filter((c) => c.accountId === account);

  it('1. approve (no expected_version), ack lost → 503; the same approve again: applied exactly once, and the retry is told the truth', async () => {
    const { account, action } = await queuedAction('lost ack 1');
    const path = `${approvals(account)}/${action.id}/approve`;
    const { answer: first, swallowed } = await lostDecision('approve (ack lost)', path, keys.w1, { note: 'ok' }, 'ActionApproved', action.id);
    const retry = await send('A', 'approve retry', 'POST', path, keys.w1, { note: 'ok' });
    const log = await settled(account, action.id);
    const row = await approvalOf(account, action.id, 'A');
    const evidence = [fmt(first), `swallowed ${swallowed} B`, fmt(retry), `retry body ${JSON.stringify(retry.body)}`, `log ${log.map((e) => e.type).join(',')}`, `row ${row?.status}`, `platform calls ${platformCallsOf(account).length}`].join('\n  ');
    expectFaultAnswer(first, evidence);
    expect(count(log, 'ActionApproved'), evidence).to.equal(1);
    expect(count(log, 'ActionApplied'), evidence).to.equal(1);
    expect(platformCallsOf(account), evidence).to.have.length(1);
    expect(row.status, evidence).to.equal('applied');
    expectOwnRetryTruthful(retry, keyIds.w1, evidence);
  });

  it('1b. approve with expected_version (as the console sends), ack lost → 503; the same approve again: applied once, truthful answer', async () => {
    const { account, action } = await queuedAction('lost ack 1b');
    const path = `${approvals(account)}/${action.id}/approve`;
    const body = { expected_version: action.version };
    const { answer: first } = await lostDecision('approve v (ack lost)', path, keys.w1, body, 'ActionApproved', action.id);
    const retry = await send('A', 'approve v retry', 'POST', path, keys.w1, body);
    const log = await settled(account, action.id);
    const evidence = [fmt(first), fmt(retry), `retry body ${JSON.stringify(retry.body)}`, `log ${log.map((e) => e.type).join(',')}`, `platform calls ${platformCallsOf(account).length}`].join('\n  ');
    expectFaultAnswer(first, evidence);
    expect(count(log, 'ActionApproved'), evidence).to.equal(1);
    expect(count(log, 'ActionApplied'), evidence).to.equal(1);
    expect(platformCallsOf(account), evidence).to.have.length(1);
    expectOwnRetryTruthful(retry, keyIds.w1, evidence);
  });

  it('2. reject, ack lost → 503; another approver approves: the stored reject wins, nothing applied', async () => {
    const { account, action } = await queuedAction('lost ack 2');
    const { answer: first } = await lostDecision('reject (ack lost)', `${approvals(account)}/${action.id}/reject`, keys.w1, { reason: 'no', expected_version: action.version }, 'ActionRejected', action.id);
    const other = await send('A', 'approve by w2', 'POST', `${approvals(account)}/${action.id}/approve`, keys.w2, { expected_version: action.version });
    const other2 = await send('B', 'approve by w2 (no version)', 'POST', `${approvals(account)}/${action.id}/approve`, keys.w2, {});
    const retry = await send('A', 'reject retry by w1', 'POST', `${approvals(account)}/${action.id}/reject`, keys.w1, { reason: 'no', expected_version: action.version });
    await sleep(1500);
    const log = await actionLog(account, action.id);
    const row = await approvalOf(account, action.id, 'A');
    const evidence = [fmt(first), fmt(other), fmt(other2), fmt(retry), `log ${log.map((e) => e.type).join(',')}`, `row ${row?.status}`, `platform calls ${platformCallsOf(account).length}`].join('\n  ');
    expectFaultAnswer(first, evidence);
    for (const a of [other, other2]) {
      expect(a.status, evidence).to.equal(409);
      expect(slugOf(a), evidence).to.equal('action-not-in-queue');
      expect(a.body.action_status, evidence).to.equal('rejected');
    }
    expect(count(log, 'ActionRejected'), evidence).to.equal(1);
    expect(count(log, 'ActionApproved'), evidence).to.equal(0);
    expect(count(log, 'ActionApplyStarted') + count(log, 'ActionApplied'), evidence).to.equal(0);
    expect(platformCallsOf(account), evidence).to.have.length(0);
    expect(row.status, evidence).to.equal('rejected');
    expectOwnRetryTruthful(retry, keyIds.w1, evidence);
  });

  it('3. approve, ack lost → 503; another approver rejects: the stored approve wins, applied exactly once', async () => {
    const { account, action } = await queuedAction('lost ack 3');
    const { answer: first } = await lostDecision('approve (ack lost)', `${approvals(account)}/${action.id}/approve`, keys.w1, { expected_version: action.version }, 'ActionApproved', action.id);
    const other = await send('A', 'reject by w2', 'POST', `${approvals(account)}/${action.id}/reject`, keys.w2, { reason: 'no', expected_version: action.version });
    const log = await settled(account, action.id);
    const evidence = [fmt(first), fmt(other), `log ${log.map((e) => e.type).join(',')}`, `platform calls ${platformCallsOf(account).length}`].join('\n  ');
    expectFaultAnswer(first, evidence);
    expect(other.status, evidence).to.equal(409);
    expect(slugOf(other), evidence).to.equal('action-not-in-queue');
    expect(count(log, 'ActionRejected'), evidence).to.equal(0);
    expect(count(log, 'ActionApproved'), evidence).to.equal(1);
    expect(count(log, 'ActionApplied'), evidence).to.equal(1);
    expect(platformCallsOf(account), evidence).to.have.length(1);
  });

  it('4b. edit-then-approve, ActionApproved ack lost (both stored) → 503; the same request again: applied once, truthful answer', async () => {
    const { account, action, original } = await queuedAction('lost ack 4b');
    const edited = Math.round(original * 1.02 * 100) / 100;
    const body = { edit: { target_cpa: edited }, expected_version: action.version };
    const path = `${approvals(account)}/${action.id}/approve`;
    const { answer: first } = await lostDecision('edit+approve (Approved ack lost)', path, keys.w1, body, 'ActionApproved', action.id);
    const retry = await send('A', 'edit+approve retry', 'POST', path, keys.w1, body);
    const log = await settled(account, action.id);
    const calls = platformCallsOf(account);
    const evidence = [fmt(first), fmt(retry), `retry body ${JSON.stringify(retry.body)}`, `log ${log.map((e) => e.type).join(',')}`, `platform ${JSON.stringify(calls.map((c) => c.change))}`].join('\n  ');
    expectFaultAnswer(first, evidence);
    expect(count(log, 'ActionEdited'), evidence).to.equal(1);
    expect(count(log, 'ActionApproved'), evidence).to.equal(1);
    expect(count(log, 'ActionApplied'), evidence).to.equal(1);
    expect(calls, evidence).to.have.length(1);
    expect((calls[0]!.change as any).target_cpa, evidence).to.equal(edited);
    expectOwnRetryTruthful(retry, keyIds.w1, evidence);
  });

  it('5. approve, ack lost; 6 concurrent retries over A and B (both keys): exactly one approval, applied once, no 5xx, no other approver told it approved', async () => {
    const { account, action } = await queuedAction('lost ack 5');
    const path = `${approvals(account)}/${action.id}/approve`;
    const { answer: first } = await lostDecision('approve (ack lost)', path, keys.w1, { expected_version: action.version }, 'ActionApproved', action.id);
    const plan: { proc: Proc; who: 'w1' | 'w2' }[] = [
      { proc: 'A', who: 'w1' }, { proc: 'B', who: 'w1' }, { proc: 'A', who: 'w2' }, { proc: 'B', who: 'w2' }, { proc: 'A', who: 'w1' }, { proc: 'B', who: 'w2' },
    ];
    const answers = await Promise.all(plan.map((p, i) => send(p.proc, `retry ${i} ${p.who}`, 'POST', path, keys[p.who], { expected_version: action.version })));
    const log = await settled(account, action.id);
    const evidence = [fmt(first), ...answers.map(fmt), `log ${log.map((e) => e.type).join(',')}`, `platform ${platformCallsOf(account).length}`].join('\n  ');
    expectFaultAnswer(first, evidence);
    for (const [i, a] of answers.entries()) {
      expect(a.status, evidence).to.be.oneOf([200, 409]);
      if (plan[i]!.who === 'w2') {
        expect(a.status, `w2 never approved, must not get a 200:\n  ${evidence}`).to.equal(409);
        expect(slugOf(a), evidence).to.equal('action-not-in-queue');
      }
    }
    expect(count(log, 'ActionApproved'), evidence).to.equal(1);
    expect(log.find((e) => e.type === 'ActionApproved')!.actor, evidence).to.equal(`api_key:${keyIds.w1}`);
    expect(count(log, 'ActionApplied'), evidence).to.equal(1);
    expect(platformCallsOf(account), evidence).to.have.length(1);
    for (const [i, a] of answers.entries()) if (plan[i]!.who === 'w1') expectOwnRetryTruthful(a, keyIds.w1, evidence);
  });
});

