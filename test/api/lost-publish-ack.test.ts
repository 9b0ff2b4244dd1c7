import { expect } from 'chai';
import { streams } from '../../src/event-store/subjects.ts';
import { createLogger } from '../../src/log/logger.ts';
import { createAccount, createWorkspace, issueKey, pauseRunStarts } from '../../src/operator/operator-commands.ts';
import { SeededRandom } from '../support/seeded-random.ts';
import type { LostAckTrigger } from '../support/lost-ack-relay.ts';
import { RelayedServices } from '../support/relayed-services.ts';

/**
 * POST /api/v1/runs when the append of its RunQueued reaches JetStream but the PubAck never
 * reaches the service: the "did my write land?" case of a network fault or a NATS leader
 * failover. A real advertising account must never get two runs (two agents acting on it) for
 * one Idempotency-Key, and a client must never be given a 202 for a run that does not exist.
 *
 * Topology: one private nats-server; process B (http, projectors, agent-worker, apply-worker)
 * reaches it directly; process A (http only, the process under test, the one the client talks
 * to) reaches it through {@link LostAckRelay}, a TCP relay that watches what A sends. Armed, it
 * lets the first client→server chunk holding a RunQueued publish through to nats-server (which
 * stores it) and from then on drops every byte the server sends back on that connection: the
 * PubAck is lost, while A's connection still looks up to nats.js (it pings every 2 minutes).
 * A's publish then times out (NATS_REQUEST_TIMEOUT_MS, 1.5 s for A here) and A answers the POST. "The fault
 * ends" is `heal()`: the swallowing connection is destroyed and A reconnects through the relay
 * (nats.js retries every 250 ms), as after a partition heals or a new stream leader is elected.
 *
 * Scenarios, each on a fresh account (so every RunQueued on its subject is the test's):
 * 1. Idempotency-Key K, ack lost: the answer is recorded (never a 500, never a hang, a problem
 *    body when it is an error). After the fault, once the first request's run has ended (B's
 *    agent worker runs it within milliseconds), the client retries with K and the same body:
 *    it must get a 202 naming the one run of the account, GET must find it, and the log must
 *    hold exactly one RunQueued.
 * 2. The same, but the retry comes at once when the fault ends, from 5 concurrent clients with
 *    the same K, spread over A and B (as a load balancer would): every one of them must end
 *    with a 202 naming the same, single run of the account.
 * 2b. As 2, while the lost request's run is still queued (the workspace's run starts are paused
 *    during the retries, as behind a busy agent pool): again every client must end with a 202 for
 *    that run; then starts resume, the run ends, and a late retry with K must replay it, not
 *    queue a second run.
 * 3. No Idempotency-Key: a lost ack and a retry may make a second run (plain HTTP semantics);
 *    what happens is only recorded. Checked: no 500, no hang, every 202 names a run of the log
 *    and every RunQueued of the log is the lost request's or one a 202 named (nothing else
 *    appears, e.g. a buffered publish replayed after the reconnect), and the account is not
 *    wedged: once its runs have ended, a new POST is accepted and that run ends.
 *
 * LOST_ACK_SEED picks the brief suffixes, which process each concurrent client of scenarios 2
 * and 2b talks to and their start jitter (0–150 ms); it is printed. A's log (level LOST_ACK_LOG,
 * default info) is kept in memory; its lines about a scenario's runs and requests are part of
 * every failure message, as evidence.
 */

const SEED = Number(process.env.LOST_ACK_SEED ?? 20260412);
const LOG_LEVEL = (process.env.LOST_ACK_LOG ?? 'info') as 'info' | 'warn' | 'debug';
/** A POST not answered within this is a hang. */
const HANG_MS = 30_000;
/** How long a retrying client keeps trying for a 202 before it gives up (longer than the 10 s claim lease). */
const RETRY_DEADLINE_MS = 12_000;
const CONCURRENT_CLIENTS = 5;
const TERMINAL = new Set(['succeeded', 'failed', 'canceled']);

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

// ---------------------------------------------------------------------------------------------
// HTTP answers
// ---------------------------------------------------------------------------------------------

type Proc = 'A' | 'B';

interface Answer {
  readonly label: string;
  readonly proc: Proc;
  readonly sentAt: number;
  readonly ms: number;
  /** 0: no answer (a hang past the timeout, or the connection failed). */
  readonly status: number;
  readonly contentType: string | null;
  readonly retryAfter: string | null;
  readonly replayed: string | null;
  readonly requestId: string | null;
  readonly body: any;
  readonly error?: string;
}

const slugOf = (a: Answer): string => (typeof a.body?.type === 'string' ? a.body.type.replace(/^.*\/problems\//, '') : '');
const describeAnswer = (a: Answer): string =>
  `${a.label} → ${a.proc} ${a.error ?? a.status}${a.status === 202 || a.status === 200 ? ` id=${a.body?.id}${a.replayed ? ' replayed' : ''}` : ''}` +
  `${slugOf(a) ? ` ${slugOf(a)}` : ''}${a.body?.active_run_id ? ` active_run_id=${a.body.active_run_id}` : ''}${a.retryAfter ? ` Retry-After=${a.retryAfter}` : ''}` +
  ` (${a.ms} ms, request ${a.requestId ?? '-'})`;

/** An error answer is RFC 9457 problem+json whose `status` is the HTTP status. */
function isProblem(a: Answer): boolean {
  return /^application\/problem\+json\b/.test(a.contentType ?? '') && a.body?.status === a.status && typeof a.body?.type === 'string';
}

describe(`POST /api/v1/runs whose RunQueued is stored but whose PubAck is lost (LOST_ACK_SEED=${SEED})`, function () {
  this.timeout(45_000);
  const random = new SeededRandom(SEED);
  let pair: RelayedServices | undefined;
  let workspaceId = '';
  let writeKey = '';
  let readKey = '';
  let pausedWorkspace = false;
  const aLog: string[] = [];

  before(async function () {
    this.timeout(60_000);
    console.log(`      LOST_ACK_SEED=${SEED}`);
    const destination = { write: (line: string) => void aLog.push(line.trimEnd()) };
    pair = await RelayedServices.start(
      'lostpublishack',
      { ROLES: 'http,projectors,agent-worker,apply-worker', AGENT_WORKER_CONCURRENCY: '8', AGENT_MAX_RUNS_PER_WORKSPACE: '8' },
      createLogger(LOG_LEVEL, { proc: 'A' }, destination),
    );

    const operator = pair.b.infrastructure;
    workspaceId = (await createWorkspace(operator, 'lost publish ack')).value.id;
    writeKey = (await issueKey(operator, workspaceId, 'write', 'lost-ack writer')).value.key;
    readKey = (await issueKey(operator, workspaceId, 'read', 'lost-ack reader')).value.key;
  });

  afterEach(async () => {
    // A failed scenario must not leave the relay armed or a connection swallowing for the next one.
    pair?.relay.disarm();
    pair?.relay.heal();
    if (pausedWorkspace) await pauseRunStarts(pair!.b.infrastructure, workspaceId, null, 'lost-ack test: resume').catch(() => undefined);
    pausedWorkspace = false;
  });

  after(async function () {
    this.timeout(60_000);
    await pair?.stop();
  });

  // ---- helpers ----

  async function send(proc: Proc, label: string, method: string, path: string, key: string, options: { body?: unknown; headers?: Record<string, string>; timeoutMs?: number } = {}): Promise<Answer> {
    const sentAt = performance.now();
    try {
      const response = await fetch(`${pair!.url[proc]}${path}`, {
        method,
        headers: { authorization: `Bearer ${key}`, ...(options.body === undefined ? {} : { 'content-type': 'application/json' }), ...options.headers },
        body: options.body === undefined ? undefined : JSON.stringify(options.body),
        signal: AbortSignal.timeout(options.timeoutMs ?? 10_000),
      });
      const text = await response.text();
      let body: any;
      try {
        body = text === '' ? undefined : JSON.parse(text);
      } catch {
        body = text;
      }
      return {
        label,
        proc,
        sentAt,
        ms: Math.round(performance.now() - sentAt),
        status: response.status,
        contentType: response.headers.get('content-type'),
        retryAfter: response.headers.get('retry-after'),
        replayed: response.headers.get('idempotent-replayed'),
        requestId: response.headers.get('x-request-id'),
        body,
      };
    } catch (error) {
      return {
        label, proc, sentAt, ms: Math.round(performance.now() - sentAt), status: 0, contentType: null, retryAfter: null, replayed: null, requestId: null, body: undefined,
        error: error instanceof Error ? `${error.name}: ${error.message}` : String(error),
      };
    }
  }

  const postRun = (proc: Proc, label: string, body: unknown, idempotencyKey?: string, timeoutMs = HANG_MS): Promise<Answer> =>
    send(proc, label, 'POST', '/api/v1/runs', writeKey, { body, headers: idempotencyKey === undefined ? {} : { 'idempotency-key': idempotencyKey }, timeoutMs });

  /**
   * A client that wants its run: POSTs until it gets a 202/200, retrying (after Retry-After, at
   * most 1 s, as docs/api.md allows for in-progress) only what the API says to retry: 409
   * idempotent-request-in-progress and 503. Anything else ends it, 409 run-in-progress
   * included (docs/api.md: another run is active on the account; a client takes that as final).
   * The deadline covers the longest documented wait (the 10 s claim lease of a first attempt),
   * so an implementation that makes a retry wait for the lost request's claim still passes.
   */
  async function postUntilAccepted(proc: Proc, label: string, body: unknown, idempotencyKey: string, deadlineMs = RETRY_DEADLINE_MS): Promise<Answer[]> {
    const answers: Answer[] = [];
    const deadline = performance.now() + deadlineMs;
    for (let attempt = 1; ; attempt++) {
      const answer = await postRun(proc, `${label}#${attempt}`, body, idempotencyKey);
      answers.push(answer);
      if (answer.status === 202 || answer.status === 200) return answers;
      const retryable = answer.status === 503 || (answer.status === 409 && slugOf(answer) === 'idempotent-request-in-progress');
      if (!retryable || performance.now() > deadline) return answers;
      await sleep(Math.min(1000, Math.max(200, Number(answer.retryAfter ?? 1) * 1000)));
    }
  }

  /** The account's events as stored (the event log itself, read by B, which the fault never touched). */
  async function accountLog(accountId: string): Promise<{ seq: number; type: string; runId: string | null }[]> {
    const { store, subjects } = pair!.b.infrastructure;
    const subject = subjects.forAggregate(streams.account(workspaceId, accountId));
    const events: { seq: number; type: string; runId: string | null }[] = [];
    for await (const { seq, event } of store.readFiltered(subject, 1)) {
      const runId = (event.data as { run_id?: unknown } | null)?.run_id;
      events.push({ seq, type: event.type, runId: typeof runId === 'string' ? runId : null });
    }
    return events;
  }

  const runQueuedIds = async (accountId: string): Promise<string[]> =>
    (await accountLog(accountId)).filter((e) => e.type === 'RunQueued').map((e) => e.runId!);

  /** Run ids of the RunQueued events GET /api/v1/accounts/{id}/history shows (what a user auditing the account sees), every page. */
  async function historyRunQueued(accountId: string): Promise<string[]> {
    const ids: string[] = [];
    let cursor: number | null = null;
    for (let page = 0; page < 20; page++) {
      const answer = await send('B', 'history', 'GET', `/api/v1/accounts/${accountId}/history?limit=500${cursor === null ? '' : `&cursor=${cursor}`}`, readKey);
      expect(answer.status, `history of ${accountId}: ${describeAnswer(answer)}`).to.equal(200);
      for (const entry of answer.body.data as { type: string; data?: { run_id?: string } }[]) if (entry.type === 'RunQueued') ids.push(String(entry.data?.run_id));
      const next = answer.body.next_cursor as number | null;
      if (next === null || next === cursor) break;
      cursor = next;
    }
    return ids;
  }

  /** Waits until every run queued on the account has a terminal event in the log; cancels (through B) one still queued after `cancelAfterMs`. */
  async function waitAccountIdle(accountId: string, timeoutMs = 15_000, cancelAfterMs = 8_000): Promise<Record<string, string>> {
    const started = performance.now();
    for (;;) {
      const log = await accountLog(accountId);
      const status: Record<string, string> = {};
      for (const e of log) {
        if (!e.runId) continue;
        if (e.type === 'RunQueued') status[e.runId] = 'queued';
        else if (e.type === 'RunStarted') status[e.runId] = 'running';
        else if (e.type === 'RunSucceeded') status[e.runId] = 'succeeded';
        else if (e.type === 'RunFailed') status[e.runId] = 'failed';
        else if (e.type === 'RunCanceled') status[e.runId] = 'canceled';
      }
      if (Object.values(status).every((s) => TERMINAL.has(s))) return status;
      const elapsed = performance.now() - started;
      if (elapsed > timeoutMs) throw new Error(`account ${accountId} still has runs in progress: ${JSON.stringify(status)}`);
      if (elapsed > cancelAfterMs) {
        for (const [runId, s] of Object.entries(status)) if (s === 'queued') await send('B', 'cancel', 'DELETE', `/api/v1/runs/${runId}`, writeKey);
      }
      await sleep(50);
    }
  }

  /** Resolves once A's NATS connection has reconnected after `since`. */
  async function reconnectedAfter(since: number, timeoutMs = 5000): Promise<number> {
    const deadline = performance.now() + timeoutMs;
    for (;;) {
      const reconnect = pair!.statusesOfA.find((s) => s.type === 'reconnect' && s.at > since);
      if (reconnect) return reconnect.at;
      if (performance.now() > deadline) throw new Error(`A did not reconnect within ${timeoutMs} ms of the fault's end; statuses: ${JSON.stringify(pair!.statusesOfA.filter((s) => s.at > since))}`);
      await sleep(10);
    }
  }

  /**
   * POSTs with the acknowledgement of its append lost, and finds the run it queued all the same:
   * exactly one RunQueued on the (fresh) account, whatever the answer was.
   */
  async function loseAckOf(label: string, account: string, body: unknown, idempotencyKey?: string) {
    const lost = await postWithLostAck(label, body, idempotencyKey);
    const stored = await runQueuedIds(account);
    expect(stored, `RunQueued after the lost ack (${describeAnswer(lost.answer)})`).to.have.length(1);
    return { ...lost, lostRunId: stored[0]! };
  }

  /**
   * Sends the POST whose ack is lost: arms the relay, POSTs to A, and checks that the fault
   * really happened (the RunQueued publish went through the relay and then the server's
   * replies were dropped). Returns the answer and when the loss began.
   */
  async function postWithLostAck(label: string, body: unknown, idempotencyKey?: string): Promise<{ answer: Answer; trigger: LostAckTrigger; swallowed: number }> {
    const triggersBefore = pair!.relay.triggers;
    const triggered = pair!.relay.arm(['RunQueued']);
    const answer = await postRun('A', label, body, idempotencyKey);
    const trigger = await Promise.race([triggered, sleep(100).then(() => undefined)]);
    pair!.relay.disarm();
    // If this fails, the relay never saw the RunQueued publish: the scenario did not happen (e.g. A
    // refused the POST before appending), and nothing below would mean anything.
    expect(trigger, `the RunQueued publish of ${describeAnswer(answer)} did not go through the relay`).to.not.equal(undefined);
    expect(pair!.relay.triggers).to.equal(triggersBefore + 1);
    return { answer, trigger: trigger!, swallowed: pair!.relay.swallowedBytes() };
  }

  /** The lines of A's log about the given ids (runs, requests), for evidence. */
  const aLogAbout = (ids: readonly (string | null | undefined)[]): string[] => {
    const wanted = ids.filter((id): id is string => typeof id === 'string' && id !== '');
    return aLog.filter((line) => wanted.some((id) => line.includes(id)) && !/"msg":"request completed"|access/.test(line)).slice(-20);
  };

  /**
   * The lost-ack answer: answered within HANG_MS (else `status` is 0, and this fails), never a
   * 5xx other than 503, and an error is problem+json. (A 202 would be fine too if it names the
   * stored run: that is checked by the callers' exact counts.)
   */
  function expectSaneFaultAnswer(answer: Answer, evidence: string): void {
    expect(answer.status, `no answer within ${HANG_MS} ms (a hang): ${evidence}`).to.not.equal(0);
    expect(answer.status, `a 500 for a lost ack: ${evidence}`).to.not.equal(500);
    expect([202, 503], `the lost-ack POST answered neither 202 nor 503: ${evidence}`).to.include(answer.status);
    if (answer.status !== 202) expect(isProblem(answer), `not a problem+json: ${evidence}`).to.equal(true);
  }

  /** Every run id a 202 named exists: GET on A and on B answers 200 with that id and the account. */
  async function expectRunsExist(ids: readonly string[], accountId: string, evidence: string): Promise<void> {
    for (const id of new Set(ids)) {
      for (const proc of ['A', 'B'] as const) {
        const got = await send(proc, `GET ${id}`, 'GET', `/api/v1/runs/${id}`, readKey);
        expect(got.status, `GET /api/v1/runs/${id} on ${proc} after a 202 named it: ${describeAnswer(got)}\n${evidence}`).to.equal(200);
        expect(got.body.id).to.equal(id);
        expect(got.body.project_id).to.equal(accountId);
      }
    }
  }

  const newAccount = async (name: string): Promise<string> => (await createAccount(pair!.b.infrastructure, workspaceId, name, 'sandbox')).value.id;

  // ---- scenarios ----

  it('1. a retry with the same Idempotency-Key after the fault, once the first run ended, gets a 202 for the one run the account has', async () => {
    const account = await newAccount('lost ack 1');
    const idem = `lost-ack-${SEED}-${process.pid}-s1`;
    const body = { brief: `Find wasted spend in search terms (lost ack 1, ${random.int(0, 1e6)})`, project_id: account };

    const { answer: first, trigger, swallowed, lostRunId } = await loseAckOf('first (ack lost)', account, body, idem);
    // The write landed although A never heard so: exactly one RunQueued, the lost request's.

    const healedAt = performance.now();
    expect(pair!.relay.heal(), 'one connection was swallowing').to.equal(1);
    await reconnectedAfter(healedAt);
    // Deterministic ordering: the retry comes after the lost request's run has ended (B's agent
    // worker ran it meanwhile), as a client retrying a few seconds later finds it.
    const runStatus = await waitAccountIdle(account);

    const retries = await postUntilAccepted('A', 'retry same key', body, idem);
    const last = retries.at(-1)!;
    const accepted = retries.filter((a) => a.status === 202 || a.status === 200);
    const queued = await runQueuedIds(account);
    const history = await historyRunQueued(account);
    const evidence = [
      `LOST_ACK_SEED=${SEED}; key ${idem}; account ${account}`,
      `lost-ack POST: ${describeAnswer(first)}; body ${JSON.stringify(first.body)}`,
      `relay: RunQueued publish forwarded ${Math.round(trigger.at - first.sentAt)} ms after the POST was sent, ${swallowed} server bytes swallowed`,
      `the lost request's run ${lostRunId} ended ${runStatus[lostRunId]} before the retry`,
      ...retries.map((a) => `retry: ${describeAnswer(a)}`),
      `RunQueued in the log: ${JSON.stringify(queued)}; in GET history: ${JSON.stringify(history)}`,
      `A's log about these:`,
      ...aLogAbout([lostRunId, first.requestId, ...retries.map((a) => a.requestId), ...queued]),
    ].join('\n        ');
    console.log(`        ${evidence.split('\n').slice(0, 6 + retries.length).join('\n')}`);

    expectSaneFaultAnswer(first, evidence);
    // Fails if the retry never got a 202/200 within RETRY_DEADLINE_MS (e.g. 409 run-in-progress for
    // the client's own run, or a 503 that never ends).
    expect(accepted.length, `the retry with the same key got no 202:\n        ${evidence}`).to.equal(1);
    expect(last.status).to.be.oneOf([200, 202]);
    // Fails if the 202 names a run that was never queued or cannot be read (a 202 for a run that does not exist).
    await expectRunsExist([last.body.id], account, evidence);
    // The heart of it. Fails if the retry queued a second run (two agents on the account for one
    // key: [lost run, new run]), or named another run than the one the log holds.
    expect(queued, `RunQueued on the account for one Idempotency-Key:\n        ${evidence}`).to.deep.equal([last.body.id]);
    expect(last.body.id, `the 202 must name the run the lost request queued:\n        ${evidence}`).to.equal(lostRunId);
    // The user-visible log agrees with the stream.
    expect(history, `GET history RunQueued:\n        ${evidence}`).to.deep.equal(queued);
  });

  /**
   * Ends the fault, then retries from {@link CONCURRENT_CLIENTS} clients at once (the first on A,
   * the others on A or B by the seed, each 0–150 ms after the heal), each until it is accepted.
   */
  async function healThenRetryConcurrently(body: Record<string, unknown>, idem: string) {
    const healedAt = performance.now();
    expect(pair!.relay.heal(), 'one connection was swallowing').to.equal(1);
    const plan = Array.from({ length: CONCURRENT_CLIENTS }, (_, i) => ({ client: i + 1, proc: (i === 0 ? 'A' : random.pick(['A', 'B'])) as Proc, delayMs: random.int(0, 150) }));
    const clients = await Promise.all(
      plan.map(async ({ client, proc, delayMs }) => {
        await sleep(delayMs);
        return postUntilAccepted(proc, `client ${client}`, body, idem);
      }),
    );
    return { healedAt, clients };
  }

  it(`2. ${CONCURRENT_CLIENTS} concurrent retries with the same Idempotency-Key right as the fault ends all get a 202 for the one run the account has`, async () => {
    const account = await newAccount('lost ack 2');
    const idem = `lost-ack-${SEED}-${process.pid}-s2`;
    const body = { brief: `Audit keyword match types (lost ack 2, ${random.int(0, 1e6)})`, project_id: account };

    const { answer: first, trigger, swallowed, lostRunId } = await loseAckOf('first (ack lost)', account, body, idem);

    // The fault ends and the clients retry at once (within 150 ms), without waiting for anything.
    const { healedAt, clients } = await healThenRetryConcurrently(body, idem);
    const reconnectAt = await reconnectedAfter(healedAt).catch(() => NaN);
    const firstRetrySentAfterHeal = Math.round(Math.min(...clients.map((c) => c[0]!.sentAt)) - healedAt);
    const runStatus = await waitAccountIdle(account);
    const queued = await runQueuedIds(account);
    const history = await historyRunQueued(account);
    const finals = clients.map((answers) => answers.at(-1)!);
    const acceptedIds = finals.filter((a) => a.status === 202 || a.status === 200).map((a) => a.body.id as string);
    const evidence = [
      `LOST_ACK_SEED=${SEED}; key ${idem}; account ${account}`,
      `lost-ack POST: ${describeAnswer(first)}; body ${JSON.stringify(first.body)}`,
      `relay: RunQueued publish forwarded ${Math.round(trigger.at - first.sentAt)} ms after the POST was sent, ${swallowed} server bytes swallowed`,
      `the lost request's run: ${lostRunId}; A reconnected ${Math.round(reconnectAt - healedAt)} ms after the fault ended; first retry sent ${firstRetrySentAfterHeal} ms after it`,
      ...clients.flatMap((answers) => answers.map((a) => `${describeAnswer(a)}`)),
      `runs at the end: ${JSON.stringify(runStatus)}`,
      `RunQueued in the log: ${JSON.stringify(queued)}; in GET history: ${JSON.stringify(history)}`,
      `A's log about these:`,
      ...aLogAbout([lostRunId, first.requestId, ...clients.flat().map((a) => a.requestId), ...queued]),
    ].join('\n        ');
    console.log(`        ${evidence.split('\n').slice(0, 6 + clients.flat().length).join('\n')}`);

    expectSaneFaultAnswer(first, evidence);
    for (const answer of clients.flat()) {
      // Fails on a 500 or a hang of any retry, or an error that is not problem+json.
      expect(answer.status, `a retry hung or failed to connect, or answered 5xx other than 503:\n        ${evidence}`).to.be.oneOf([200, 202, 409, 503]);
      if (answer.status >= 400) expect(isProblem(answer), `not a problem+json:\n        ${evidence}`).to.equal(true);
    }
    // Fails if any client gave up without a 202 (e.g. 409 run-in-progress naming its own run).
    expect(acceptedIds, `clients that ended with a 202:\n        ${evidence}`).to.have.length(CONCURRENT_CLIENTS);
    // Fails if two clients were told different runs (the claim let two requests through).
    expect(new Set(acceptedIds).size, `distinct run ids the clients were given:\n        ${evidence}`).to.equal(1);
    await expectRunsExist(acceptedIds, account, evidence);
    // Fails if the retries queued another run beside the lost request's one.
    expect(queued, `RunQueued on the account for one Idempotency-Key:\n        ${evidence}`).to.deep.equal([lostRunId]);
    expect(acceptedIds[0], `the 202s must name the run the lost request queued:\n        ${evidence}`).to.equal(lostRunId);
    expect(history, `GET history RunQueued:\n        ${evidence}`).to.deep.equal(queued);
  });

  it(`2b. ${CONCURRENT_CLIENTS} concurrent retries with the same Idempotency-Key while the lost request's run is still queued get a 202 for it, and a late retry after it ended queues nothing`, async () => {
    const account = await newAccount('lost ack 2b');
    const idem = `lost-ack-${SEED}-${process.pid}-s2b`;
    const body = { brief: `Check search-term waste (lost ack 2b, ${random.int(0, 1e6)})`, project_id: account };
    // The workspace's run starts are paused, so the lost request's run stays queued while the
    // clients retry (as it would behind a busy agent pool, or with every worker cut off too).
    await pauseRunStarts(pair!.b.infrastructure, workspaceId, 120, 'lost-ack test: keep the lost run queued');
    pausedWorkspace = true;

    const { answer: first, trigger, swallowed, lostRunId } = await loseAckOf('first (ack lost)', account, body, idem);

    const { healedAt, clients } = await healThenRetryConcurrently(body, idem);
    // Precondition of this scenario: the lost run was still queued while the clients were answered.
    const statusDuringRetries = (await accountLog(account)).filter((e) => e.runId === lostRunId).map((e) => e.type);

    await pauseRunStarts(pair!.b.infrastructure, workspaceId, null, 'lost-ack test: resume');
    pausedWorkspace = false;
    const runStatus = await waitAccountIdle(account);
    // A client that gave up on the quick retries comes back later with the same key and body.
    const late = await postUntilAccepted('A', 'late retry', body, idem);
    const runStatusAfter = await waitAccountIdle(account);
    const queued = await runQueuedIds(account);
    const history = await historyRunQueued(account);
    const finals = [...clients.map((answers) => answers.at(-1)!), late.at(-1)!];
    const acceptedIds = finals.filter((a) => a.status === 202 || a.status === 200).map((a) => a.body.id as string);
    const evidence = [
      `LOST_ACK_SEED=${SEED}; key ${idem}; account ${account}`,
      `lost-ack POST: ${describeAnswer(first)}`,
      `relay: RunQueued publish forwarded ${Math.round(trigger.at - first.sentAt)} ms after the POST was sent, ${swallowed} server bytes swallowed`,
      `the lost request's run: ${lostRunId}; its events while the clients retried: ${JSON.stringify(statusDuringRetries)}`,
      ...clients.flatMap((answers) => answers.map((a) => `${describeAnswer(a)}`)),
      `runs once resumed and idle: ${JSON.stringify(runStatus)}`,
      ...late.map((a) => `${describeAnswer(a)}`),
      `runs at the end: ${JSON.stringify(runStatusAfter)}`,
      `RunQueued in the log: ${JSON.stringify(queued)}; in GET history: ${JSON.stringify(history)}`,
      `A's log about these:`,
      ...aLogAbout([lostRunId, first.requestId, ...clients.flat().map((a) => a.requestId), ...late.map((a) => a.requestId), ...queued]),
    ].join('\n        ');
    console.log(`        ${evidence.split('\n').slice(0, 8 + clients.flat().length + late.length).join('\n')}`);

    expectSaneFaultAnswer(first, evidence);
    // If this fails the run was not held queued and the scenario did not happen (not a finding).
    expect(statusDuringRetries, `the lost run was still queued during the retries:\n        ${evidence}`).to.deep.equal(['RunQueued']);
    for (const answer of [...clients.flat(), ...late]) {
      expect(answer.status, `a retry hung or failed to connect, or answered 5xx other than 503:\n        ${evidence}`).to.be.oneOf([200, 202, 409, 503]);
      if (answer.status >= 400) expect(isProblem(answer), `not a problem+json:\n        ${evidence}`).to.equal(true);
    }
    // Fails if a client retrying its own request is refused, e.g. 409 run-in-progress whose
    // active_run_id is the very run its first attempt queued.
    expect(acceptedIds, `clients (and the late retry) that ended with a 202:\n        ${evidence}`).to.have.length(CONCURRENT_CLIENTS + 1);
    expect(new Set(acceptedIds).size, `distinct run ids the clients were given:\n        ${evidence}`).to.equal(1);
    await expectRunsExist(acceptedIds, account, evidence);
    // Fails if the late retry (or any) queued a second run once the first had ended.
    expect(queued, `RunQueued on the account for one Idempotency-Key:\n        ${evidence}`).to.deep.equal([lostRunId]);
    expect(acceptedIds[0], `the 202s must name the run the lost request queued:\n        ${evidence}`).to.equal(lostRunId);
    expect(history, `GET history RunQueued:\n        ${evidence}`).to.deep.equal(queued);
  });

  it('3. without an Idempotency-Key a retry may make a second run (recorded only), but every 202 names a real run, nothing else is queued, and the account is not wedged', async () => {
    const account = await newAccount('lost ack 3');
    const body = { brief: `Review budgets (lost ack 3, ${random.int(0, 1e6)})`, project_id: account };

    const { answer: first, trigger, swallowed, lostRunId } = await loseAckOf('first (ack lost, no key)', account, body);

    const healedAt = performance.now();
    expect(pair!.relay.heal(), 'one connection was swallowing').to.equal(1);
    await reconnectedAfter(healedAt);
    // A client retrying at once, without a key: a second run is plain HTTP semantics (recorded).
    const retry = await postRun('A', 'retry, no key', body);
    const idleStatus = await waitAccountIdle(account);
    const later = await postRun('A', 'later POST on the idle account', body);
    const laterRun = later.status === 202 ? await waitAccountIdle(account) : {};
    const queued = await runQueuedIds(account);
    const history = await historyRunQueued(account);
    const answers = [first, retry, later];
    const accepted = answers.filter((a) => a.status === 202).map((a) => a.body.id as string);
    const evidence = [
      `LOST_ACK_SEED=${SEED}; account ${account}`,
      `lost-ack POST: ${describeAnswer(first)}; body ${JSON.stringify(first.body)}`,
      `relay: RunQueued publish forwarded ${Math.round(trigger.at - first.sentAt)} ms after the POST was sent, ${swallowed} server bytes swallowed`,
      `the lost request's run: ${lostRunId}`,
      `retry without a key: ${describeAnswer(retry)}`,
      `runs once idle: ${JSON.stringify(idleStatus)}`,
      `later POST: ${describeAnswer(later)}; runs then: ${JSON.stringify(laterRun)}`,
      `RunQueued in the log: ${JSON.stringify(queued)}; in GET history: ${JSON.stringify(history)}`,
      `A's log about these:`,
      ...aLogAbout([lostRunId, ...answers.map((a) => a.requestId), ...queued]),
    ].join('\n        ');
    console.log(`        ${evidence.split('\n').slice(0, 8).join('\n')}`);

    expectSaneFaultAnswer(first, evidence);
    // The retry: whatever it is (a second run is allowed), never a 500, a hang or a non-problem error.
    expect(retry.status, `retry without a key:\n        ${evidence}`).to.be.oneOf([202, 409, 503]);
    if (retry.status !== 202) expect(isProblem(retry), `not a problem+json:\n        ${evidence}`).to.equal(true);
    // Not wedged: once the runs ended, a new POST is accepted and its run ends. Fails if the lost
    // append left the account looking busy (409 run-in-progress) or A unable to append (503).
    expect(later.status, `a POST on the idle account after the fault:\n        ${evidence}`).to.equal(202);
    expect(TERMINAL.has(laterRun[later.body.id] ?? ''), `the later run ended:\n        ${evidence}`).to.equal(true);
    await expectRunsExist(accepted, account, evidence);
    // Exact accounting: the log holds the lost request's run and exactly the runs 202s named, each
    // once. Fails if a 202 named a run that was never queued, if a run was queued twice, or if a
    // RunQueued appeared that no answer accounts for (e.g. a publish buffered during the fault and
    // sent again after the reconnect).
    const expected = first.status === 202 ? accepted : [lostRunId, ...accepted];
    expect([...queued].sort(), `RunQueued vs the lost run and the 202s:\n        ${evidence}`).to.deep.equal([...expected].sort());
    expect(new Set(queued).size).to.equal(queued.length);
    expect(history, `GET history RunQueued:\n        ${evidence}`).to.deep.equal(queued);
    // GET of the lost run works too (the client never heard of it, but an auditor will).
    await expectRunsExist([lostRunId], account, evidence);
  });
});
