import { expect } from 'chai';
import type { Config } from '../../src/config/config.ts';
import type { DomainEvent } from '../../src/events/catalogue/index.ts';
import { createLogger } from '../../src/log/logger.ts';
import { createAccount, createWorkspace, issueKey, pauseRunStarts } from '../../src/operator/operator-commands.ts';
import { startService, type RunningService } from '../../src/runtime/service.ts';
import { toActionRepresentation } from '../../src/http/representations/action-representation.ts';
import { toRunStreamMessage } from '../../src/http/routes/run-event-stream.ts';
import { runIdOf } from '../../projections/runs/fold-runs.ts';
import { findRun, findRunActions, toRunRepresentation } from '../../projections/runs/run-view.ts';
import { dropIsolated, isolatedConfig } from '../support/isolation.ts';
import { NatsGate } from '../support/nats-gate.ts';
import { PrivateNats } from '../support/private-nats.ts';
import { SeededRandom } from '../support/seeded-random.ts';

/**
 * In-memory state of an HTTP process across a cut of its own NATS connection, while the server
 * stays healthy and every other process goes on writing.
 *
 * Two HTTP processes on one private nats-server, one stream, one schema, both in this test's
 * process: B (roles http, projectors, agent-worker, apply-worker) reaches the server directly;
 * A (role http only) reaches it through a TCP relay, the gate. A is the process under test: its
 * run-state follower (src/runtime/run-state-follower.ts) serves GET /api/v1/runs/{id} of queued
 * and running runs from memory (src/runtime/live-runs.ts), its TerminalRunCache keeps ended runs,
 * its remembered write-model states (`aggregates.followed`, commands/shared/aggregates.ts) decide
 * StartRun without a reload, and its SSE streams follow the log through ordered consumers.
 *
 * Each round: runs on fresh sandbox accounts with the rules model; two of them finish before the
 * cut and leave queued actions; run starts are paused and more runs are queued through A (A holds
 * them live and has answered them `queued`); SSE streams are opened on A for some of them. Then
 * the gate cuts A off (every connection through it destroyed, new ones refused) for a seeded
 * while, during which, through B and the operator: some queued runs are canceled, actions are
 * rejected, approved and edited-and-approved, run starts resume and the other runs start and
 * finish, new runs are created on freed accounts and finish, starts are paused again and one more
 * run is queued. Meanwhile clients poll A (runs, approvals, accounts, POST /runs on an account of
 * their own, SSE opens). Then the gate opens. Checked, with exact counts:
 *
 * 1. CATCH_UP_BOUND_MS after the gate opened, GET /api/v1/runs/{id} on A answers every run with
 *    the same bytes as B and the same representation as the Postgres read model; no A answer is
 *    older than one A gave earlier for the run (no going back in time); and no A answer sent
 *    after the bound is `queued`/`running` for a run that had ended before it was sent.
 * 2. Commands on A after the bound answer what B answers: DELETE of runs canceled or finished
 *    meanwhile (200 / 409 run-already-finished), approve/reject of actions decided on B meanwhile
 *    with the version A's clients saw before the cut (409), approve of untouched ones (200), POST
 *    /runs on accounts whose run ended meanwhile (202) and on the account with B's queued run
 *    (409 run-in-progress naming it). The log then holds exactly one RunQueued per run, at most
 *    one terminal event and at most one RunCanceled per run, no action both approved and
 *    rejected, and no decision twice.
 * 3. While A is cut off: every answer is a 503 problem+json with Retry-After, or correct (a GET
 *    of a run is not `queued`/`running` when the run had ended STALE_GRACE_MS before the request
 *    was sent); never another 5xx, never a hang (REQUEST_TIMEOUT_MS).
 * 4. SSE streams opened on A before the cut, resumed the way EventSource does (Last-Event-ID)
 *    when they end early, deliver exactly the run's milestones of the log: no id twice, none
 *    missing, ending with the terminal one.
 *
 * FOLLOWER_CHAOS_SEED replays the schedule and the clients' draws (process timing still varies);
 * FOLLOWER_CHAOS_ROUNDS (default 1) and FOLLOWER_CHAOS_CUT_MS (default seeded 2.5–5 s, the cut
 * lasts at least as long as its schedule) make it longer; FOLLOWER_CHAOS_LOG=warn shows A's log.
 */

const SEED = Number(process.env.FOLLOWER_CHAOS_SEED ?? 20261205);
const ROUNDS = Number(process.env.FOLLOWER_CHAOS_ROUNDS ?? 1);
const CUT_MS_OVERRIDE = process.env.FOLLOWER_CHAOS_CUT_MS === undefined ? undefined : Number(process.env.FOLLOWER_CHAOS_CUT_MS);
const LOG_LEVEL = (process.env.FOLLOWER_CHAOS_LOG ?? 'warn') as 'warn' | 'info' | 'debug' | 'silent';
/** A request not answered within this is a hang. */
const REQUEST_TIMEOUT_MS = 8000;
/**
 * How soon after the gate opens A must agree with B: nats.js reconnects every 250 ms, and a read
 * of the stream that waits checks every 2 s whether it missed a message (docs/operations.md,
 * "Reads of the stream survive the node they read from").
 */
const CATCH_UP_BOUND_MS = Number(process.env.FOLLOWER_CHAOS_BOUND_MS ?? 5000);
/** How long after a run's end a poll may still show it in progress (a healthy follower folds within milliseconds). */
const STALE_GRACE_MS = 1000;
/** Clients of A that only poll runs (fast, answered from memory or Postgres), and clients with a mix that includes requests needing NATS (each may wait out a 5 s JetStream timeout during the cut). */
const POLLERS = 3;
const MIXED_CLIENTS = 3;
const BRIEF = 'Find wasted spend in search terms and propose negative keywords';

type Proc = 'A' | 'B';
type Rank = 0 | 1 | 2;
const RANK: Record<string, Rank> = { queued: 0, running: 1, succeeded: 2, failed: 2, canceled: 2 };
const TERMINAL = new Set(['succeeded', 'failed', 'canceled']);

interface Exchange {
  readonly n: number;
  readonly proc: Proc;
  readonly op: string;
  readonly method: string;
  readonly path: string;
  readonly sentAt: number;
  readonly runId?: string;
  readonly brief?: string;
  doneAt?: number;
  status?: number;
  contentType?: string | null;
  retryAfter?: string | null;
  etag?: string | null;
  text?: string;
  body?: any;
  error?: string;
}

interface Transition {
  readonly status: string;
  readonly seq: number;
  readonly at: number;
}

interface SseClient {
  readonly runId: string;
  readonly accountId: string;
  /** [id, event name] of every event received, over all connections, in order. */
  readonly events: { id: number; name: string }[];
  /** ids given by `id:` lines without an event (skipped messages). */
  readonly bareIds: number[];
  readonly connections: { status?: number; startedAt: number; endedAt?: number; lastEventId?: number; error?: string; comments: string[] }[];
  done: Promise<void>;
  finishedBy?: string;
}

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));


describe(`an HTTP process's in-memory run state across a cut of its NATS connection (FOLLOWER_CHAOS_SEED=${SEED})`, function () {
  this.timeout(60_000 + ROUNDS * 40_000);
  let nats: PrivateNats | undefined;
  let gate: NatsGate | undefined;
  let config: Config | undefined;
  let procB: RunningService | undefined;
  let procA: RunningService | undefined;
  const aLog: string[] = [];
  const trackerAbort = new AbortController();
  let tracker: Promise<void> = Promise.resolve();
  const sseAborts: AbortController[] = [];

  before(async function () {
    this.timeout(60_000);
    console.log(`      FOLLOWER_CHAOS_SEED=${SEED} FOLLOWER_CHAOS_ROUNDS=${ROUNDS}`);
    nats = await PrivateNats.start();
    gate = new NatsGate(nats.port);
    await gate.listen();
    config = isolatedConfig('followerchaos', {
      NATS_URL: nats.url,
      ROLES: 'http,projectors,agent-worker,apply-worker',
      AGENT_WORKER_CONCURRENCY: '8',
      AGENT_MAX_RUNS_PER_WORKSPACE: '8',
      SSE_MAX_STREAMS_PER_KEY: '100',
    });
    procB = await startService(config, createLogger('silent'));
    const aConfig: Config = { ...config, natsUrl: gate.url, roles: ['http'] };
    const destination = { write: (line: string) => void aLog.push(line.trimEnd()) };
    procA = await startService(aConfig, createLogger(LOG_LEVEL === 'silent' ? 'silent' : LOG_LEVEL, { proc: 'A' }, destination));
  });

  after(async function () {
    this.timeout(60_000);
    for (const controller of sseAborts) controller.abort();
    trackerAbort.abort();
    gate?.open();
    await Promise.race([tracker, sleep(3000)]);
    await procA?.stop().catch(() => undefined);
    await procB?.stop().catch(() => undefined);
    await gate?.close().catch(() => undefined);
    if (config) await dropIsolated(config).catch(() => undefined);
    await nats?.dispose().catch(() => undefined);
  });

  it('serves no stale run state and decides no stale command after the cut, answers 503 or the truth during it, and resumes SSE streams exactly', async () => {
    const b = procB!;
    const a = procA!;
    const plan = new SeededRandom(SEED);
    const mix = new SeededRandom((SEED ^ 0x5bd1e995) >>> 0);
    const url: Record<Proc, string> = { A: a.http!.url, B: b.http!.url };
    const operator = b.infrastructure;
    const { subjects, store } = operator;
    const db = operator.database.db;
    const base = config!.publicBaseUrl;
    const t0 = performance.now();
    const rel = (t: number | undefined) => (t === undefined ? '-' : `${Math.round(t - t0)} ms`);

    // ---- the truth: every event of the log, as a reader straight on the server sees it ----
    const transitions = new Map<string, Transition[]>();
    const logEvents: { seq: number; subject: string; event: DomainEvent }[] = [];
    let logHead = 0;
    tracker = (async () => {
      for await (const result of store.followChecked(subjects.all, 1, trackerAbort.signal)) {
        if (!result.ok) continue;
        const { seq, subject } = result.stored;
        const event = result.stored.event as DomainEvent;
        logEvents.push({ seq, subject, event });
        logHead = seq;
        const runId = runIdOf(event);
        if (runId === null) continue;
        const status =
          event.type === 'RunQueued' ? 'queued' : event.type === 'RunStarted' ? 'running' : event.type === 'RunSucceeded' ? 'succeeded' : event.type === 'RunFailed' ? 'failed' : event.type === 'RunCanceled' ? 'canceled' : null;
        if (status === null) continue;
        let list = transitions.get(runId);
        if (!list) transitions.set(runId, (list = []));
        list.push({ status, seq, at: performance.now() });
      }
    })().catch(() => undefined);
    const statusAt = (runId: string, t: number): Transition | undefined => {
      let last: Transition | undefined;
      for (const transition of transitions.get(runId) ?? []) if (transition.at <= t) last = transition;
      return last;
    };
    const endOf = (runId: string): Transition | undefined => (transitions.get(runId) ?? []).find((tr) => TERMINAL.has(tr.status));
    const waitFor = async (what: string, condition: () => boolean, timeoutMs = 20_000): Promise<void> => {
      const deadline = performance.now() + timeoutMs;
      while (!condition()) {
        if (performance.now() > deadline) throw new Error(`FOLLOWER_CHAOS_SEED=${SEED}: timed out waiting for ${what}`);
        await sleep(20);
      }
    };

    // ---- A's connection ----
    const statusLog: { at: number; type: string }[] = [];
    void (async () => {
      for await (const status of a.infrastructure.nc.status()) {
        if (['disconnect', 'reconnect', 'staleConnection', 'reconnecting'].includes(status.type)) statusLog.push({ at: performance.now(), type: status.type });
      }
    })().catch(() => undefined);

    // ---- HTTP ----
    const exchanges: Exchange[] = [];
    let n = 0;
    const call = async (proc: Proc, op: string, method: string, path: string, key: string, options: { body?: unknown; headers?: Record<string, string>; runId?: string; brief?: string } = {}): Promise<Exchange> => {
      const record: Exchange = { n: n++, proc, op, method, path, sentAt: performance.now(), runId: options.runId, brief: options.brief };
      exchanges.push(record);
      try {
        const response = await fetch(`${url[proc]}${path}`, {
          method,
          headers: { authorization: `Bearer ${key}`, ...(options.body !== undefined ? { 'content-type': 'application/json' } : {}), ...options.headers },
          body: options.body === undefined ? undefined : JSON.stringify(options.body),
          signal: AbortSignal.timeout(REQUEST_TIMEOUT_MS),
        });
        record.text = await response.text();
        record.doneAt = performance.now();
        record.status = response.status;
        record.contentType = response.headers.get('content-type');
        record.retryAfter = response.headers.get('retry-after');
        record.etag = response.headers.get('etag');
        try {
          record.body = record.text === '' ? undefined : JSON.parse(record.text);
        } catch {
          record.body = undefined;
        }
      } catch (error) {
        record.doneAt = performance.now();
        record.error = error instanceof Error ? `${error.name}: ${error.message}` : String(error);
      }
      return record;
    };
    const show = (e: Exchange) =>
      `#${e.n} ${e.proc} ${e.op} ${e.method} ${e.path} sent ${rel(e.sentAt)} answered ${rel(e.doneAt)} → ${e.error ?? `${e.status} ${e.body?.status ?? ''}${typeof e.body?.type === 'string' ? ` ${e.body.type.replace(/^.*\/problems\//, '')}` : ''}`}`;

    // ---- the tenant ----
    const workspaceId = (await createWorkspace(operator, 'follower chaos')).value.id;
    const issued = await issueKey(operator, workspaceId, 'write', 'chaos writer');
    const key = issued.value.key;
    const newAccount = async (label: string) => (await createAccount(operator, workspaceId, label, 'sandbox')).value.id;
    for (const proc of ['A', 'B'] as const) {
      const deadline = performance.now() + 10_000;
      for (;;) {
        const probe = await call(proc, 'setup', 'GET', '/api/v1/accounts', key);
        if (probe.status === 200) break;
        expect(performance.now(), `the key works on ${proc} (last answer ${probe.status})`).to.be.below(deadline);
        await sleep(50);
      }
    }

    const failures: string[] = [];
    const none = (label: string, list: readonly string[]) => {
      if (list.length > 0) failures.push(`${label} (${list.length}):\n    ${list.slice(0, 15).join('\n    ')}${list.length > 15 ? `\n    … and ${list.length - 15} more` : ''}`);
    };
    const schedule: string[] = [];
    const note = (what: string) => schedule.push(`${rel(performance.now())} ${what}`);
    const cuts: { cutAt: number; openAt?: number; boundAt?: number }[] = [];
    /** Every run of the test: its account and how it came to be. */
    const runs = new Map<string, { account: string; origin: string }>();
    const sseClients: SseClient[] = [];
    const ghostBriefs: Exchange[] = [];

    const queueRun = async (proc: Proc, account: string, origin: string): Promise<string> => {
      const created = await call(proc, 'post_run', 'POST', '/api/v1/runs', key, { body: { brief: BRIEF, project_id: account } });
      if (created.status !== 202) throw new Error(`FOLLOWER_CHAOS_SEED=${SEED}: POST /runs on ${proc} (${origin}) answered ${created.status} ${created.text}`);
      runs.set(created.body.id, { account, origin });
      return created.body.id as string;
    };

    // ---- SSE, as EventSource reads it: reconnect with Last-Event-ID until the terminal event or 204 ----
    const openSse = (runId: string, accountId: string, controller: AbortController): SseClient => {
      const client: SseClient = { runId, accountId, events: [], bareIds: [], connections: [], done: Promise.resolve() };
      sseAborts.push(controller);
      client.done = (async () => {
        let lastId: number | undefined;
        let retryMs = 3000;
        while (!controller.signal.aborted) {
          const connection: SseClient['connections'][number] = { startedAt: performance.now(), lastEventId: lastId, comments: [] };
          client.connections.push(connection);
          let sawTerminal = false;
          try {
            const response = await fetch(`${url.A}/api/v1/runs/${runId}/events`, {
              headers: { authorization: `Bearer ${key}`, ...(lastId !== undefined ? { 'last-event-id': String(lastId) } : {}) },
              signal: controller.signal,
            });
            connection.status = response.status;
            if (response.status === 204) {
              client.finishedBy = '204';
              return;
            }
            if (response.status !== 200) {
              await response.text().catch(() => undefined);
            } else {
              const decoder = new TextDecoder();
              let buffer = '';
              for await (const chunk of response.body as unknown as AsyncIterable<Uint8Array>) {
                buffer += decoder.decode(chunk, { stream: true });
                let cut: number;
                while ((cut = buffer.indexOf('\n\n')) >= 0) {
                  const block = buffer.slice(0, cut);
                  buffer = buffer.slice(cut + 2);
                  let id: number | undefined;
                  let name: string | undefined;
                  for (const line of block.split('\n')) {
                    if (line.startsWith('id: ')) id = Number(line.slice(4));
                    else if (line.startsWith('event: ')) name = line.slice(7);
                    else if (line.startsWith('retry: ')) retryMs = Number(line.slice(7));
                    else if (line.startsWith(':')) connection.comments.push(line);
                  }
                  if (id !== undefined) lastId = id;
                  if (id !== undefined && name !== undefined) {
                    client.events.push({ id, name });
                    if (['succeeded', 'failed', 'canceled'].includes(name)) sawTerminal = true;
                  } else if (id !== undefined) client.bareIds.push(id);
                }
              }
            }
          } catch (error) {
            connection.error = error instanceof Error ? `${error.name}: ${error.message}` : String(error);
            if (controller.signal.aborted) break;
          } finally {
            connection.endedAt = performance.now();
          }
          if (sawTerminal) {
            client.finishedBy = 'terminal event';
            return;
          }
          // EventSource waits `retry` ms; a shorter wait changes nothing but the test's length.
          await sleep(Math.min(retryMs, 500));
        }
        client.finishedBy = 'deadline';
      })();
      return client;
    };

    for (let round = 0; round < ROUNDS; round++) {
      note(`round ${round + 1}`);
      // ---- before the cut: runs that finish and leave actions; queued runs A holds live ----
      const proposalAccounts = [await newAccount(`r${round} proposals 1`), await newAccount(`r${round} proposals 2`)];
      const queuedCount = plan.int(4, 6);
      const queuedAccounts: string[] = [];
      for (let i = 0; i < queuedCount; i++) queuedAccounts.push(await newAccount(`r${round} queued ${i}`));
      const ownAccount = await newAccount(`r${round} clients' own`);
      const proposalRuns = await Promise.all(proposalAccounts.map((account) => queueRun('A', account, 'proposal run, before the cut')));
      // The clients' own account: a run through A that ends, so A remembers the account (StartRun decides on it without a reload).
      const ownRun = await queueRun('A', ownAccount, "clients' own account, before the cut");
      await waitFor('the runs before the cut to end', () => [...proposalRuns, ownRun].every((id) => endOf(id) !== undefined), 20_000);
      // A has answered them, and cached them.
      for (const id of [...proposalRuns, ownRun]) {
        for (let i = 0; i < 50; i++) {
          const poll = await call('A', 'get_run', 'GET', `/api/v1/runs/${id}`, key, { runId: id });
          if (TERMINAL.has(poll.body?.status)) break;
          await sleep(50);
        }
      }
      const preCutActions: { id: string; account: string; version: string; params: any; kind: string }[] = [];
      for (const account of proposalAccounts) {
        const list = await call('A', 'approvals', 'GET', `/api/v1/accounts/${account}/approvals?status=queued`, key);
        for (const action of list.body?.data ?? []) preCutActions.push({ id: action.id, account, version: action.version, params: action.params, kind: action.kind });
      }
      expect(preCutActions.length, `FOLLOWER_CHAOS_SEED=${SEED}: queued actions from the proposal runs`).to.be.at.least(3);

      await pauseRunStarts(operator, workspaceId, 600, 'hold runs queued before the cut');
      note('run starts paused');
      const queuedRuns: string[] = [];
      for (const account of queuedAccounts) queuedRuns.push(await queueRun('A', account, 'queued through A before the cut'));
      // A answers them from memory; these are answers A gave before the cut.
      for (const id of queuedRuns) await call('A', 'get_run', 'GET', `/api/v1/runs/${id}`, key, { runId: id });
      const sseRuns = plan.sample(queuedRuns, plan.int(2, 3));
      const sseControllers = sseRuns.map(() => new AbortController());
      const roundSse = sseRuns.map((id, i) => openSse(id, runs.get(id)!.account, sseControllers[i]!));
      sseClients.push(...roundSse);
      await waitFor('the SSE streams to deliver `queued`', () => roundSse.every((c) => c.events.length > 0), 5000);

      // ---- clients of A: polls throughout, POSTs on their own account ----
      let stopClients = false;
      let briefN = 0;
      const clientLoop = async (pollOnly: boolean) => {
        while (!stopClients) {
          const roll = pollOnly ? mix.float() * 0.62 : mix.float();
          const known = [...runs.keys()];
          if (roll < 0.62) {
            const id = mix.pick(known);
            await call('A', 'get_run', 'GET', `/api/v1/runs/${id}`, key, { runId: id });
          } else if (roll < 0.72) {
            await call('A', 'approvals', 'GET', `/api/v1/accounts/${mix.pick(proposalAccounts)}/approvals`, key);
          } else if (roll < 0.77) {
            await call('A', 'accounts', 'GET', '/api/v1/accounts', key);
          } else if (roll < 0.87) {
            const brief = `${BRIEF} (client ${round}-${briefN++})`;
            const posted = await call('A', 'post_run_own', 'POST', '/api/v1/runs', key, { body: { brief, project_id: ownAccount }, brief });
            if (posted.status === 202) runs.set(posted.body.id, { account: ownAccount, origin: "clients' own account, through A" });
            else if (posted.status !== undefined && posted.status >= 500) ghostBriefs.push(posted);
          } else if (roll < 0.93) {
            const id = mix.pick(known);
            const controller = new AbortController();
            const record: Exchange = { n: n++, proc: 'A', op: 'sse_open', method: 'GET', path: `/api/v1/runs/${id}/events`, sentAt: performance.now(), runId: id };
            exchanges.push(record);
            try {
              const response = await fetch(`${url.A}${record.path}`, { headers: { authorization: `Bearer ${key}` }, signal: AbortSignal.any([controller.signal, AbortSignal.timeout(REQUEST_TIMEOUT_MS)]) });
              record.status = response.status;
              record.contentType = response.headers.get('content-type');
              record.retryAfter = response.headers.get('retry-after');
              if (response.status !== 200) {
                record.text = await response.text();
                try {
                  record.body = JSON.parse(record.text);
                } catch {
                  record.body = undefined;
                }
              }
              record.doneAt = performance.now();
              controller.abort();
            } catch (error) {
              record.doneAt = performance.now();
              if (!controller.signal.aborted) record.error = error instanceof Error ? `${error.name}: ${error.message}` : String(error);
            }
          } else {
            const id = mix.pick(known);
            await call('A', 'get_run_conditional', 'GET', `/api/v1/runs/${id}`, key, { runId: id, headers: { 'if-none-match': '"nothing"' } });
          }
          await sleep(mix.int(0, 15));
        }
      };
      const clients = [...Array.from({ length: POLLERS }, () => clientLoop(true)), ...Array.from({ length: MIXED_CLIENTS }, () => clientLoop(false))];
      await sleep(plan.int(200, 500));

      // ---- the cut ----
      const cutMs = CUT_MS_OVERRIDE ?? plan.int(2500, 5000);
      const cutAt = performance.now();
      gate!.cut();
      const cut: (typeof cuts)[number] = { cutAt };
      cuts.push(cut);
      note(`gate cut: A off NATS for at least ${cutMs} ms (server up)`);
      await sleep(plan.int(100, 500));

      // Through B: cancel some queued runs.
      const toCancel = plan.sample(queuedRuns, Math.max(1, Math.floor(queuedRuns.length / 3)));
      for (const id of toCancel) {
        const canceled = await call('B', 'cancel', 'DELETE', `/api/v1/runs/${id}`, key, { runId: id });
        note(`B canceled ${id}: ${canceled.status} ${canceled.body?.status ?? canceled.text}`);
      }
      // Through B: decide actions with the version A's clients saw.
      const shuffled = plan.shuffle(preCutActions);
      const rejected = shuffled[0]!;
      const approved = shuffled[1]!;
      const edited = shuffled[2]!;
      const untouched = shuffled.slice(3);
      const decisions: { action: (typeof preCutActions)[number]; how: string; answer: Exchange }[] = [];
      decisions.push({ action: rejected, how: 'rejected', answer: await call('B', 'reject', 'POST', `/api/v1/accounts/${rejected.account}/approvals/${rejected.id}/reject`, key, { body: { reason: 'no', expected_version: rejected.version } }) });
      decisions.push({ action: approved, how: 'approved', answer: await call('B', 'approve', 'POST', `/api/v1/accounts/${approved.account}/approvals/${approved.id}/approve`, key, { body: { expected_version: approved.version } }) });
      const keywords = (edited.params?.keywords ?? []) as { text: string; match_type: string }[];
      const edit =
        edited.kind === 'add_negative_keywords' && keywords.length > 1
          ? { keywords: [keywords[0]] }
          : edited.kind === 'add_negative_keywords' && keywords.length === 1
            ? { keywords: [{ text: keywords[0]!.text, match_type: keywords[0]!.match_type === 'exact' ? 'phrase' : 'exact' }] }
            : undefined;
      let editAnswer = await call('B', 'approve_edit', 'POST', `/api/v1/accounts/${edited.account}/approvals/${edited.id}/approve`, key, { body: { expected_version: edited.version, ...(edit ? { edit } : {}) } });
      if (editAnswer.status !== 200) {
        note(`B's edit-and-approve of ${edited.id} answered ${editAnswer.status} ${editAnswer.text}; approving it plainly`);
        editAnswer = await call('B', 'approve', 'POST', `/api/v1/accounts/${edited.account}/approvals/${edited.id}/approve`, key, { body: { expected_version: edited.version } });
      }
      decisions.push({ action: edited, how: edit ? 'edited and approved' : 'approved', answer: editAnswer });
      for (const decision of decisions) {
        note(`B ${decision.how} action ${decision.action.id}: ${decision.answer.status} ${decision.answer.body?.status ?? decision.answer.text}`);
        expect(decision.answer.status, `FOLLOWER_CHAOS_SEED=${SEED}: B's decision ${show(decision.answer)} ${decision.answer.text}`).to.equal(200);
      }

      // Run starts resume: the other queued runs start and finish while A is off.
      await pauseRunStarts(operator, workspaceId, null, 'let them run while A is cut off');
      note('run starts resumed');
      await waitFor('the queued runs to end while A is cut off', () => queuedRuns.every((id) => endOf(id) !== undefined), 20_000);
      note('every run queued before the cut has ended');
      // New runs on freed accounts through B, which finish too.
      const freed = plan.shuffle(queuedAccounts);
      const rerunAccounts = freed.slice(0, plan.int(1, 2));
      const busyAccount = freed[rerunAccounts.length]!;
      const idleAccounts = freed.slice(rerunAccounts.length + 1);
      const reruns: string[] = [];
      for (const account of rerunAccounts) reruns.push(await queueRun('B', account, 'through B during the cut'));
      await waitFor('the runs created during the cut to end', () => reruns.every((id) => endOf(id) !== undefined), 20_000);
      note(`B's runs ${reruns.join(', ')} ended`);
      // Starts paused again; one more run through B stays queued on busyAccount.
      await pauseRunStarts(operator, workspaceId, 600, 'hold the last run queued');
      const busyRun = await queueRun('B', busyAccount, 'through B during the cut, left queued');
      note(`B queued ${busyRun} on ${busyAccount} (run starts paused)`);
      const remaining = cutAt + cutMs - performance.now();
      if (remaining > 0) await sleep(remaining);

      // ---- the gate opens ----
      const openAt = performance.now();
      gate!.open();
      cut.openAt = openAt;
      note(`gate open after ${Math.round(openAt - cutAt)} ms`);
      await sleep(CATCH_UP_BOUND_MS);
      cut.boundAt = performance.now();
      note(`catch-up bound (${CATCH_UP_BOUND_MS} ms) reached`);
      await sleep(500);
      stopClients = true;
      await Promise.all(clients);
      const logHeadAtBound = logHead;

      // ---- invariant 1: A agrees with B and with the read model ----
      const disagreements: string[] = [];
      for (const [id, info] of runs) {
        if (info.account === ownAccount) continue; // the clients' own runs may still be changing (their POSTs)
        const fromA = await call('A', 'final_get', 'GET', `/api/v1/runs/${id}`, key, { runId: id });
        const fromB = await call('B', 'final_get', 'GET', `/api/v1/runs/${id}`, key, { runId: id });
        const row = await findRun(db, workspaceId, id);
        const expected = row ? JSON.parse(JSON.stringify(toRunRepresentation(row, base, (await findRunActions(db, id)).map((x) => toActionRepresentation(x, x.account_id, base))))) : undefined;
        const problems: string[] = [];
        if (fromA.status !== 200) problems.push(`A answered ${fromA.status ?? fromA.error}`);
        if (fromA.text !== fromB.text) problems.push(`A's bytes differ from B's (A ${fromA.body?.status}, B ${fromB.body?.status})`);
        if (fromA.etag !== fromB.etag) problems.push(`ETag A ${fromA.etag} B ${fromB.etag}`);
        try {
          expect(fromA.body).to.deep.equal(expected);
        } catch {
          problems.push(`A's representation differs from the read model's (A ${fromA.body?.status}, read model ${row?.status})`);
        }
        if (problems.length > 0) disagreements.push(`${id} (${info.origin}; log: ${(transitions.get(id) ?? []).map((t) => `${t.status}@${t.seq} ${rel(t.at)}`).join(' → ')}): ${problems.join('; ')}`);
      }
      none(`round ${round + 1}, invariant 1: runs A does not answer as B and the read model do ${CATCH_UP_BOUND_MS} ms after the gate opened (of ${runs.size} runs)`, disagreements);

      // ---- invariant 2: commands on A after the cut answer as B would ----
      const commandMismatches: string[] = [];
      const expectAnswer = (what: string, answer: Exchange, status: number, type?: RegExp, extra?: (body: any) => string | undefined) => {
        const problems: string[] = [];
        if (answer.status !== status) problems.push(`status ${answer.status ?? answer.error} (expected ${status})`);
        if (type && !(typeof answer.body?.type === 'string' && type.test(answer.body.type))) problems.push(`type ${answer.body?.type} (expected ${type})`);
        const more = extra?.(answer.body);
        if (more) problems.push(more);
        if (problems.length > 0) commandMismatches.push(`${what}: ${problems.join('; ')} — ${show(answer)} ${answer.text?.slice(0, 300) ?? ''}`);
      };
      for (const id of [...queuedRuns, ...reruns]) {
        const end = endOf(id)!;
        const onA = await call('A', 'cancel_after', 'DELETE', `/api/v1/runs/${id}`, key, { runId: id });
        const onB = await call('B', 'cancel_after', 'DELETE', `/api/v1/runs/${id}`, key, { runId: id });
        if (end.status === 'canceled') {
          expectAnswer(`DELETE on A of ${id}, canceled through B while A was cut off`, onA, 200, undefined, (body) => (body?.status === 'canceled' ? undefined : `run status ${body?.status}`));
        } else {
          expectAnswer(`DELETE on A of ${id}, ${end.status} while A was cut off`, onA, 409, /run-already-finished$/, (body) => (body?.run_status === end.status ? undefined : `run_status ${body?.run_status}`));
        }
        if (onA.status !== onB.status || onA.body?.type !== onB.body?.type) commandMismatches.push(`DELETE of ${id}: A answered ${onA.status} ${onA.body?.type ?? ''}, B ${onB.status} ${onB.body?.type ?? ''}`);
      }
      for (const decision of decisions) {
        const { action } = decision;
        const path = `/api/v1/accounts/${action.account}/approvals/${action.id}`;
        const [op, body] = decision.how === 'rejected' ? (['approve', { expected_version: action.version }] as const) : (['reject', { reason: 'stale', expected_version: action.version }] as const);
        const onA = await call('A', `${op}_after`, 'POST', `${path}/${op}`, key, { body });
        const onB = await call('B', `${op}_after`, 'POST', `${path}/${op}`, key, { body });
        expectAnswer(`${op} on A of action ${action.id} (${decision.how} through B while A was cut off) with the version seen before`, onA, 409, /\/(action-changed|action-not-in-queue)$/);
        if (onA.status !== onB.status || onA.body?.type !== onB.body?.type) commandMismatches.push(`${op} of ${action.id}: A answered ${onA.status} ${onA.body?.type ?? ''}, B ${onB.status} ${onB.body?.type ?? ''}`);
      }
      for (const action of untouched) {
        const onA = await call('A', 'approve_after', 'POST', `/api/v1/accounts/${action.account}/approvals/${action.id}/approve`, key, { body: { expected_version: action.version } });
        expectAnswer(`approve on A of untouched action ${action.id} with the version seen before`, onA, 200, undefined, (body) => (body?.status === 'approved' || body?.status === 'applying' || body?.status === 'applied' ? undefined : `action status ${body?.status}`));
      }
      for (const account of [...idleAccounts, ...rerunAccounts]) {
        const onA = await call('A', 'post_after', 'POST', '/api/v1/runs', key, { body: { brief: BRIEF, project_id: account } });
        expectAnswer(`POST /runs on A on ${account}, whose runs ended while A was cut off`, onA, 202);
        if (onA.status === 202) runs.set(onA.body.id, { account, origin: 'through A after the cut' });
      }
      {
        const onA = await call('A', 'post_after', 'POST', '/api/v1/runs', key, { body: { brief: BRIEF, project_id: busyAccount } });
        expectAnswer(`POST /runs on A on ${busyAccount}, where B queued ${busyRun} while A was cut off`, onA, 409, /\/run-in-progress$/, (body) => (body?.active_run_id === busyRun ? undefined : `active_run_id ${body?.active_run_id}`));
        if (onA.status === 202) runs.set(onA.body.id, { account: busyAccount, origin: 'through A after the cut (should have been refused)' });
      }
      none(`round ${round + 1}, invariant 2: commands on A after the cut that did not answer what B answers`, commandMismatches);
      note(`round ${round + 1} checked (log head at the bound: ${logHeadAtBound})`);

      // The SSE streams of this round end with their runs (or are given up 15 s after the gate opened).
      const giveUp = setTimeout(() => sseControllers.forEach((controller) => controller.abort()), Math.max(0, openAt + 15_000 - performance.now()));
      await Promise.all(roundSse.map((c) => c.done));
      clearTimeout(giveUp);
      await pauseRunStarts(operator, workspaceId, null, 'round over');
    }

    // ---- the whole log ----
    await waitFor('the tracker to reach the stream head', () => logHead >= 0, 1000);
    const head = await store.lastSequence();
    await waitFor('the tracker to read the whole log', () => logHead >= head, 10_000);

    // ---- invariant 1 (all answers): never back in time; never in progress long after the end outside the cut ----
    const backInTime: string[] = [];
    const staleAfterBound: string[] = [];
    const staleDuringCut: string[] = [];
    const staleInWindow: string[] = [];
    const runPolls = exchanges.filter((e) => e.proc === 'A' && (e.op === 'get_run' || e.op === 'get_run_conditional' || e.op === 'final_get') && e.status === 200 && e.runId !== undefined && RANK[e.body?.status] !== undefined);
    const inCut = (t: number) => cuts.find((c) => t >= c.cutAt && t < (c.openAt ?? Number.POSITIVE_INFINITY));
    const inWindow = (t: number) => cuts.find((c) => c.openAt !== undefined && t >= c.openAt && t < (c.boundAt ?? Number.POSITIVE_INFINITY));
    const byRun = new Map<string, Exchange[]>();
    for (const e of runPolls) {
      let list = byRun.get(e.runId!);
      if (!list) byRun.set(e.runId!, (list = []));
      list.push(e);
    }
    for (const [runId, polls] of byRun) {
      const sorted = [...polls].sort((x, y) => x.sentAt - y.sentAt);
      for (const e of sorted) {
        const earlier = sorted.filter((x) => x.doneAt! < e.sentAt);
        const newest = earlier.reduce<Exchange | undefined>((best, x) => (best === undefined || RANK[x.body.status]! > RANK[best.body.status]! ? x : best), undefined);
        const terminalEarlier = earlier.find((x) => TERMINAL.has(x.body.status));
        if ((newest && RANK[e.body.status]! < RANK[newest.body.status]!) || (terminalEarlier && e.body.status !== terminalEarlier.body.status)) {
          const was = terminalEarlier ?? newest!;
          backInTime.push(`${runId}: ${show(e)} after A had answered ${was.body.status} (#${was.n}, answered ${rel(was.doneAt)})`);
        }
        const end = endOf(runId);
        if (end && !TERMINAL.has(e.body.status) && end.at + STALE_GRACE_MS < e.sentAt) {
          const line = `${runId}: ${show(e)}, ${Math.round(e.sentAt - end.at)} ms after it ended ${end.status} (seq ${end.seq})`;
          if (inCut(e.sentAt)) staleDuringCut.push(line);
          else if (inWindow(e.sentAt)) staleInWindow.push(line);
          else staleAfterBound.push(line);
        }
      }
    }
    none('invariant 1: A answered a run older than it had answered it before (back in time)', backInTime);
    none(`invariant 1: A answered queued/running ${STALE_GRACE_MS} ms after the run ended, with the gate open and past the catch-up bound`, staleAfterBound);

    // ---- invariant 3: during the cut, 503 problem or the truth; never another 5xx, never a hang ----
    const faults = exchanges.filter(
      (e) => e.proc === 'A' && (e.error !== undefined || (e.status! >= 500 && (e.status !== 503 || !/^application\/problem\+json\b/.test(e.contentType ?? '') || !e.retryAfter))),
    );
    none('invariant 3: answers of A that are a 5xx other than 503 problem+json with Retry-After, or no answer', faults.map(show));
    none(`invariant 3: GETs A answered during the cut with a run in progress that had ended more than ${STALE_GRACE_MS} ms before the request`, staleDuringCut);

    // ---- invariant 2 (the log): nothing twice ----
    const perRun = new Map<string, { queued: number; started: number; canceled: number; terminal: number; brief: string }>();
    const perAction = new Map<string, { approved: number; rejected: number; edited: number; returned: number }>();
    for (const { event } of logEvents) {
      const runId = runIdOf(event);
      if (runId !== null && event.type !== 'ToolCalled' && event.type !== 'ActionProposed') {
        let counts = perRun.get(runId);
        if (!counts) perRun.set(runId, (counts = { queued: 0, started: 0, canceled: 0, terminal: 0, brief: '' }));
        if (event.type === 'RunQueued') {
          counts.queued++;
          counts.brief = (event.data as { brief: string }).brief;
        }
        if (event.type === 'RunStarted') counts.started++;
        if (event.type === 'RunCanceled') counts.canceled++;
        if (event.type === 'RunCanceled' || event.type === 'RunSucceeded' || event.type === 'RunFailed') counts.terminal++;
      }
      if (event.aggregate.type === 'action') {
        let counts = perAction.get(event.aggregate.id);
        if (!counts) perAction.set(event.aggregate.id, (counts = { approved: 0, rejected: 0, edited: 0, returned: 0 }));
        if (event.type === 'ActionApproved') counts.approved++;
        if (event.type === 'ActionRejected') counts.rejected++;
        if (event.type === 'ActionEdited') counts.edited++;
        if (event.type === 'ActionReturnedToQueue') counts.returned++;
      }
    }
    const twice: string[] = [];
    for (const [runId, c] of perRun) {
      if (c.queued !== 1 || c.started > 1 || c.canceled > 1 || c.terminal > 1) twice.push(`run ${runId} (${runs.get(runId)?.origin ?? 'unknown to the test'}): RunQueued×${c.queued} RunStarted×${c.started} RunCanceled×${c.canceled} terminal×${c.terminal}`);
    }
    for (const [actionId, c] of perAction) {
      if ((c.approved > 0 && c.rejected > 0) || c.rejected > 1 || c.approved > 1 + c.returned || c.edited > 1 + c.returned) twice.push(`action ${actionId}: ActionApproved×${c.approved} ActionRejected×${c.rejected} ActionEdited×${c.edited} ActionReturnedToQueue×${c.returned}`);
    }
    none('invariant 2: the log holds something twice', twice);
    const unknownRuns = [...perRun.entries()].filter(([runId]) => !runs.has(runId));
    const ghosts = unknownRuns.map(([runId, c]) => {
      const request = ghostBriefs.find((e) => e.brief === c.brief);
      return `${runId} "${c.brief}"${request ? ` from ${show(request)}` : ''}`;
    });

    // ---- invariant 4: SSE streams opened before the cut ----
    const sseProblems: string[] = [];
    for (const client of sseClients) {
      const queuedSeq = (transitions.get(client.runId) ?? []).find((t) => t.status === 'queued')!.seq;
      const filterPrefix = `${subjects.prefix}.v1.${workspaceId}.${client.accountId}.`;
      const expected: { id: number; name: string }[] = [];
      for (const { seq, subject, event } of logEvents) {
        if (seq < queuedSeq || !subject.startsWith(filterPrefix)) continue;
        const message = toRunStreamMessage(event, client.runId, base);
        if (!message) continue;
        expected.push({ id: seq, name: message.name });
        if (message.terminal) break;
      }
      const got = client.events.map((e) => `${e.id}:${e.name}`);
      const want = expected.map((e) => `${e.id}:${e.name}`);
      const duplicates = got.filter((item, i) => got.indexOf(item) !== i);
      const missing = want.filter((item) => !got.includes(item));
      const extra = got.filter((item) => !want.includes(item));
      const connections = client.connections.map((c) => `[${rel(c.startedAt)}–${rel(c.endedAt)} ${c.status ?? c.error}${c.lastEventId !== undefined ? ` after ${c.lastEventId}` : ''}${c.comments.length ? ` ${c.comments.join(' ')}` : ''}]`).join(' ');
      if (duplicates.length > 0 || missing.length > 0 || extra.length > 0 || client.finishedBy === 'deadline' || got.join() !== want.join()) {
        sseProblems.push(`${client.runId}: ${duplicates.length} duplicated (${duplicates.join(', ')}), ${missing.length} missing (${missing.join(', ')}), ${extra.length} not in the log (${extra.join(', ')}); finished by ${client.finishedBy}; connections ${connections}`);
      }
    }
    none('invariant 4: SSE streams opened on A before the cut that did not deliver exactly the run\'s milestones', sseProblems);

    // ---- the report ----
    const count = (list: Exchange[]) => {
      const by = new Map<string, number>();
      for (const e of list) by.set(e.error ? 'error' : String(e.status), (by.get(e.error ? 'error' : String(e.status)) ?? 0) + 1);
      return [...by.entries()].map(([s, c]) => `${s}×${c}`).join(' ') || 'none';
    };
    const ofA = exchanges.filter((e) => e.proc === 'A');
    console.log(`      ${exchanges.length} requests (${ofA.length} to A) over ${rel(performance.now())}`);
    for (const c of cuts) {
      const during = ofA.filter((e) => e.sentAt >= c.cutAt && e.sentAt < (c.openAt ?? Infinity));
      const windowed = ofA.filter((e) => c.openAt !== undefined && e.sentAt >= c.openAt && e.sentAt < (c.boundAt ?? Infinity));
      console.log(`      cut ${rel(c.cutAt)}–${rel(c.openAt)}: A answered ${count(during)}; in the ${CATCH_UP_BOUND_MS} ms after: ${count(windowed)}`);
      for (const op of [...new Set(during.map((e) => e.op))]) console.log(`        during, ${op}: ${count(during.filter((e) => e.op === op))}`);
    }
    for (const client of sseClients) {
      console.log(`      SSE on A for ${client.runId}: ${client.events.length} events (${client.events.map((e) => `${e.id}:${e.name}`).join(' ')}), finished by ${client.finishedBy}, connections ${client.connections.map((c) => `[${rel(c.startedAt)}–${rel(c.endedAt)} ${c.status ?? c.error}${c.lastEventId !== undefined ? ` after ${c.lastEventId}` : ''}]`).join(' ')}`);
    }
    console.log(`      A's connection: ${statusLog.map((s) => `${s.type} ${rel(s.at)}`).join(', ') || 'no status change'}`);
    console.log(`      schedule:\n${schedule.map((s) => `        ${s}`).join('\n')}`);
    const staleness = (list: string[]) => Math.max(0, ...list.map((line) => Number(/, (\d+) ms after it ended/.exec(line)?.[1] ?? 0)));
    if (staleDuringCut.length > 0) {
      const runsStale = new Set(staleDuringCut.map((line) => line.slice(0, line.indexOf(':'))));
      console.log(`      during the cut: ${staleDuringCut.length} answers showed ${runsStale.size} ended run(s) as in progress, up to ${staleness(staleDuringCut)} ms after the end`);
    }
    if (staleInWindow.length > 0) {
      const lastStale = Math.max(...staleInWindow.map((line) => Number(/ sent (\d+) ms/.exec(line)?.[1] ?? 0)));
      const opened = cuts.map((c) => Math.round(c.openAt! - t0)).filter((o) => o <= lastStale).at(-1) ?? 0;
      console.log(`      within the ${CATCH_UP_BOUND_MS} ms catch-up window (allowed): ${staleInWindow.length} stale answers, the last one sent ${lastStale - opened} ms after the gate opened`);
    }
    if (ghosts.length > 0) console.log(`      runs in the log the test was never told of (an append A answered 503 to, stored when A reconnected?): ${ghosts.length}\n        ${ghosts.join('\n        ')}`);
    const warnings = aLog.filter((line) => /"level":"(warn|error)"/.test(line)).map((line) => {
      try {
        const parsed = JSON.parse(line) as Record<string, unknown>;
        return `${parsed.time} ${parsed.level} ${parsed.msg}${parsed.err ? ` (${parsed.err})` : ''}`;
      } catch {
        return line;
      }
    });
    if (warnings.length > 0) console.log(`      A's warnings (${warnings.length}):\n        ${warnings.slice(0, 12).join('\n        ')}`);
    console.log(`      violations: ${failures.length === 0 ? 'none' : failures.length}`);
    if (failures.length > 0) throw new Error(`FOLLOWER_CHAOS_SEED=${SEED}: ${failures.length} check(s) failed:\n- ${failures.join('\n- ')}`);
  });

  /**
   * The smallest schedule that showed invariant 3's defect (found 2026-11-27, fixed since), with
   * no randomness: a run A holds live (queued, run starts paused) is canceled through B while A is
   * cut off; B and the read model said `canceled` at once, A kept answering `queued` from memory
   * for as long as the cut lasted. The follower now lets its runs go when the connection drops.
   */
  it('minimal reproduction: a run A holds live, canceled through B while A is cut off, is not answered as queued by A once the read model says canceled', async () => {
    const b = procB!;
    const a = procA!;
    const operator = b.infrastructure;
    const db = operator.database.db;
    gate!.open();
    const get = async (base: string, path: string, key: string, init: RequestInit = {}) => {
      const response = await fetch(`${base}${path}`, { ...init, headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json' }, signal: AbortSignal.timeout(REQUEST_TIMEOUT_MS) });
      const text = await response.text();
      return { status: response.status, retryAfter: response.headers.get('retry-after'), body: text === '' ? undefined : (JSON.parse(text) as any) };
    };
    const workspaceId = (await createWorkspace(operator, 'follower repro')).value.id;
    const key = (await issueKey(operator, workspaceId, 'write', 'repro')).value.key;
    const account = (await createAccount(operator, workspaceId, 'repro', 'sandbox')).value.id;
    // A is connected (again) and knows the key.
    const ready = performance.now() + 15_000;
    while ((await get(a.http!.url, '/api/v1/accounts', key).catch(() => ({ status: 0 }))).status !== 200 || !(await a.infrastructure.store.lastSequence().then(() => true, () => false))) {
      expect(performance.now(), 'A is connected and knows the key').to.be.below(ready);
      await sleep(100);
    }
    await pauseRunStarts(operator, workspaceId, 600, 'keep the run queued');
    const created = await get(a.http!.url, '/api/v1/runs', key, { method: 'POST', body: JSON.stringify({ brief: BRIEF, project_id: account }) });
    expect(created.status).to.equal(202);
    const runId = created.body.id as string;
    expect((await get(a.http!.url, `/api/v1/runs/${runId}`, key)).body.status, 'A before the cut').to.equal('queued');

    gate!.cut();
    let onA: { status: number; retryAfter: string | null; body: any };
    let canceledAt: number;
    try {
      const canceled = await get(b.http!.url, `/api/v1/runs/${runId}`, key, { method: 'DELETE' });
      expect(canceled.status, 'DELETE through B').to.equal(200);
      // The read model holds the cancel (A's own Postgres reads would show it) ...
      const deadline = performance.now() + 5000;
      while ((await findRun(db, workspaceId, runId))?.status !== 'canceled') {
        expect(performance.now(), 'the read model shows the cancel').to.be.below(deadline);
        await sleep(20);
      }
      canceledAt = performance.now();
      await sleep(1500);
      // ... yet A answers from what it folded before the cut.
      onA = await get(a.http!.url, `/api/v1/runs/${runId}`, key);
    } finally {
      gate!.open();
    }
    const afterOpen = performance.now();
    let caughtUpMs: number | undefined;
    while (performance.now() < afterOpen + CATCH_UP_BOUND_MS + 2000) {
      if ((await get(a.http!.url, `/api/v1/runs/${runId}`, key)).body?.status === 'canceled') {
        caughtUpMs = Math.round(performance.now() - afterOpen);
        break;
      }
      await sleep(50);
    }
    console.log(`      A ${Math.round(performance.now() - canceledAt!)} ms after the read model showed the cancel: ${onA.status} ${onA.body?.status ?? ''}; A showed canceled ${caughtUpMs ?? 'never'} ms after the gate opened`);
    expect(caughtUpMs, `A shows the cancel within ${CATCH_UP_BOUND_MS} ms of the gate opening`).to.be.a('number').and.at.most(CATCH_UP_BOUND_MS);
    expect(
      onA.status === 503 || onA.body?.status === 'canceled',
      `GET /api/v1/runs/${runId} on A, cut off from NATS, 1.5 s after B canceled the run and the read model showed it: ${onA.status} ${onA.body?.status} (expected canceled, or 503 with Retry-After)`,
    ).to.equal(true);
  });

  it('a run event stream opened on A while A is cut off is a 503 problem with Retry-After; one open across the cut delivers what happened during it', async () => {
    const b = procB!;
    const a = procA!;
    const operator = b.infrastructure;
    gate!.open();
    const workspaceId = (await createWorkspace(operator, 'follower sse')).value.id;
    const key = (await issueKey(operator, workspaceId, 'write', 'sse')).value.key;
    const account = (await createAccount(operator, workspaceId, 'sse', 'sandbox')).value.id;
    const call = (base: string, path: string, init: RequestInit = {}) =>
      fetch(`${base}${path}`, { ...init, headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json' }, signal: AbortSignal.timeout(20_000) });
    const ready = performance.now() + 15_000;
    while ((await call(a.http!.url, '/api/v1/accounts').catch(() => ({ status: 0 }))).status !== 200) {
      expect(performance.now(), 'A knows the key').to.be.below(ready);
      await sleep(100);
    }
    await pauseRunStarts(operator, workspaceId, 600, 'keep the run queued');
    const created = await call(b.http!.url, '/api/v1/runs', { method: 'POST', body: JSON.stringify({ brief: BRIEF, project_id: account }) });
    expect(created.status).to.equal(202);
    const runId = ((await created.json()) as { id: string }).id;
    // In the read model, so A finds the run without asking the log.
    const projected = performance.now() + 5000;
    while ((await findRun(operator.database.db, workspaceId, runId))?.status !== 'queued') {
      expect(performance.now(), 'the read model holds the run').to.be.below(projected);
      await sleep(20);
    }

    // Open before the cut: the stream has sent `queued` when the log becomes unreadable.
    const streamAbort = new AbortController();
    const openStream = (lastEventId?: string) =>
      fetch(`${a.http!.url}/api/v1/runs/${runId}/events`, {
        headers: { authorization: `Bearer ${key}`, ...(lastEventId ? { 'last-event-id': lastEventId } : {}) },
        signal: streamAbort.signal,
      });
    /** Reads until `until` matches what was received, the stream ends, or `ms` pass. */
    const readUntil = async (reader: ReadableStreamDefaultReader<Uint8Array>, received: { text: string }, until: RegExp, ms: number): Promise<'matched' | 'ended' | 'waited'> => {
      const deadline = performance.now() + ms;
      while (!until.test(received.text)) {
        const left = deadline - performance.now();
        if (left <= 0) return 'waited';
        const chunk = await Promise.race([reader.read(), sleep(left).then(() => null)]);
        if (chunk === null) return 'waited';
        if (chunk.done) return until.test(received.text) ? 'matched' : 'ended';
        received.text += new TextDecoder().decode(chunk.value);
      }
      return 'matched';
    };
    // A may still be reconnecting after the previous test's cut: a 503 then, as a client retrying after Retry-After sees.
    const readable = performance.now() + 15_000;
    let open = await openStream();
    while (open.status === 503 && performance.now() < readable) {
      await open.body?.cancel();
      await sleep(250);
      open = await openStream();
    }
    expect(open.status).to.equal(200);
    const reader = open.body!.getReader();
    const received = { text: '' };
    expect(await readUntil(reader, received, /event: queued/, 5000), 'the stream sent queued before the cut').to.equal('matched');

    gate!.cut();
    try {
      // Opened during the cut: refused before a 200 is sent, so the client's retry logic sees a 503.
      const opened = performance.now();
      const refused = await call(a.http!.url, `/api/v1/runs/${runId}/events`);
      const problem = (await refused.json()) as { status?: number };
      console.log(`      stream opened on A during the cut answered ${refused.status} after ${Math.round(performance.now() - opened)} ms`);
      expect(refused.status).to.equal(503);
      expect(refused.headers.get('content-type')).to.match(/^application\/problem\+json/);
      expect(Number(refused.headers.get('retry-after'))).to.be.greaterThan(0);
      expect(problem.status).to.equal(503);

      // The run ends meanwhile, through B.
      const canceled = await call(b.http!.url, `/api/v1/runs/${runId}`, { method: 'DELETE' });
      expect(canceled.status, await canceled.clone().text()).to.be.oneOf([200, 202]);
    } finally {
      gate!.open();
    }
    // The stream open across the cut either carries on after it or ended saying why, with retry:;
    // either way the client learns of the cancellation: on it, or on a reconnect after its last id.
    const across = await readUntil(reader, received, /event: canceled/, 20_000);
    let reconnected = '';
    if (across === 'ended') {
      expect(received.text, 'a stream that ended during the cut says why').to.match(/: the event log could not be read[^\n]*\nretry: 3000\n\n$/);
      const lastId = [...received.text.matchAll(/^id: (\d+)$/gm)].at(-1)![1]!;
      const again = await openStream(lastId);
      expect(again.status).to.equal(200);
      const more = { text: '' };
      expect(await readUntil(again.body!.getReader(), more, /event: canceled/, 15_000), 'the reconnect delivers the cancellation').to.equal('matched');
      reconnected = ` (ended during the cut; the reconnect after ${lastId} delivered canceled)`;
    } else {
      expect(across, `the stream delivered the cancellation after the cut; received: ${JSON.stringify(received.text.slice(-200))}`).to.equal('matched');
    }
    console.log(`      stream open on A across the cut: ${across}${reconnected}`);
    streamAbort.abort();
  });
});
