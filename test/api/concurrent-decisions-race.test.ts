import { expect } from 'chai';
import { isDeepStrictEqual } from 'node:util';
import { actionVersion } from '../../commands/action/action-version.ts';
import { loadAction, loadWorkspace } from '../../commands/queries.ts';
import { workspaceDecider } from '../../commands/workspace/workspace-decider.ts';
import { streams } from '../../src/event-store/subjects.ts';
import { createAccount, issueKey } from '../../src/operator/operator-commands.ts';
import type { PlatformAccountRef, PlatformChange } from '../../src/platform/ads-platform.ts';
import { SandboxPlatform } from '../../src/platform/sandbox/sandbox-platform.ts';
import { api, approvalsPath, campaignsByStrategy, cents, listAllApprovals, targetPath, type Result } from '../safe-apply/helpers.ts';
import { eventually } from '../support/eventually.ts';
import { waitForTerminalRun } from '../support/runs.ts';
import { startTestService, type TestService, type TestTenant } from '../support/test-service.ts';
import { seededRandom } from '../support/seeded-random.ts';

/**
 * Seeded race test: concurrent bursts of approve / reject / edit-approve (different values, several keys
 * of different scopes, shared Idempotency-Keys, stale and fresh expected_version), kill-switch engage and
 * release, run creation + DELETE while the run proposes, and GETs of the approvals list, against the real
 * service with its real apply worker on the sandbox platform. Every request's answer is checked against
 * the event log, the platform's received changes and the approvals read model.
 *
 * RACE_SEED=<n> runs another seed (timing still varies from run to run); RACE_VERBOSE=1 prints what each scenario did.
 */

const SEED = Number(process.env.RACE_SEED ?? 1_907_447_755);
const VERBOSE = process.env.RACE_VERBOSE !== undefined;

type Kind = 'approve' | 'approve-edit' | 'reject' | 'list' | 'engage' | 'release';
interface Planned {
  readonly kind: Kind;
  readonly key: 'proposer' | 'write2' | 'admin' | 'read';
  readonly actionIdx: number;
  readonly body?: Record<string, unknown>;
  readonly idem?: string;
  readonly version?: 'fresh' | 'stale';
  readonly editValue?: number;
  delayMs?: number;
}
interface Fired extends Planned {
  readonly result: Result;
  readonly startedAt: number;
  readonly endedAt: number;
}

const WASTE_BRIEF = 'Find wasted spend on search terms without conversions and add negative keywords.';
const STALE_VERSION = 'v1-AAAAAAAAAAAAAAAAAAAAAA';

describe(`concurrent decisions race (seed ${SEED})`, function () {
  this.timeout(120_000);
  let svc: TestService;
  let tenant: TestTenant;
  let write2: { id: string; key: string };
  const rand = seededRandom(SEED);
  const pick = <T>(xs: readonly T[]): T => xs[Math.floor(rand() * xs.length)]!;
  const violations: string[] = [];
  const violate = (message: string) => violations.push(message);
  /** Every change the sandbox platform received: account, change, when. */
  const platformCalls: { accountId: string; change: PlatformChange; at: number }[] = [];
  let originalApplyChange: SandboxPlatform['applyChange'];

  before(async () => {
    console.log(`      race seed: ${SEED} (RACE_SEED=${SEED} to replay)`);
    originalApplyChange = SandboxPlatform.prototype.applyChange;
    SandboxPlatform.prototype.applyChange = async function (this: SandboxPlatform, account: PlatformAccountRef, change: PlatformChange) {
      platformCalls.push({ accountId: account.accountId, change: structuredClone(change), at: Date.now() });
      return originalApplyChange.call(this, account, change);
    };
    svc = await startTestService('race-decisions');
    tenant = await svc.tenant('race');
    write2 = (await issueKey(svc.service.infrastructure, tenant.workspaceId, 'write', 'write2')).value;
    await svc.service.infrastructure.commands.handle(workspaceDecider, {
      type: 'SetDistinctApprover',
      workspaceId: tenant.workspaceId,
      required: true,
      meta: { actor: { kind: 'operator', id: 'race-test' }, correlationId: 'race-test' },
    } as never);
  });

  after(async () => {
    SandboxPlatform.prototype.applyChange = originalApplyChange;
    await svc?.stop();
  });

  const keyOf = (k: Planned['key']) => (k === 'proposer' ? tenant.keys.write : k === 'write2' ? write2.key : k === 'admin' ? tenant.keys.admin : tenant.keys.read);
  const keyIdOf = (k: Planned['key']) => (k === 'proposer' ? tenant.keyIds.write : k === 'write2' ? write2.id : k === 'admin' ? tenant.keyIds.admin : tenant.keyIds.read);
  const slug = (r: Result) => (typeof r.body === 'object' && r.body && typeof r.body.type === 'string' ? r.body.type.split('/').pop() : '');

  /** Every event of the account, from the history endpoint (the event log). */
  async function accountEvents(accountId: string): Promise<any[]> {
    const all: any[] = [];
    let cursor: string | null = null;
    do {
      const qs = new URLSearchParams({ limit: '500' });
      if (cursor !== null) qs.set('cursor', cursor);
      const page = await api(svc, 'GET', `/api/v1/accounts/${accountId}/history?${qs}`, { key: tenant.keys.read });
      expect(page.status, page.text).to.equal(200);
      all.push(...page.body.data);
      cursor = page.body.next_cursor;
      if (page.body.data.length === 0) break;
    } while (cursor !== null);
    return all;
  }

  async function workspaceEvents(): Promise<any[]> {
    const { store, aggregates } = svc.service.infrastructure;
    const subject = aggregates.subjectOf(streams.workspace(tenant.workspaceId));
    const out: any[] = [];
    for await (const stored of store.readSubject(subject, 0, await store.lastSequence())) out.push(stored.event);
    return out;
  }

  it('each action gets exactly one decision, applied once with the winning value; losers get documented 4xx; read model converges', async () => {
    const infra = svc.service.infrastructure;
    // Accounts: the tenant's two sandboxes plus three more, each with a CPA and a ROAS campaign: one target action per field.
    const extra = await Promise.all([0, 1, 2].map((i) => createAccount(infra, tenant.workspaceId, `race extra ${i}`, 'sandbox')));
    const accounts = [tenant.accounts.sandbox, tenant.accounts.sandbox2, ...extra.map((e) => e.value.id)];

    // ---- Proposals through the target endpoint, each POSTed 3× at once with one Idempotency-Key.
    interface Act { id: string; accountId: string; campaignId: string; kind: string; field: string; original: number; proposed: number; proposerKey: Planned['key']; action: any }
    const acts: Act[] = [];
    const proposalChecks = await Promise.all(
      accounts.flatMap((accountId, ai) => [
        (async () => {
          const c = await campaignsByStrategy(svc, tenant.keys.read, accountId);
          // Only enabled campaigns: an approved change of a paused one is returned to the queue (and may be approved again).
          return [
            { accountId, campaign: c.cpa, field: 'target_cpa', kind: 'set_target_cpa', original: c.cpa.bidding_strategy.target_cpa!, value: cents(c.cpa.bidding_strategy.target_cpa! * 1.05) },
            { accountId, campaign: c.roas, field: 'target_roas_pct', kind: 'set_target_roas', original: c.roas.bidding_strategy.target_roas_pct!, value: Math.round(c.roas.bidding_strategy.target_roas_pct! * 1.05 * 10) / 10 },
          ].filter((p) => p.campaign.status === 'enabled').map((p) => ({ ...p, ai }));
        })(),
      ]),
    );
    await Promise.all(
      proposalChecks.flat().map(async (p) => {
        const idem = `prop-${SEED}-${p.accountId}-${p.field}`;
        const body = { reason: 'race proposal', [p.field]: p.value };
        const answers = await Promise.all(
          [0, 1, 2].map(() => api(svc, 'POST', targetPath(p.accountId, p.campaign.id), { key: tenant.keys.write, body, headers: { 'idempotency-key': idem } })),
        );
        const ok = answers.filter((a) => a.status === 200);
        for (const a of answers) {
          if (a.status === 200) continue;
          if (a.status === 409 && slug(a) === 'idempotent-request-in-progress') continue;
          violate(`target POST with shared Idempotency-Key ${idem}: undocumented ${a.status} ${a.text}`);
        }
        const ids = new Set(ok.map((a) => a.body.id));
        if (ids.size !== 1) violate(`target POST ×3 with one Idempotency-Key gave action ids ${[...ids].join(',')} (statuses ${answers.map((a) => a.status)})`);
        if (ok.length > 0) {
          const action = ok[0]!.body;
          acts.push({ id: action.id, accountId: p.accountId, campaignId: p.campaign.id, kind: p.kind, field: p.field, original: p.original, proposed: p.value, proposerKey: 'proposer', action });
        }
      }),
    );
    // Exactly one ActionProposed per (campaign, field) in the log.
    for (const accountId of accounts) {
      const proposed = (await accountEvents(accountId)).filter((e) => e.type === 'ActionProposed');
      const byCampaignKind = new Map<string, number>();
      for (const e of proposed) byCampaignKind.set(`${e.data.params.campaign_id}/${e.data.kind}`, (byCampaignKind.get(`${e.data.params.campaign_id}/${e.data.kind}`) ?? 0) + 1);
      for (const [k, n] of byCampaignKind) if (n !== 1) violate(`account ${accountId}: ${n} ActionProposed for ${k} after 3 POSTs with one Idempotency-Key (expected 1)`);
    }

    // ---- Five runs at once (the worker takes 2 of a workspace at a time, so some wait queued), each
    // retried with its Idempotency-Key and DELETEd by two keys while it starts and proposes.
    const runAccounts = await Promise.all([0, 1, 2, 3, 4].map(async (i) => (await createAccount(infra, tenant.workspaceId, `race run ${i}`, 'sandbox')).value.id));
    const runOutcomes = await Promise.all(
      runAccounts.map(async (runAccount, i) => {
        const runIdem = `run-${SEED}-${i}`;
        const runBody = { brief: WASTE_BRIEF, project_id: runAccount };
        const firstRunAnswer = await api(svc, 'POST', '/api/v1/runs', { key: tenant.keys.write, body: runBody, headers: { 'idempotency-key': runIdem } });
        const runId: string = firstRunAnswer.body.id;
        if (firstRunAnswer.status !== 202) violate(`POST /runs answered ${firstRunAnswer.status} ${firstRunAnswer.text}`);
        const deletesDelay = rand() < 0.5 ? 0 : Math.floor(rand() * 30);
        await new Promise((r) => setTimeout(r, deletesDelay));
        const runBurst = await Promise.all([
          ...[0, 1, 2].map(() => api(svc, 'POST', '/api/v1/runs', { key: tenant.keys.write, body: runBody, headers: { 'idempotency-key': runIdem } })),
          ...Array.from({ length: 6 }, (_, j) => api(svc, 'DELETE', `/api/v1/runs/${runId}`, { key: j % 2 === 0 ? tenant.keys.write : write2.key })),
          api(svc, 'GET', `${approvalsPath(runAccount)}?run_id=${runId}`, { key: tenant.keys.read }),
        ]);
        for (const r of runBurst.slice(0, 3)) {
          if (r.status === 202 && r.body.id === runId) continue;
          if (r.status === 409 && slug(r) === 'idempotent-request-in-progress') continue;
          violate(`POST /runs retry with the same Idempotency-Key: ${r.status} ${r.text}`);
        }
        const deletes = runBurst.slice(3, 9);
        for (const d of deletes) {
          if (d.status >= 500) violate(`DELETE run ${runId} (after ${deletesDelay} ms): ${d.status} ${d.text}`);
          else if (d.status !== 200 && !(d.status === 409 && ['run-not-cancelable', 'run-already-finished'].includes(slug(d)))) violate(`DELETE run: undocumented ${d.status} ${d.text}`);
        }
        if (runBurst[9]!.status !== 200) violate(`GET approvals during the run: ${runBurst[9]!.status} ${runBurst[9]!.text}`);
        const run = await waitForTerminalRun(svc, tenant.keys.read, runId, 30_000);
        const canceledBy = deletes.filter((d) => d.status === 200);
        if (canceledBy.length > 0 && canceledBy.length !== deletes.length) violate(`run ${runId}: DELETE burst mixed: ${deletes.map((d) => `${d.status}/${slug(d) || d.body?.status}`).join(', ')}`);
        if (canceledBy.length > 0 && run.status !== 'canceled') violate(`run ${runId}: DELETE answered 200 but the run ended ${run.status}`);
        if (canceledBy.length === 0 && run.status === 'canceled') violate(`run ${runId}: canceled but no DELETE answered 200`);
        const runLog = await accountEvents(runAccount);
        const runProposals = runLog.filter((e) => e.type === 'ActionProposed' && e.data.run_id === runId);
        if (run.status === 'canceled' && runProposals.length > 0) violate(`canceled run ${runId} has ${runProposals.length} ActionProposed in the log`);
        const queued = runLog.filter((e) => e.type === 'RunQueued').length;
        if (queued !== 1) violate(`run ${runId}: ${queued} RunQueued for one Idempotency-Key`);
        if (run.status === 'succeeded') {
          const resultIds = (run.result.actions as { id: string }[]).map((a) => a.id).sort();
          const logIds = runProposals.map((e) => e.data.action_id).sort();
          if (!isDeepStrictEqual(resultIds, logIds)) violate(`run ${runId}: result.actions ${resultIds} != ActionProposed in log ${logIds}`);
        }
        if (VERBOSE) console.log(`      run ${i} ${runId}: DELETEs after ${deletesDelay} ms -> ${deletes.map((d) => d.status).join(',')}; run ${run.status}; ${runProposals.length} proposals`);
        return { runId, runAccount, status: run.status as string };
      }),
    );
    const proposing = runOutcomes.find((o) => o.status === 'succeeded');
    expect(proposing, 'a run that was not canceled').to.not.equal(undefined);
    const runId = proposing!.runId;
    const runAccount = proposing!.runAccount;
    // Negative-keyword actions of the run join the decision bursts.
    const runActions = (await listAllApprovals(svc, tenant.keys.read, runAccount, `run_id=${runId}`)).filter((a) => a.kind === 'add_negative_keywords' && a.status === 'queued');
    for (const a of runActions.slice(0, 4)) {
      acts.push({ id: a.id, accountId: runAccount, campaignId: a.params.campaign_id, kind: a.kind, field: 'keywords', original: 0, proposed: 0, proposerKey: 'proposer', action: a });
    }
    expect(acts.length, 'actions to race on').to.be.at.least(8);

    // ---- Decision bursts: several actions per round, 20–50 requests per round, all fired at once.
    const versionsBefore = new Map<string, string>();
    for (const accountId of new Set(acts.map((a) => a.accountId))) {
      for (const row of await listAllApprovals(svc, tenant.keys.read, accountId)) {
        versionsBefore.set(row.id, row.version);
        const act = acts.find((a) => a.id === row.id);
        if (act) act.action = row;
      }
    }
    const fired: Fired[] = [];
    const editValueOf = (act: Act, i: number): unknown => {
      if (act.field === 'keywords') {
        const kws = act.action.params.keywords as { text: string; match_type: string }[];
        // A different subset (and match types) per request: drop keywords from the start, re-match one.
        const kept = kws.slice(i % kws.length === 0 && kws.length > 1 ? 1 : Math.min(i % kws.length, kws.length - 1));
        return kept.map((k, j) => (j === 0 && i % 2 === 1 ? { text: k.text, match_type: k.match_type === 'exact' ? 'phrase' : 'exact' } : k));
      }
      const step = act.field === 'target_roas_pct' ? 0.1 : 0.01;
      const base = act.original * (1 + (0.02 + 0.01 * (i % 20)) * (i % 3 === 0 ? -1 : 1));
      return Math.round(base / step) * step;
    };
    const order = [...acts.keys()].sort(() => rand() - 0.5);
    const rounds: number[][] = [];
    for (let i = 0; i < order.length; i += 3) rounds.push(order.slice(i, i + 3));
    let editCounter = 0;
    for (const round of rounds) {
      const total = 20 + Math.floor(rand() * 31);
      const plan: Planned[] = [];
      const editHeavy = new Set(round.filter(() => rand() < 0.5));
      for (let n = 0; n < total; n++) {
        const actionIdx = pick(round);
        const act = acts[actionIdx]!;
        // Edit-heavy actions: edits (different values) race each other, a few plain approves and rejects come later.
        const r = editHeavy.has(actionIdx) ? (rand() < 0.75 ? 0.5 : rand()) : rand();
        const key = pick(['proposer', 'write2', 'admin', 'admin', 'write2', 'read'] as const);
        const version = rand() < 0.3 ? (rand() < 0.5 ? 'stale' : 'fresh') : undefined;
        const idem = rand() < 0.3 ? `dec-${SEED}-${actionIdx}-${Math.floor(rand() * 3)}` : undefined;
        const expected = version === 'fresh' ? versionsBefore.get(act.id) : version === 'stale' ? STALE_VERSION : undefined;
        const withVersion = (b: Record<string, unknown>) => (expected === undefined ? b : { ...b, expected_version: expected });
        if (r < 0.06) plan.push({ kind: 'list', key: pick(['read', 'write2', 'admin'] as const), actionIdx });
        else if (r < 0.12) plan.push({ kind: rand() < 0.5 ? 'engage' : 'release', key: rand() < 0.8 ? 'admin' : 'write2', actionIdx, body: { reason: `race ${n}` } });
        else if (r < 0.42) plan.push({ kind: 'approve', key, actionIdx, body: withVersion({ note: `plain ${n}` }), idem, version });
        else if (r < 0.78) {
          const edit = editValueOf(act, ++editCounter);
          plan.push({ kind: 'approve-edit', key, actionIdx, body: withVersion({ note: `edit ${n}`, edit: { [act.field]: edit } }), idem, version, editValue: edit as number });
        } else plan.push({ kind: 'reject', key, actionIdx, body: withVersion({ reason: `reject ${n}` }), idem, version });
      }
      for (const p of plan) p.delayMs = p.kind === 'approve-edit' ? 0 : Math.floor(rand() * (editHeavy.has(p.actionIdx) ? 120 : 15));
      const results = await Promise.all(
        plan.map(async (p) => {
          const act = acts[p.actionIdx]!;
          const headers = p.idem ? { 'idempotency-key': p.idem } : undefined;
          if (p.delayMs) await new Promise((resolve) => setTimeout(resolve, p.delayMs));
          const startedAt = Date.now();
          let result: Result;
          switch (p.kind) {
            case 'list':
              result = await api(svc, 'GET', approvalsPath(act.accountId), { key: keyOf(p.key) });
              break;
            case 'engage':
            case 'release':
              result = await api(svc, 'POST', `/api/v1/workspace/kill-switch/${p.kind}`, { key: keyOf(p.key), body: p.body });
              break;
            default:
              result = await api(svc, 'POST', `${approvalsPath(act.accountId)}/${act.id}/${p.kind === 'reject' ? 'reject' : 'approve'}`, { key: keyOf(p.key), body: p.body, headers });
          }
          return { ...p, result, startedAt, endedAt: Date.now() } as Fired;
        }),
      );
      fired.push(...results);
    }

    // ---- Let the apply worker finish everything approved.
    await eventually(async () => {
      for (const accountId of new Set(acts.map((a) => a.accountId))) {
        const rows = await listAllApprovals(svc, tenant.keys.read, accountId);
        for (const row of rows) if (acts.some((a) => a.id === row.id)) expect(['approved', 'applying'], `${row.id} ${row.status}`).to.not.include(row.status);
      }
    }, 30_000, 200);

    // ---- Per-response checks.
    const fmt = (f: Fired) => `${f.kind} key=${f.key}${f.idem ? ` idem=${f.idem}` : ''}${f.version ? ` version=${f.version}` : ''} body=${JSON.stringify(f.body ?? null)} -> ${f.result.status} ${f.result.text.slice(0, 300)} [${f.startedAt}..${f.endedAt}]`;
    for (const f of fired) {
      const { status } = f.result;
      if (status >= 500) violate(`5xx: ${fmt(f)}`);
      if (f.kind === 'list') {
        if (status !== 200) violate(`list: ${fmt(f)}`);
        continue;
      }
      if (f.kind === 'engage' || f.kind === 'release') {
        if (f.key !== 'admin') {
          if (!(status === 403 && slug(f.result) === 'insufficient-scope')) violate(`kill switch with a write key: ${fmt(f)}`);
        } else if (status !== 200 || f.result.body.engaged !== (f.kind === 'engage')) violate(`kill switch: ${fmt(f)}`);
        continue;
      }
      if (f.key === 'read') {
        if (!(status === 403 && slug(f.result) === 'insufficient-scope')) violate(`decision with the read key: ${fmt(f)}`);
        continue;
      }
      if (status === 200) continue;
      const allowed = ['action-not-in-queue', ...(f.version ? ['action-changed'] : []), ...(f.kind !== 'reject' && f.key === 'proposer' ? [] : [])];
      if (status === 409 && allowed.includes(slug(f.result))) continue;
      if (status === 403 && slug(f.result) === 'distinct-approver-required' && f.kind !== 'reject' && f.key === 'proposer') continue;
      violate(`undocumented loser answer: ${fmt(f)}`);
    }

    // ---- Per-action checks against the event log, the platform and the read model.
    const logs = new Map<string, any[]>();
    for (const accountId of new Set(acts.map((a) => a.accountId))) logs.set(accountId, await accountEvents(accountId));
    const rowsByAccount = new Map<string, any[]>();
    for (const accountId of new Set(acts.map((a) => a.accountId))) rowsByAccount.set(accountId, await listAllApprovals(svc, tenant.keys.read, accountId));
    const summary: string[] = [];
    for (const [idx, act] of acts.entries()) {
      const mine = fired.filter((f) => f.actionIdx === idx && (f.kind === 'approve' || f.kind === 'approve-edit' || f.kind === 'reject'));
      const wins = mine.filter((f) => f.result.status === 200);
      const events = logs.get(act.accountId)!.filter((e) => e.aggregate?.id === act.id);
      const count = (type: string) => events.filter((e) => e.type === type).length;
      const decided = count('ActionApproved') + count('ActionRejected');
      const counts = `Proposed=${count('ActionProposed')} Edited=${count('ActionEdited')} Approved=${count('ActionApproved')} Rejected=${count('ActionRejected')} Started=${count('ActionApplyStarted')} Applied=${count('ActionApplied')} Returned=${count('ActionReturnedToQueue')}`;
      summary.push(`${act.id} ${act.kind}: ${mine.length} decisions, ${wins.length}×200; ${counts}`);
      if (mine.length === 0) continue;
      if (count('ActionProposed') !== 1) violate(`${act.id}: ${counts}`);
      if (wins.length !== 1) violate(`${act.id}: ${wins.length} decision requests answered 200 (expected exactly 1): ${wins.map(fmt).join(' || ')}; log ${counts}`);
      if (decided !== Math.min(1, wins.length) || decided !== wins.length) violate(`${act.id}: ${wins.length}×200 but log has ${counts}`);
      const win = wins[0];
      if (!win) continue;
      if (win.kind !== 'reject' && win.key === 'proposer') violate(`${act.id}: distinct approver broken, the proposer's approval won: ${fmt(win)}`);
      if (win.version === 'stale') violate(`${act.id}: a stale expected_version won: ${fmt(win)}`);
      const edited = count('ActionEdited');
      if (edited !== (win.kind === 'approve-edit' ? 1 : 0)) violate(`${act.id}: winner ${win.kind} but ${edited} ActionEdited; ${counts}`);
      const approvedEvent = events.find((e) => e.type === 'ActionApproved');
      if (approvedEvent && approvedEvent.actor?.id !== keyIdOf(win.key)) violate(`${act.id}: ActionApproved actor ${approvedEvent.actor?.id} != winning key ${keyIdOf(win.key)}`);
      // The value the winner carried.
      const proposedParams = act.action.params;
      let expectedParams: any = proposedParams;
      if (win.kind === 'approve-edit') {
        const e = (win.body as any)?.edit?.[act.field];
        if (e === undefined) { violate(`${act.id}: winning edit without edit body?? ${fmt(win)}`); continue; }
        expectedParams = act.field === 'keywords'
          ? { ...proposedParams, keywords: e.map((k: any) => ({ text: k.text.trim().toLowerCase(), match_type: k.match_type })) }
          : { ...proposedParams, [act.field]: Math.round(e * (act.field === 'target_roas_pct' ? 10 : 100)) / (act.field === 'target_roas_pct' ? 10 : 100) };
      }
      if (!isDeepStrictEqual(win.result.body.params, expectedParams)) violate(`${act.id}: winner's 200 body params ${JSON.stringify(win.result.body.params)} != ${JSON.stringify(expectedParams)}`);
      // Platform changes for this action.
      const calls = platformCalls.filter((c) => {
        if (c.accountId !== act.accountId || c.change.kind !== act.kind) return false;
        const ch = c.change as any;
        if (ch.campaign_id !== act.campaignId) return false;
        if (act.field !== 'keywords') return true;
        const mineTexts = new Set((proposedParams.keywords as any[]).map((k) => k.text));
        return (ch.keywords as any[]).every((k) => mineTexts.has(k.text));
      });
      const row = rowsByAccount.get(act.accountId)!.find((r) => r.id === act.id);
      if (win.kind === 'reject') {
        if (calls.length !== 0) violate(`${act.id}: rejected but the platform got ${calls.length} changes`);
        if (row?.status !== 'rejected') violate(`${act.id}: rejected but the read model says ${row?.status}`);
      } else {
        if (count('ActionApplied') === 1 && calls.length !== 1) violate(`${act.id}: applied once in the log, the platform got ${calls.length} changes: ${JSON.stringify(calls.map((c) => c.change))}`);
        if (calls.length > 1) violate(`${act.id}: the platform got ${calls.length} changes`);
        if (count('ActionApplied') !== 1) violate(`${act.id}: approved, log ${counts}; read model ${row?.status} ${row?.status_reason}`);
        for (const c of calls) {
          const ch = c.change as any;
          const sent = act.field === 'keywords' ? ch.keywords : ch[act.field];
          const want = act.field === 'keywords' ? expectedParams.keywords : expectedParams[act.field];
          if (!isDeepStrictEqual(sent, want)) violate(`${act.id}: the platform got ${JSON.stringify(sent)}, the winning decision carried ${JSON.stringify(want)} (${win.kind})`);
        }
      }
      // Read model converges to the log (status, params, version, edited).
      const state = (await loadAction(infra.aggregates, tenant.workspaceId, act.accountId, act.id)).state;
      if (!row) violate(`${act.id}: not in the approvals list`);
      else {
        if (row.status !== state.status) violate(`${act.id}: read model status ${row.status} != log ${state.status}`);
        if (!isDeepStrictEqual(row.params, state.params)) violate(`${act.id}: read model params ${JSON.stringify(row.params)} != log ${JSON.stringify(state.params)}`);
        const v = actionVersion({ status: state.status, params: state.params, changedAt: state.changedAt });
        if (row.version !== v) violate(`${act.id}: read model version ${row.version} != log version ${v}`);
        if ((row.edited !== null) !== (edited === 1)) violate(`${act.id}: read model edited=${JSON.stringify(row.edited)} but ${edited} ActionEdited`);
      }
    }

    // ---- A returned action (paused campaign: the worker sends approvals back): a real stale version must never win.
    let pausedDone = false;
    for (const accountId of accounts) {
      if (pausedDone) break;
      const c = await campaignsByStrategy(svc, tenant.keys.read, accountId);
      if (c.roas.status === 'enabled') continue;
      pausedDone = true;
      const value = Math.round(c.roas.bidding_strategy.target_roas_pct! * 1.04 * 10) / 10;
      const proposedRes = await api(svc, 'POST', targetPath(accountId, c.roas.id), { key: tenant.keys.write, body: { reason: 'paused race', target_roas_pct: value } });
      expect(proposedRes.status, proposedRes.text).to.equal(200);
      const id = proposedRes.body.id as string;
      const first = (await listAllApprovals(svc, tenant.keys.read, accountId)).find((r) => r.id === id)!;
      const approved = await api(svc, 'POST', `${approvalsPath(accountId)}/${id}/approve`, { key: tenant.keys.admin, body: { expected_version: first.version } });
      expect(approved.status, approved.text).to.equal(200);
      let returned: any;
      await eventually(async () => {
        returned = (await listAllApprovals(svc, tenant.keys.read, accountId)).find((r) => r.id === id)!;
        expect(returned.status).to.equal('returned');
      }, 10_000, 50);
      // The approval's answer may already show the return (the worker is that quick): then its version is the current one, not stale.
      const staleVersions = [first.version, approved.body.version].filter((version) => version !== returned.version);
      const burst: { label: string; stale: boolean; edit: boolean; body: any; key: string }[] = [];
      const n = 20 + Math.floor(rand() * 11);
      for (let i = 0; i < n; i++) {
        const stale = rand() < 0.4;
        const version = stale ? pick(staleVersions) : rand() < 0.5 ? returned.version : undefined;
        const edit = rand() < 0.4;
        const reject = !edit && rand() < 0.3;
        const body: any = reject ? { reason: `r${i}` } : edit ? { edit: { target_roas_pct: Math.round(c.roas.bidding_strategy.target_roas_pct! * (1.01 + i / 200) * 10) / 10 } } : { note: `n${i}` };
        if (version) body.expected_version = version;
        burst.push({ label: reject ? 'reject' : 'approve', stale, edit, body, key: pick([write2.key, tenant.keys.admin]) });
      }
      const answers = await Promise.all(burst.map((b) => api(svc, 'POST', `${approvalsPath(accountId)}/${id}/${b.label}`, { key: b.key, body: b.body })));
      await eventually(async () => {
        const row = (await listAllApprovals(svc, tenant.keys.read, accountId)).find((r) => r.id === id)!;
        expect(['approved', 'applying']).to.not.include(row.status);
      }, 10_000, 50);
      const events = (await accountEvents(accountId)).filter((e) => e.aggregate?.id === id);
      const cnt = (t: string) => events.filter((e) => e.type === t).length;
      const wins = answers.map((a, i) => ({ a, b: burst[i]! })).filter((x) => x.a.status === 200);
      for (const [i, a] of answers.entries()) {
        const b = burst[i]!;
        const text = `paused action ${id}: ${b.label} ${JSON.stringify(b.body)} stale=${b.stale} -> ${a.status} ${a.text.slice(0, 200)}`;
        if (a.status >= 500) violate(`5xx: ${text}`);
        else if (a.status === 200 && b.stale) violate(`stale version won: ${text}`);
        else if (a.status !== 200 && !(a.status === 409 && ['action-not-in-queue', 'action-changed'].includes(slug(a)))) violate(`undocumented: ${text}`);
      }
      const decisions = cnt('ActionApproved') + cnt('ActionRejected') - 1;
      if (decisions !== wins.length) violate(`paused action ${id}: ${wins.length}×200 in the burst but ${decisions} decisions in the log`);
      if (cnt('ActionEdited') !== wins.filter((w) => w.b.edit).length) violate(`paused action ${id}: ${cnt('ActionEdited')} ActionEdited, ${wins.filter((w) => w.b.edit).length} edit wins`);
      if (cnt('ActionApplied') !== 0 || cnt('ActionApplyStarted') !== 0) violate(`paused action ${id}: applied on a paused campaign`);
      if (platformCalls.some((pc) => (pc.change as any).campaign_id === c.roas.id)) violate(`paused action ${id}: the platform got a change`);
      if (VERBOSE) console.log(`      paused action ${id}: ${n} requests, ${wins.length}×200 (${wins.map((w) => w.b.label + (w.b.edit ? '+edit' : '')).join(',')}); log Approved=${cnt('ActionApproved')} Rejected=${cnt('ActionRejected')} Edited=${cnt('ActionEdited')} Returned=${cnt('ActionReturnedToQueue')}`);
    }

    // ---- Kill switch: every 200 reflects an event in the workspace log; GET agrees with the fold.
    const wsEvents = (await workspaceEvents()).filter((e) => e.type === 'KillSwitchEngaged' || e.type === 'KillSwitchReleased');
    const switchAnswers = fired.filter((f) => (f.kind === 'engage' || f.kind === 'release') && f.result.status === 200);
    for (const f of switchAnswers) {
      const since = f.result.body.since;
      const match = since === null && !f.result.body.engaged ? true : wsEvents.find((e) => e.time === since && (e.type === 'KillSwitchEngaged') === f.result.body.engaged);
      if (!match) violate(`kill switch answer ${fmt(f)} has no matching event in the workspace log`);
    }
    for (let i = 1; i < wsEvents.length; i++) if (wsEvents[i].type === wsEvents[i - 1].type) violate(`kill switch log has ${wsEvents[i].type} twice in a row`);
    const ks = await api(svc, 'GET', '/api/v1/workspace/kill-switch', { key: tenant.keys.read });
    const wsState = (await loadWorkspace(infra.aggregates, tenant.workspaceId)).state;
    if (ks.body.engaged !== wsState.killSwitch.engaged) violate(`GET kill switch ${ks.text} != log ${JSON.stringify(wsState.killSwitch)}`);

    if (VERBOSE) console.log(`      ${fired.length} requests in ${rounds.length} rounds; ${platformCalls.length} platform changes; ${wsEvents.length} kill-switch events`);
    if (VERBOSE) for (const s of summary) console.log(`      ${s}`);
    if (violations.length > 0) console.log(`      VIOLATIONS (seed ${SEED}):\n        ${violations.join('\n        ')}`);
    expect(violations, `seed ${SEED}`).to.deep.equal([]);
  });
});
