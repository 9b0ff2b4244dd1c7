import { expect } from 'chai';
import { spawn, type ChildProcess } from 'node:child_process';
import { randomUUID } from 'node:crypto';
import { createAccount, issueKey, pauseRunStarts, revokeKey } from '../../src/operator/operator-commands.ts';
import { serviceEnv } from '../support/cli.ts';
import { eventually } from '../support/eventually.ts';
import { seededRandom } from '../support/seeded-random.ts';
import { startTestService, type TestService, type TestTenant } from '../support/test-service.ts';

/**
 * "`key revoke KEY_ID`: the key stops working at once" (README), under concurrency and across
 * processes. Two HTTP processes on one stream and schema: A, in this process (every role), and
 * B, a separate OS process (`ROLES=http`, `node src/main.ts`). A write key is hammered on both
 * by many concurrent clients (POST /runs with and without Idempotency-Key and replays, polls of
 * its runs, the approvals list, approvals, cancels, the account list) while two Server-Sent Event
 * streams per process follow one of its queued runs. At a seeded moment the operator revokes the
 * key (`revokeKey`, what `adsagent key revoke` runs). Every request's send time and answer is
 * recorded, and then:
 *
 * - every request sent after `revokeKey` returned is 401 `unauthorized` with `WWW-Authenticate:
 *   Bearer` (docs/api.md, "Errors"), on both processes: exactly 0 other answers;
 * - no answer is a 5xx or a hang, and a request in flight at the revocation ends as it would have
 *   before it or as a 401;
 * - no event in the key's name comes from a request sent after `revokeKey` returned or one the
 *   service refused; a request already past its key check when the revocation arrived finishes
 *   as it began (docs/api.md, "Key lookups"), so its event may follow ApiKeyRevoked in the log;
 * - the key's open event streams end within SSE_KEY_RECHECK_MS with `: the API key was revoked`
 *   and no retry hint, and their reconnect answers 401 (docs/api.md, "Live run events");
 * - every run the key queued and that was not canceled ends `failed` with `key_revoked` once the
 *   workspace's run starts resume (docs/api.md, "Run errors"; run starts are paused during the
 *   hammer so the runs stay queued).
 *
 * KEY_REVOKE_RACE_SEED replays the mix and the revocation moment (process timing still varies).
 */

const SEED = Number(process.env.KEY_REVOKE_RACE_SEED ?? 7301);
const CLIENTS = 16;
const SSE_KEY_RECHECK_MS = 300;
/** Hammering goes on this long after `revokeKey` returned. */
const AFTER_REVOCATION_MS = 1500;
/** A request not answered within this is a hang. */
const REQUEST_TIMEOUT_MS = 8000;
const POOL_BEFORE = 20;
const POOL_AFTER = 12;
const BRIEF = 'Find wasted spend in search terms and propose negative keywords';

type Proc = 'A' | 'B';
type Op = 'post_run' | 'replay_run' | 'get_run' | 'approvals' | 'approve' | 'cancel' | 'accounts';

interface Exchange {
  readonly n: number;
  readonly proc: Proc;
  readonly op: Op;
  readonly method: string;
  readonly path: string;
  /** performance.now() just before the request was handed to fetch. */
  readonly sentAt: number;
  doneAt?: number;
  status?: number;
  problemType?: string;
  wwwAuthenticate?: string | null;
  body?: any;
  error?: string;
  runId?: string;
  actionId?: string;
}

interface SseStream {
  readonly proc: Proc;
  text: string;
  endedAt?: number;
  status?: number;
  error?: string;
  done: Promise<void>;
  sawQueued: Promise<void>;
}

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

describe(`a revoked key stops working at once, under concurrency and across processes (KEY_REVOKE_RACE_SEED=${SEED})`, function () {
  this.timeout(60_000);
  const random = seededRandom(SEED);
  const pick = <T>(items: readonly T[]): T => items[Math.floor(random() * items.length)]!;
  let svc: TestService;
  let tenant: TestTenant;
  let child: ChildProcess | undefined;
  let childExited: Promise<void> = Promise.resolve();
  let childStderr = '';
  const url: Record<Proc, string> = { A: '', B: '' };

  function spawnHttpOnly(): Promise<string> {
    const started = spawn(process.execPath, ['src/main.ts'], {
      env: { ...process.env, ...serviceEnv(svc.config), LOG_LEVEL: 'warn', ROLES: 'http', HOST: '127.0.0.1', PORT: '0', SSE_KEY_RECHECK_MS: String(SSE_KEY_RECHECK_MS) },
      stdio: ['ignore', 'ignore', 'pipe'],
    });
    child = started;
    childExited = new Promise((resolve) => started.once('exit', () => resolve()));
    return new Promise<string>((resolve, reject) => {
      started.stderr!.on('data', (chunk: Buffer) => {
        childStderr = (childStderr + chunk.toString()).slice(-8000);
        const listening = /listening on (http:\/\/\S+)/.exec(childStderr)?.[1];
        if (listening) resolve(listening);
      });
      started.once('exit', (code, signal) => reject(new Error(`HTTP-only process exited (${code ?? signal}); stderr: ${childStderr.trim()}`)));
      setTimeout(() => reject(new Error(`HTTP-only process did not start within 20 s; stderr: ${childStderr.trim()}`)), 20_000).unref();
    });
  }

  async function send(proc: Proc, method: string, path: string, key: string, body?: unknown, headers: Record<string, string> = {}) {
    const response = await fetch(`${url[proc]}${path}`, {
      method,
      headers: { authorization: `Bearer ${key}`, ...(body !== undefined ? { 'content-type': 'application/json' } : {}), ...headers },
      body: body === undefined ? undefined : JSON.stringify(body),
      signal: AbortSignal.timeout(REQUEST_TIMEOUT_MS),
    });
    const text = await response.text();
    let json: any;
    try {
      json = text === '' ? undefined : JSON.parse(text);
    } catch {
      json = { raw: text };
    }
    return { status: response.status, headers: response.headers, body: json };
  }

  function openStream(proc: Proc, runId: string, key: string): SseStream {
    const stream: SseStream = { proc, text: '', done: Promise.resolve(), sawQueued: Promise.resolve() };
    let queued: () => void = () => undefined;
    stream.sawQueued = new Promise<void>((resolve) => (queued = resolve));
    stream.done = (async () => {
      try {
        const response = await fetch(`${url[proc]}/api/v1/runs/${runId}/events`, { headers: { authorization: `Bearer ${key}` }, signal: AbortSignal.timeout(20_000) });
        stream.status = response.status;
        const decoder = new TextDecoder();
        for await (const chunk of response.body as unknown as AsyncIterable<Uint8Array>) {
          stream.text += decoder.decode(chunk, { stream: true });
          if (stream.text.includes('event: queued')) queued();
        }
      } catch (error) {
        stream.error = error instanceof Error ? `${error.name}: ${error.message}` : String(error);
      } finally {
        stream.endedAt = performance.now();
        queued();
      }
    })();
    return stream;
  }

  before(async function () {
    this.timeout(60_000);
    console.log(`      KEY_REVOKE_RACE_SEED=${SEED}`);
    svc = await startTestService('keyrevokerace', { SSE_KEY_RECHECK_MS: String(SSE_KEY_RECHECK_MS) });
    url.A = svc.baseUrl;
    const childUrl = spawnHttpOnly();
    tenant = await svc.tenant('revoke-race');
    url.B = await childUrl;
  });

  after(async function () {
    this.timeout(30_000);
    if (child && child.exitCode === null && child.signalCode === null) {
      child.kill('SIGTERM');
      const exited = await Promise.race([childExited.then(() => true), sleep(5000).then(() => false)]);
      if (!exited) child.kill('SIGKILL');
      await Promise.race([childExited, sleep(3000)]);
    }
    await svc?.stop();
  });

  it('answers 401 to every request sent after revokeKey returned, on both processes, records nothing for it, ends its streams and fails its queued runs with key_revoked', async () => {
    const infra = svc.service.infrastructure;
    const ws = tenant.workspaceId;
    const created = await Promise.all(Array.from({ length: POOL_BEFORE + POOL_AFTER + 1 }, (_, i) => createAccount(infra, ws, `race ${i}`, 'none')));
    const accountIds = created.map((c) => c.value.id);
    const poolBefore = accountIds.slice(0, POOL_BEFORE);
    const poolAfter = accountIds.slice(POOL_BEFORE, POOL_BEFORE + POOL_AFTER);
    const sseAccount = accountIds.at(-1)!;
    const victim = (await issueKey(infra, ws, 'write', 'to be revoked under load')).value;

    // Both processes know the key (B fetches it when it sees ApiKeyIssued, or warms it at start).
    await eventually(async () => {
      for (const proc of ['A', 'B'] as const) expect((await send(proc, 'GET', '/api/v1/accounts', victim.key)).status, `process ${proc}`).to.equal(200);
    }, 10_000, 50);

    // Queued actions the victim key can decide: from two finished runs of the rules agent.
    const proposalRuns = await Promise.all(
      [tenant.accounts.sandbox, tenant.accounts.sandbox2].map(async (account) => {
        const queued = await send('A', 'POST', '/api/v1/runs', victim.key, { brief: BRIEF, project_id: account });
        expect(queued.status, JSON.stringify(queued.body)).to.equal(202);
        let run: any;
        await eventually(async () => {
          run = (await send('A', 'GET', `/api/v1/runs/${queued.body.id}`, tenant.keys.read)).body;
          expect(run.status).to.be.oneOf(['succeeded', 'failed', 'canceled']);
        }, 15_000, 50);
        expect(run.status, JSON.stringify(run.error)).to.equal('succeeded');
        return { account, actions: (run.result.actions as { id: string }[]).map((a) => a.id) };
      }),
    );
    const allActions = proposalRuns.flatMap((r) => r.actions.map((id) => ({ account: r.account, id })));
    expect(allActions.length, 'the rules agent proposed actions').to.be.at.least(2);
    // Half the actions are approved under load before the revocation, the others are kept queued
    // for after it: a working key would get 200 for those, so a leak shows.
    const split = Math.ceil(allActions.length / 2);
    const actionsBefore = allActions.slice(0, split);
    const actionsAfter = allActions.slice(split);

    // Runs the key queues stay queued until the revocation is over.
    await pauseRunStarts(infra, ws, 600, 'key revocation race');

    // One queued run followed by two event streams on each process.
    const sseRun = await send('A', 'POST', '/api/v1/runs', victim.key, { brief: 'Summarise the account', project_id: sseAccount });
    expect(sseRun.status, JSON.stringify(sseRun.body)).to.equal(202);
    const streams = (['A', 'A', 'B', 'B'] as const).map((proc) => openStream(proc, sseRun.body.id, victim.key));
    await Promise.race([Promise.all(streams.map((s) => s.sawQueued)), sleep(5000)]);
    for (const s of streams) expect(s.text, `stream on ${s.proc}: ${s.error ?? ''}`).to.include('event: queued');

    // ---- the hammer ----
    const exchanges: Exchange[] = [];
    const inFlight: Promise<void>[] = [];
    const runsOf = new Map<string, string>(); // run id -> account
    const runIds: string[] = [];
    const idempotent: { key: string; body: unknown }[] = [];
    let revokeStart = Infinity;
    let revokeEnd = Infinity;
    let n = 0;

    const exchange = async (proc: Proc, op: Op, method: string, path: string, body?: unknown, headers?: Record<string, string>, ids: { actionId?: string; runId?: string } = {}) => {
      const record: Exchange = { n: n++, proc, op, method, path, sentAt: performance.now(), ...ids };
      exchanges.push(record);
      try {
        const answer = await send(proc, method, path, victim.key, body, headers);
        record.doneAt = performance.now();
        record.status = answer.status;
        record.body = answer.body;
        record.wwwAuthenticate = answer.headers.get('www-authenticate');
        if (typeof answer.body?.type === 'string') record.problemType = new URL(answer.body.type, 'http://x').pathname;
        if (op === 'post_run' || op === 'replay_run') {
          if (answer.status === 202) {
            record.runId = answer.body.id;
            if (!runsOf.has(answer.body.id)) {
              runsOf.set(answer.body.id, (body as { project_id: string }).project_id);
              runIds.push(answer.body.id);
            }
            if (op === 'post_run' && headers?.['idempotency-key']) idempotent.push({ key: headers['idempotency-key'], body });
          }
        }
      } catch (error) {
        record.doneAt = performance.now();
        record.error = error instanceof Error ? `${error.name}: ${error.message}` : String(error);
      }
    };

    const nextRequest = (): Promise<void> => {
      const proc: Proc = random() < 0.5 ? 'A' : 'B';
      const after = performance.now() >= revokeStart;
      const roll = random();
      if (roll < 0.28) {
        const body = { brief: `race ${n}`, project_id: pick(after ? poolAfter : poolBefore) };
        const headers: Record<string, string> = random() < 0.4 ? { 'idempotency-key': randomUUID() } : {};
        return exchange(proc, 'post_run', 'POST', '/api/v1/runs', body, headers);
      }
      if (roll < 0.34 && idempotent.length > 0) {
        const earlier = pick(idempotent);
        return exchange(proc, 'replay_run', 'POST', '/api/v1/runs', earlier.body, { 'idempotency-key': earlier.key });
      }
      if (roll < 0.54) return exchange(proc, 'get_run', 'GET', `/api/v1/runs/${runIds.length > 0 ? pick(runIds) : sseRun.body.id}`);
      if (roll < 0.66) return exchange(proc, 'approvals', 'GET', `/api/v1/accounts/${pick([tenant.accounts.sandbox, tenant.accounts.sandbox2])}/approvals?status=queued`);
      if (roll < 0.8) {
        const action = pick(after ? actionsAfter.length > 0 ? actionsAfter : actionsBefore : actionsBefore);
        return exchange(proc, 'approve', 'POST', `/api/v1/accounts/${action.account}/approvals/${action.id}/approve`, { note: `race ${n}` }, {}, { actionId: action.id });
      }
      if (roll < 0.88 && runIds.length > 0) {
        // Cancels only runs of the pool used before the revocation, so accounts free up for new runs.
        const candidates = runIds.filter((id) => poolBefore.includes(runsOf.get(id)!));
        if (candidates.length > 0) {
          const runId = pick(candidates);
          return exchange(proc, 'cancel', 'DELETE', `/api/v1/runs/${runId}`, undefined, {}, { runId });
        }
      }
      return exchange(proc, 'accounts', 'GET', '/api/v1/accounts');
    };

    // When the ApiKeyRevoked reaches this process on the wire (process A evicts the key at that moment).
    let seenOnWire = Infinity;
    const keySubscription = infra.nc.subscribe(infra.subjects.filter(ws, '_', 'key'), {
      callback: (_error, message) => {
        if (message.subject.endsWith(`.${victim.id}`)) seenOnWire = Math.min(seenOnWire, performance.now());
      },
    });
    const loadStart = performance.now();
    const revokeAfterMs = 500 + Math.floor(random() * 1000);
    let stopAt = Infinity;
    const clients = Array.from({ length: CLIENTS }, async () => {
      while (performance.now() < stopAt) {
        const request = nextRequest();
        inFlight.push(request);
        await request;
      }
    });

    await sleep(revokeAfterMs);
    revokeStart = performance.now();
    await revokeKey(infra, victim.id);
    revokeEnd = performance.now();
    stopAt = revokeEnd + AFTER_REVOCATION_MS;
    // A burst the moment revokeKey returned, on both processes: the most exposed instant.
    const burst: Promise<void>[] = [];
    for (const proc of ['A', 'B'] as const) {
      for (let i = 0; i < 6; i++) {
        burst.push(exchange(proc, 'get_run', 'GET', `/api/v1/runs/${runIds.length > 0 ? pick(runIds) : sseRun.body.id}`));
        burst.push(exchange(proc, 'post_run', 'POST', '/api/v1/runs', { brief: `burst ${proc} ${i}`, project_id: pick(poolAfter) }));
      }
      if (actionsAfter.length > 0) {
        const action = pick(actionsAfter);
        burst.push(exchange(proc, 'approve', 'POST', `/api/v1/accounts/${action.account}/approvals/${action.id}/approve`, {}, {}, { actionId: action.id }));
      }
      if (idempotent.length > 0) {
        const earlier = pick(idempotent);
        burst.push(exchange(proc, 'replay_run', 'POST', '/api/v1/runs', earlier.body, { 'idempotency-key': earlier.key }));
      }
    }
    await Promise.all([...clients, ...burst]);
    await Promise.allSettled(inFlight);
    const revokeMs = Math.round(revokeEnd - revokeStart);
    keySubscription.unsubscribe();

    // ---- what the clients saw ----
    const rel = (t: number) => `${Math.round(t - revokeEnd)} ms`;
    const show = (e: Exchange) =>
      `#${e.n} ${e.proc} ${e.method} ${e.path} sent ${rel(e.sentAt)}, answered ${e.doneAt === undefined ? '-' : rel(e.doneAt)} (relative to revokeKey returning) → ${e.error ?? `${e.status} ${e.problemType ?? ''}`}`;
    const sentAfter = exchanges.filter((e) => e.sentAt > revokeEnd);
    const answeredBefore = exchanges.filter((e) => e.doneAt !== undefined && e.doneAt < revokeStart);
    const straddling = exchanges.filter((e) => e.sentAt <= revokeEnd && !(e.doneAt !== undefined && e.doneAt < revokeStart));
    const count = (list: Exchange[], proc: Proc) => list.filter((e) => e.proc === proc).length;
    console.log(
      `      ${exchanges.length} requests; revokeKey at +${Math.round(revokeStart - loadStart)} ms took ${revokeMs} ms; ` +
        `answered before it: ${answeredBefore.length} (2xx ${answeredBefore.filter((e) => e.status! < 300).length}), in flight: ${straddling.length}, ` +
        `sent after it returned: ${sentAfter.length} (A ${count(sentAfter, 'A')}, B ${count(sentAfter, 'B')})`,
    );

    const leaks = sentAfter.filter((e) => e.status !== 401 || e.problemType !== '/problems/unauthorized' || !/^Bearer\b/.test(e.wwwAuthenticate ?? ''));
    const faults = exchanges.filter((e) => e.error !== undefined || (e.status ?? 0) >= 500);
    const badBefore = answeredBefore.filter((e) => ![200, 202, 409].includes(e.status!));
    const badInFlight = straddling.filter((e) => ![200, 202, 409, 401].includes(e.status!));
    for (const [label, list] of [['not 401 after revocation', leaks], ['5xx or no answer', faults], ['odd answer before revocation', badBefore], ['odd answer in flight', badInFlight]] as const) {
      if (list.length > 0) console.log(`      ${label} (${list.length}):\n${list.slice(0, 12).map((e) => `        ${show(e)}`).join('\n')}`);
    }

    // ---- the key's event streams ----
    await Promise.race([Promise.all(streams.map((s) => s.done)), sleep(SSE_KEY_RECHECK_MS + 3000)]);
    const streamEnds = streams.map((s) => (s.endedAt === undefined ? 'still open' : rel(s.endedAt)));
    console.log(`      event streams ended at (relative to revokeKey returning): ${streamEnds.join(', ')}`);
    const reconnects = await Promise.all(
      (['A', 'B'] as const).map((proc) => send(proc, 'GET', `/api/v1/runs/${sseRun.body.id}/events`, victim.key, undefined, { 'last-event-id': '1' })),
    );

    // ---- the event log: nothing of the key after its ApiKeyRevoked but what in-flight requests account for ----
    const events: { seq: number; type: string; actor: { kind: string; id: string }; aggregate: { id: string }; data: any }[] = [];
    for await (const stored of infra.store.readFiltered(infra.subjects.filter(ws), 1)) events.push({ seq: stored.seq, ...stored.event });
    const revocation = events.find((e) => e.type === 'ApiKeyRevoked' && e.aggregate.id === victim.id);
    expect(revocation, 'the ApiKeyRevoked event').to.not.equal(undefined);
    const byKeyAfter = events.filter((e) => e.seq > revocation!.seq && e.actor.kind === 'api_key' && e.actor.id === victim.id);
    // The request that did what an event of the key records: the one that answered 2xx for that run or action.
    const requestOf = (e: (typeof events)[number]): Exchange | undefined => {
      const ops: readonly Op[] = e.type === 'RunQueued' ? ['post_run', 'replay_run'] : e.type === 'RunCanceled' ? ['cancel'] : e.type === 'ActionApproved' || e.type === 'ActionEdited' ? ['approve'] : [];
      const id = e.type.startsWith('Action') ? e.aggregate.id : e.data?.run_id;
      return exchanges.find((x) => ops.includes(x.op) && x.status !== undefined && x.status < 300 && (x.op === 'approve' ? x.actionId : x.runId) === id);
    };
    const explain = (e: (typeof events)[number]) => {
      const x = requestOf(e);
      const what = `${e.type} seq ${e.seq} (${e.type.startsWith('Action') ? `action ${e.aggregate.id}` : `run ${e.data?.run_id}`})`;
      return `${what} ← ${x ? `${show(x)}; sent ${Math.round(x.sentAt - seenOnWire)} ms relative to ApiKeyRevoked reaching process A` : 'no request was answered 2xx for it'}`;
    };
    const unexplained = byKeyAfter.filter((e) => {
      const x = requestOf(e);
      return x === undefined || x.sentAt > revokeEnd;
    });
    console.log(
      `      revokeKey called at ${rel(revokeStart)}, ApiKeyRevoked (seq ${revocation!.seq}) on the wire at ${rel(seenOnWire)}; ` +
        `events of the key after it: ${byKeyAfter.length}${byKeyAfter.map((e) => `\n        ${explain(e)}`).join('')}`,
    );

    // ---- the key's queued runs fail with key_revoked once run starts resume ----
    await pauseRunStarts(infra, ws, null, 'key revocation race over');
    const queuedRuns = [sseRun.body.id as string, ...runIds];
    const finals = new Map<string, any>();
    await eventually(async () => {
      for (const runId of queuedRuns) {
        if (finals.has(runId)) continue;
        const run = (await send('A', 'GET', `/api/v1/runs/${runId}`, tenant.keys.read)).body;
        expect(run.status, `run ${runId}`).to.be.oneOf(['succeeded', 'failed', 'canceled']);
        finals.set(runId, run);
      }
    }, 12_000, 100);
    const notKeyRevoked = [...finals.values()].filter((run) => run.status !== 'canceled' && !(run.status === 'failed' && run.error?.code === 'key_revoked'));
    const failedRevoked = [...finals.values()].filter((run) => run.status === 'failed' && run.error?.code === 'key_revoked').length;
    console.log(`      the key's runs: ${finals.size} (${failedRevoked} failed key_revoked, ${[...finals.values()].filter((r) => r.status === 'canceled').length} canceled)`);

    // ---- assertions: every one is checked, and all that fail are reported together ----
    const failures: string[] = [];
    const none = (label: string, items: readonly string[]) => {
      if (items.length > 0) failures.push(`${label} (${items.length}):\n    ${items.join('\n    ')}`);
    };
    const check = (assertion: () => void) => {
      try {
        assertion();
      } catch (error) {
        failures.push(error instanceof Error ? error.message : String(error));
      }
    };
    const other = await Promise.all((['A', 'B'] as const).map((proc) => send(proc, 'GET', '/api/v1/accounts', tenant.keys.write)));

    // The load was real: the key worked on both processes before the revocation, and was used on both after it.
    check(() => expect(answeredBefore.filter((e) => e.proc === 'A' && e.status! < 300).length, 'successes on A before the revocation').to.be.greaterThan(0));
    check(() => expect(answeredBefore.filter((e) => e.proc === 'B' && e.status! < 300).length, 'successes on B before the revocation').to.be.greaterThan(0));
    check(() => expect(answeredBefore.filter((e) => e.op === 'post_run' && e.status === 202).length, 'runs queued before the revocation').to.be.greaterThan(0));
    check(() => expect(count(sentAfter, 'A'), 'requests to A after the revocation').to.be.at.least(20));
    check(() => expect(count(sentAfter, 'B'), 'requests to B after the revocation').to.be.at.least(20));

    none('requests sent after revokeKey returned that were not 401 unauthorized with WWW-Authenticate: Bearer', leaks.map(show));
    none('5xx answers or requests never answered', faults.map(show));
    none('answers before the revocation other than 200/202/409', badBefore.map(show));
    none('requests in flight at the revocation that ended neither as before nor as 401', badInFlight.map(show));

    // Nothing the service refused, and nothing sent after revokeKey returned, left a trace in the log. A request already
    // past its key check when the revocation arrived finishes as it began (docs/api.md, "Key lookups"): its event may
    // follow ApiKeyRevoked in the log, and is accounted for here by a request sent before revokeKey returned.
    none('events of the revoked key that no request sent before revokeKey returned and answered 2xx accounts for', unexplained.map(explain));
    console.log(`      events of the key stored after its ApiKeyRevoked (seq ${revocation!.seq}), each from a request in flight: ${byKeyAfter.length}`);

    for (const [i, s] of streams.entries()) {
      const label = `event stream ${i} on ${s.proc}`;
      check(() => expect(s.status, label).to.equal(200));
      check(() => expect(s.endedAt, `${label} ended`).to.not.equal(undefined));
      check(() => expect(s.endedAt! - revokeEnd, `${label}: ms after revokeKey returned`).to.be.below(SSE_KEY_RECHECK_MS + 2000));
      check(() => expect(s.error, label).to.equal(undefined));
      check(() => expect(s.text, label).to.match(/: the API key was revoked\n\n$/));
      check(() => expect(s.text.slice(s.text.lastIndexOf(': the API key was revoked')), `${label}: no retry hint`).to.not.include('retry:'));
    }
    for (const [i, reconnect] of reconnects.entries()) {
      check(() => expect(reconnect.status, `event stream reconnect on ${i === 0 ? 'A' : 'B'}`).to.equal(401));
      check(() => expect(reconnect.headers.get('www-authenticate'), `event stream reconnect on ${i === 0 ? 'A' : 'B'}`).to.match(/^Bearer\b/));
    }

    none('runs of the key that did not fail with key_revoked', notKeyRevoked.map((run) => `${run.id}: ${run.status} ${JSON.stringify(run.error)}`));
    check(() => expect(failedRevoked, 'runs failed with key_revoked').to.be.greaterThan(0));

    // The revocation touched only its key: another write key of the workspace still works on both processes.
    for (const [i, answer] of other.entries()) check(() => expect(answer.status, `another key on ${i === 0 ? 'A' : 'B'}`).to.equal(200));

    if (failures.length > 0) throw new Error(`KEY_REVOKE_RACE_SEED=${SEED}: ${failures.length} check(s) failed:\n- ${failures.join('\n- ')}`);
  });
});
