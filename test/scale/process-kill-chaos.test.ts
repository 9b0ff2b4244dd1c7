import { expect } from 'chai';
import { spawn, type ChildProcess } from 'node:child_process';
import { appendFileSync, mkdtempSync } from 'node:fs';
import type { IncomingMessage, ServerResponse } from 'node:http';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import pg from 'pg';
import { identityProjection } from '../../projections/identity/identity-projection.ts';
import { waitForProjection } from '../../projections/runtime/projector.ts';
import { createAccount } from '../../src/operator/operator-commands.ts';
import { runCli, serviceEnv } from '../support/cli.ts';
import { listenOnLoopback, readBody, sendJson, type LoopbackServer } from '../support/loopback-server.ts';
import { seededRandom } from '../support/seeded-random.ts';
import { startTestService, type TestService, type TestTenant } from '../support/test-service.ts';

/**
 * Crash chaos across OS processes (docs/operations.md, "Workers and crashes"; docs/policy.md,
 * "Claims, leases and heartbeats"): an HTTP process, a projectors process, two agent-worker and
 * two apply-worker processes (`node src/main.ts` each) under a steady load of run creations
 * (Idempotency-Key, some duplicate retries) and approvals. At seeded-random moments a worker
 * process (and now and then the projectors process) is SIGKILLed and a replacement started.
 * Then, with exact counts from the event log: every 202 run ends once, nobody ran a run's agent
 * twice, every approved action reaches the platform at most once and ends applied or returned,
 * the read models equal a fresh fold (`adsagent audit verify`), and no event is stored twice.
 *
 * The model is a local fake Gemini, answering from the brief alone (so any worker can serve any
 * turn): two proposals of a unique negative keyword each, then a text, each turn after a delay,
 * so kills land mid-run. The sandbox platform's writes of those keywords are logged (and slowed)
 * by a Postgres trigger, so a second write of one keyword is seen even though it is idempotent.
 *
 * CHAOS_SEED replays a schedule (the timing of processes still varies); CHAOS_LOG_DIR keeps
 * every process's log.
 */

const SEED = Number(process.env.CHAOS_SEED ?? 6);
const ACCOUNTS = 14;
const LOAD_MS = Number(process.env.CHAOS_LOAD_MS ?? 10_000);
/** Apply workers are killed only this early: their messages come back after the consumer's ack wait. */
const APPLY_KILL_WINDOW_MS = 5_000;
/** APPLY_ACK_WAIT_MS of the apply workers (60 s by default): a dead worker's action is taken over after it. */
const APPLY_ACK_WAIT_MS = 8_000;
const TERMINAL_TYPES = new Set(['RunSucceeded', 'RunFailed', 'RunCanceled']);
const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

interface ServiceProcess {
  readonly name: string;
  readonly roles: string;
  readonly child: ChildProcess;
  url: string;
  started: Promise<void>;
  exited: Promise<void>;
}

interface Kill {
  readonly at: number;
  readonly name: string;
  readonly pid: number;
  readonly roles: string;
  readonly mode: string;
}

// ---- a fake Gemini that answers from the brief: "chaos <tag> <campaignId>" ----

interface ModelCall {
  readonly tag: string;
  readonly turn: number;
}

class BriefModel {
  readonly calls: ModelCall[] = [];
  /** Told right after an answer went out (the run's worker now holds it). */
  onAnswered: (tag: string, turn: number) => void = () => undefined;
  private server: LoopbackServer | undefined;
  private readonly random: () => number;

  constructor(seed: number) {
    this.random = seededRandom(seed ^ 0x5eed);
  }

  async start(): Promise<string> {
    this.server = await listenOnLoopback((req, res) => void this.handle(req, res));
    return this.server.baseUrl;
  }

  async close(): Promise<void> {
    await this.server?.close();
  }

  private async handle(req: IncomingMessage, res: ServerResponse): Promise<void> {
    const body = JSON.parse(await readBody(req)) as { contents: { role: string; parts: { text?: string }[] }[] };
    const brief = body.contents[0]?.parts?.[0]?.text ?? '';
    const match = /^chaos (\S+) (\S+)$/.exec(brief.trim());
    if (!match) {
      sendJson(res, 400, { error: { code: 400, message: `fake model: unexpected brief ${brief}`, status: 'INVALID_ARGUMENT' } });
      return;
    }
    const [, tag, campaignId] = match;
    const turn = body.contents.filter((c) => c.role === 'function').length;
    this.calls.push({ tag: tag!, turn });
    const delayMs = 100 + Math.floor(this.random() * 500);
    const parts =
      turn < 2
        ? [{ functionCall: { name: 'add_negative_keywords', args: { campaign_id: campaignId, keywords: [{ text: keywordOf(tag!, turn), match_type: 'exact' }], reason: 'chaos' } } }]
        : [{ text: `done ${tag}` }];
    const timer = setTimeout(() => {
      sendJson(res, 200, {
        candidates: [{ content: { role: 'model', parts }, finishReason: 'STOP', index: 0 }],
        usageMetadata: { promptTokenCount: 10, candidatesTokenCount: 5, totalTokenCount: 15 },
        modelVersion: 'fake',
      });
      this.onAnswered(tag!, turn);
    }, delayMs);
    res.once('close', () => clearTimeout(timer));
  }
}

function keywordOf(tag: string, turn: number): string {
  return `chaos ${tag.replace(/[^a-z0-9]/gi, ' ')} k${turn}`.toLowerCase();
}

// ---- the test ----

describe(`process-kill chaos: workers SIGKILLed mid-work (CHAOS_SEED=${SEED})`, function () {
  this.timeout(240_000);
  const random = seededRandom(SEED);
  const logDir = process.env.CHAOS_LOG_DIR ?? mkdtempSync(join(tmpdir(), 'chaos-logs-'));
  const model = new BriefModel(SEED);
  const processes: ServiceProcess[] = [];
  const kills: Kill[] = [];
  let svc: TestService;
  let tenant: TestTenant;
  let modelUrl = '';
  let api: ServiceProcess;
  let pgClient: pg.Client | undefined;
  let accounts: { id: string; campaignId: string }[] = [];
  /** Set by after(): no replacement is started from then on, so nothing outlives the test. */
  let stopping = false;

  function spawnService(name: string, roles: string): ServiceProcess {
    const child = spawn(process.execPath, ['src/main.ts'], {
      env: {
        ...process.env,
        ...serviceEnv(svc.config),
        LOG_LEVEL: 'info',
        ROLES: roles,
        HOST: '127.0.0.1',
        PORT: '0',
        GEMINI_API_KEY: 'fake-gemini-key',
        GEMINI_BASE_URL: modelUrl,
        AGENT_ACK_WAIT_MS: '2000',
        APPLY_ACK_WAIT_MS: String(APPLY_ACK_WAIT_MS),
        AGENT_WORKER_CONCURRENCY: '8',
        AGENT_MAX_RUNS_PER_WORKSPACE: '16',
        SHUTDOWN_GRACE_MS: '1000',
      },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    const service: ServiceProcess = { name, roles, child, url: '', started: Promise.resolve(), exited: Promise.resolve() };
    service.exited = new Promise((resolve) => child.once('exit', () => resolve()));
    let stderr = '';
    let sawStarted = false;
    service.started = new Promise<void>((resolve, reject) => {
      const check = () => {
        if (sawStarted && service.url) resolve();
      };
      child.stderr!.on('data', (chunk: Buffer) => {
        appendFileSync(join(logDir, `${name}.stderr.log`), chunk);
        stderr = (stderr + chunk.toString()).slice(-4000);
        service.url ||= /listening on (http:\/\/[^\s]+)/.exec(stderr)?.[1] ?? '';
        check();
      });
      let tail = '';
      child.stdout!.on('data', (chunk: Buffer) => {
        appendFileSync(join(logDir, `${name}.log`), chunk);
        tail = (tail + chunk.toString()).slice(-4000);
        if (tail.includes('"msg":"service started"')) sawStarted = true;
        check();
      });
      child.once('exit', (code, signal) => reject(new Error(`${name} exited (${code ?? signal}) before it started; stderr: ${stderr.trim()}`)));
      setTimeout(() => reject(new Error(`${name} did not start within 60 s`)), 60_000).unref();
    });
    service.started.catch(() => undefined);
    processes.push(service);
    return service;
  }

  async function request(method: string, path: string, key: string, body?: unknown, headers: Record<string, string> = {}) {
    const response = await fetch(`${api.url}${path}`, {
      method,
      headers: { authorization: `Bearer ${key}`, ...(body !== undefined ? { 'content-type': 'application/json' } : {}), ...headers },
      body: body !== undefined ? JSON.stringify(body) : undefined,
      signal: AbortSignal.timeout(20_000),
    });
    const text = await response.text();
    let json: any = null;
    try {
      json = JSON.parse(text);
    } catch {
      json = { raw: text };
    }
    return { status: response.status, body: json, headers: response.headers };
  }

  before(async function () {
    this.timeout(120_000);
    console.log(`      CHAOS_SEED=${SEED} (logs in ${logDir})`);
    modelUrl = await model.start();
    // The test's own process runs only an HTTP role (for setup); every role under test is a child process.
    svc = await startTestService('chaos', { ROLES: 'http' });
    tenant = await svc.tenant('chaos');
    const infra = svc.service.infrastructure;
    const created = await Promise.all(Array.from({ length: ACCOUNTS }, (_, i) => createAccount(infra, tenant.workspaceId, `chaos ${i}`, 'sandbox')));

    api = spawnService('api', 'http');
    const others = ['projectors', 'agent-worker', 'agent-worker', 'apply-worker', 'apply-worker'].map((roles, i) =>
      spawnService(i === 0 ? 'proj-0' : `${roles.split('-')[0]}-${((i - 1) % 2) + 1}-0`, roles),
    );
    await Promise.all([api, ...others].map((p) => p.started));
    // The API process remembers a key id it cannot find as unknown for 60 s (src/auth/key-directory.ts):
    // its first request waits for the projectors process, just started, to fold the test's keys.
    const identityVisible = await waitForProjection(infra.database.db, identityProjection.name, await infra.store.lastSequence(), 60_000);
    expect(identityVisible, 'the projectors process folded the identity events').to.equal(true);

    accounts = [];
    for (const c of created) {
      let campaigns: { status: number; body: any } | undefined;
      // The read model holds the keys now; the API process may still be starting to serve.
      for (let i = 0; i < 600; i++) {
        campaigns = await request('GET', `/api/v1/accounts/${c.value.id}/campaigns`, tenant.keys.read);
        if (campaigns.status === 200) break;
        await sleep(100);
      }
      expect(campaigns!.status, JSON.stringify(campaigns!.body)).to.equal(200);
      const enabled = (campaigns!.body.data as { id: string; status: string }[]).find((x) => x.status === 'enabled');
      expect(enabled, 'an enabled campaign').to.not.equal(undefined);
      accounts.push({ id: c.value.id, campaignId: enabled!.id });
    }

    // Log (and slow down) every write of a chaos negative keyword on the sandbox platform. A BEFORE
    // ROW trigger fires for a row ON CONFLICT DO NOTHING skips too, and its log row commits only
    // with the platform's own transaction: one committed row per keyword per platform write.
    pgClient = new pg.Client({ connectionString: svc.config.databaseUrl });
    await pgClient.connect();
    const s = `"${svc.config.databaseSchema}"`;
    await pgClient.query(`
      CREATE TABLE ${s}.chaos_platform_writes (
        seq bigserial PRIMARY KEY, account_id text NOT NULL, campaign_id text NOT NULL, text text NOT NULL,
        txid bigint NOT NULL DEFAULT txid_current(), at timestamptz NOT NULL DEFAULT clock_timestamp());
      CREATE FUNCTION ${s}.chaos_log_negative() RETURNS trigger LANGUAGE plpgsql AS $$
      BEGIN
        IF NEW.text LIKE 'chaos %' THEN
          INSERT INTO ${s}.chaos_platform_writes (account_id, campaign_id, text) VALUES (NEW.account_id, NEW.campaign_id, NEW.text);
          PERFORM pg_notify('chaos_writes', NEW.text);
          PERFORM pg_sleep(0.3);
        END IF;
        RETURN NEW;
      END $$;
      CREATE TRIGGER chaos_log_negative BEFORE INSERT ON ${s}.sandbox_negative_keywords FOR EACH ROW EXECUTE FUNCTION ${s}.chaos_log_negative();
    `);
  });

  after(async function () {
    this.timeout(60_000);
    stopping = true;
    await sleep(1000);
    for (const p of processes) {
      if (p.child.exitCode === null && p.child.signalCode === null) p.child.kill('SIGKILL');
    }
    await Promise.all(processes.map((p) => Promise.race([p.exited, sleep(5000)])));
    await pgClient?.end().catch(() => undefined);
    await svc?.stop().catch(() => undefined);
    await model.close();
  });

  it('ends every run once, applies every approved action at most once, leaves nothing in flight, and keeps read models equal to the log', async () => {
    const infra = svc.service.infrastructure;
    const loadStart = Date.now();
    const stopAt = loadStart + LOAD_MS;
    const accepted = new Map<string, string>(); // idempotency key -> run id
    const runAccount = new Map<string, string>();
    const problems: string[] = [];
    const approvedByUs = new Set<string>();
    let autoApplyRuns = 0;

    // -- what the workers do, as it is stored: a core NATS subscription sees every event appended --
    const runOfTag = new Map<string, string>();
    const ownerOfRun = new Map<string, string>();
    const actionOfKeyword = new Map<string, string>();
    const claimantOf = new Map<string, string>();
    type Mode = 'random' | 'after-final-answer' | 'after-proposal' | 'after-claim' | 'after-platform-commit';
    let armed: { mode: Mode; fire: (workerId: string) => void } | null = null;
    const pidOf = (workerId: string) => Number(workerId.split(':').at(-2));
    const subscription = infra.nc.subscribe(`${svc.config.subjectPrefix}.>`, {
      callback: (_error, message) => {
        let event: any;
        try {
          event = JSON.parse(new TextDecoder().decode(message.data));
        } catch {
          return;
        }
        if (event.type === 'RunQueued') runOfTag.set(/^chaos (\S+)/.exec(event.data.brief)?.[1] ?? '', event.data.run_id);
        if (event.type === 'RunStarted') ownerOfRun.set(event.data.run_id, event.data.worker_id);
        if (event.type === 'ActionProposed') {
          for (const k of event.data.params.keywords ?? []) actionOfKeyword.set(k.text, event.aggregate.id);
          if (armed?.mode === 'after-proposal') armed.fire(event.actor.id);
        }
        if (event.type === 'ActionApplyStarted') {
          claimantOf.set(event.aggregate.id, event.data.worker_id);
          if (armed?.mode === 'after-claim') armed.fire(event.data.worker_id);
        }
      },
    });
    model.onAnswered = (tag, turn) => {
      if (turn !== 2 || armed?.mode !== 'after-final-answer') return;
      const owner = ownerOfRun.get(runOfTag.get(tag) ?? '');
      if (owner) armed.fire(owner);
    };
    const onWrite = (message: pg.Notification) => {
      if (armed?.mode !== 'after-platform-commit') return;
      const claimant = claimantOf.get(actionOfKeyword.get(message.payload ?? '') ?? '');
      if (claimant) armed.fire(claimant);
    };
    pgClient!.on('notification', onWrite);
    await pgClient!.query('LISTEN chaos_writes');

    // -- chaos: kill a worker (or the projectors) at seeded moments, or at the next moment of a seeded kind; start a replacement --
    const generation = new Map<string, number>();
    const alive = (p: ServiceProcess) => p.child.exitCode === null && p.child.signalCode === null;
    const live = (prefix: string) => processes.filter((p) => p.name.startsWith(prefix) && alive(p));
    const chaosRandom = seededRandom(SEED + 1);
    const kill = (victim: ServiceProcess, mode: Mode) => {
      if (!alive(victim)) return;
      victim.child.kill('SIGKILL');
      kills.push({ at: Date.now(), name: victim.name, pid: victim.child.pid!, roles: victim.roles, mode });
      const slot = victim.name.replace(/-\d+$/, '');
      const n = (generation.get(slot) ?? 0) + 1;
      generation.set(slot, n);
      // The replacement starts in the background: the next kill does not wait for it (it may even hit it starting).
      void Promise.all([victim.exited, sleep(chaosRandom() * 800)]).then(() => {
        if (!stopping) spawnService(`${slot}-${n}`, victim.roles);
      });
    };
    const chaos = (async () => {
      await sleep(1500 + chaosRandom() * 1000);
      while (Date.now() < stopAt - 2000 && !stopping) {
        const elapsed = Date.now() - loadStart;
        const applyWindow = elapsed > 2500 && elapsed < APPLY_KILL_WINDOW_MS;
        const modes: Mode[] = applyWindow ? ['after-claim', 'after-platform-commit', 'after-platform-commit', 'random'] : ['random', 'after-final-answer', 'after-proposal'];
        const mode = modes[Math.floor(chaosRandom() * modes.length)]!;
        const roleOf = (m: Mode) => (m === 'after-claim' || m === 'after-platform-commit' ? 'apply-worker' : 'agent-worker');
        let fired = false;
        if (mode !== 'random') {
          await new Promise<void>((resolve) => {
            const timer = setTimeout(resolve, 3000);
            armed = {
              mode,
              fire: (workerId) => {
                const victim = processes.find((p) => p.child.pid === pidOf(workerId) && alive(p) && p.roles === roleOf(mode));
                if (!victim) return;
                armed = null;
                fired = true;
                kill(victim, mode);
                clearTimeout(timer);
                resolve();
              },
            };
          });
          armed = null;
        }
        if (!fired) {
          const choices = ['agent-1', 'agent-2'];
          if (chaosRandom() < 0.25) choices.push('proj');
          if (applyWindow) choices.push('apply-1', 'apply-2', 'apply-1', 'apply-2');
          const victim = live(`${choices[Math.floor(chaosRandom() * choices.length)]!}-`)[0];
          if (victim) kill(victim, 'random');
        }
        await sleep(1000 + chaosRandom() * 1500);
      }
      await sleep(1000);
    })();

    // -- load: one client per account: create a run (Idempotency-Key, sometimes sent twice), wait for its end --
    const clients = accounts.map(async (account, client) => {
      const clientRandom = seededRandom(SEED * 31 + client);
      for (let n = 0; Date.now() < stopAt; n++) {
        const key = `chaos-${SEED}-${client}-${n}`;
        const autoApply = clientRandom() < 0.3;
        const body = { brief: `chaos c${client}x${n} ${account.campaignId}`, project_id: account.id, auto_apply: autoApply };
        const duplicate = clientRandom() < 0.25;
        let runId: string | undefined;
        for (let attempt = 0; !runId && attempt < 40; attempt++) {
          const sends = duplicate && attempt === 0 ? [request('POST', '/api/v1/runs', tenant.keys.write, body, { 'idempotency-key': key }), request('POST', '/api/v1/runs', tenant.keys.write, body, { 'idempotency-key': key })] : [request('POST', '/api/v1/runs', tenant.keys.write, body, { 'idempotency-key': key })];
          const answers = await Promise.all(sends.map((p) => p.catch((error: Error) => ({ status: 0, body: { error: error.message }, headers: new Headers() }))));
          for (const answer of answers) {
            if (answer.status === 202) {
              const id = String(answer.body.id);
              if (runId && runId !== id) problems.push(`key ${key} answered two run ids ${runId} and ${id}`);
              runId = id;
            } else if (!(answer.status === 409 && /idempotent-request-in-progress|run-in-progress/.test(String(answer.body.type)))) {
              problems.push(`POST /runs ${key}: ${answer.status} ${JSON.stringify(answer.body).slice(0, 300)}`);
            }
          }
          if (!runId) await sleep(300);
        }
        if (!runId) continue;
        // A retry after the answer replays it.
        if (clientRandom() < 0.2) {
          const replay = await request('POST', '/api/v1/runs', tenant.keys.write, body, { 'idempotency-key': key });
          if (replay.status !== 202 || replay.body.id !== runId) problems.push(`replay of ${key}: ${replay.status} ${JSON.stringify(replay.body).slice(0, 200)}`);
        }
        accepted.set(key, runId);
        runAccount.set(runId, account.id);
        if (autoApply) autoApplyRuns++;
        const deadline = Date.now() + 45_000;
        for (;;) {
          const run = await request('GET', `/api/v1/runs/${runId}`, tenant.keys.read).catch(() => null);
          if (run?.status === 200 && ['succeeded', 'failed', 'canceled', 'timed_out'].includes(run.body.status)) break;
          if (Date.now() > deadline) {
            problems.push(`run ${runId} not terminal 45 s after its 202 (GET says ${run?.body?.status})`);
            break;
          }
          await sleep(150);
        }
      }
    });

    // -- approvals: approve what is queued (sometimes twice at once) --
    let approving = true;
    const approver = (async () => {
      const approverRandom = seededRandom(SEED * 7 + 3);
      while (approving) {
        for (const account of accounts) {
          const list = await request('GET', `/api/v1/accounts/${account.id}/approvals?status=queued&limit=200`, tenant.keys.read).catch(() => null);
          if (list?.status !== 200) continue;
          for (const action of list.body.data as { id: string }[]) {
            const twice = approverRandom() < 0.2;
            const path = `/api/v1/accounts/${account.id}/approvals/${action.id}/approve`;
            const answers = await Promise.all(
              (twice ? [1, 2] : [1]).map(() => request('POST', path, tenant.keys.admin, { note: 'chaos' }).catch((error: Error) => ({ status: 0, body: { error: error.message } }))),
            );
            // The same request twice at once: both may answer 200, the second for the approval the
            // first recorded (docs/api.md, "Sending a decision again"); the log must hold one ActionApproved (checked below).
            const ok = answers.filter((a) => a.status === 200).length;
            if (ok >= 1) approvedByUs.add(action.id);
            for (const a of answers) if (a.status !== 200 && !(a.status === 409 && /action-not-in-queue/.test(String(a.body.type)))) problems.push(`approve ${action.id}: ${a.status} ${JSON.stringify(a.body).slice(0, 200)}`);
          }
        }
        await sleep(300);
      }
    })();

    await Promise.all(clients);
    await chaos;
    // Every role is back (a kill may have left one down if its replacement failed to start).
    await Promise.all(processes.filter((p) => p.child.exitCode === null && p.child.signalCode === null).map((p) => p.started));
    for (const slot of ['agent-1', 'agent-2', 'apply-1', 'apply-2', 'proj']) expect(live(`${slot}-`), `${slot} running`).to.have.length(1);

    // -- settle: bounded wait until every run is terminal and every approved action left approved/applying in the log --
    const lastApplyKill = Math.max(0, ...kills.filter((k) => k.roles === 'apply-worker').map((k) => k.at));
    const settleDeadline = Math.max(Date.now() + 20_000, lastApplyKill + APPLY_ACK_WAIT_MS + 15_000);
    let log = await readLog();
    for (;;) {
      const open = unsettled(log, new Set(accepted.values()));
      if (open.length === 0 || Date.now() > settleDeadline) break;
      await sleep(1000);
      log = await readLog();
    }
    approving = false;
    await approver;
    log = await readLog();

    subscription.unsubscribe();
    pgClient!.off('notification', onWrite);
    const kinds = kills.map((k) => `${((k.at - loadStart) / 1000).toFixed(1)}s ${k.name} pid ${k.pid} ${k.mode}`);
    console.log(`      kills: ${kinds.join(', ')}`);
    const streamLast = (await infra.jsm.streams.info(svc.config.eventStream)).state.last_seq;
    console.log(`      stream last_seq ${streamLast}`);
    console.log(`      runs accepted: ${accepted.size} (auto_apply ${autoApplyRuns}); events: ${log.events.length}; approved by the test: ${approvedByUs.size}`);

    // ---- the event log ----
    expect(log.corrupt, 'messages the log does not admit').to.deep.equal([]);
    const ids = new Map<string, number>();
    for (const e of log.events) ids.set(e.event.id, (ids.get(e.event.id) ?? 0) + 1);
    expect([...ids].filter(([, n]) => n > 1), 'event ids stored more than once').to.deep.equal([]);
    const lastHash = new Map<string, string>();
    const chainBreaks: string[] = [];
    for (const e of log.events) {
      const prev = lastHash.get(e.subject) ?? '0'.repeat(64);
      if (e.event.prev_hash !== prev) chainBreaks.push(`${e.seq} ${e.event.type} on ${e.subject}`);
      lastHash.set(e.subject, e.event.hash);
    }
    expect(chainBreaks, 'events that do not continue their subject\'s hash chain').to.deep.equal([]);

    // ---- runs ----
    const runIds = new Set(accepted.values());
    const byRun = new Map<string, typeof log.events>();
    for (const e of log.events) {
      const runId = (e.event.data as { run_id?: string }).run_id;
      if (!runId) continue;
      if (!byRun.has(runId)) byRun.set(runId, []);
      byRun.get(runId)!.push(e);
    }
    const queuedInLog = [...byRun].filter(([, es]) => es.some((e) => e.event.type === 'RunQueued')).map(([id]) => id);
    expect(queuedInLog.filter((id) => !runIds.has(id)), 'runs queued that no 202 named').to.deep.equal([]);
    const runFindings: string[] = [];
    const outcomes = { succeeded: 0, failedOrphaned: 0, failedOther: 0 };
    for (const runId of runIds) {
      const es = byRun.get(runId) ?? [];
      const count = (type: string) => es.filter((e) => e.event.type === type).length;
      const terminal = es.filter((e) => TERMINAL_TYPES.has(e.event.type));
      if (count('RunQueued') !== 1) runFindings.push(`${runId}: ${count('RunQueued')} RunQueued`);
      if (count('RunStarted') > 1) runFindings.push(`${runId}: ${count('RunStarted')} RunStarted`);
      if (terminal.length !== 1) runFindings.push(`${runId}: ${terminal.length} terminal events (${terminal.map((e) => `${e.seq} ${e.event.type}`).join(', ')})`);
      const started = es.find((e) => e.event.type === 'RunStarted');
      const owner = (started?.event.data as { worker_id?: string } | undefined)?.worker_id;
      const work = es.filter((e) => e.event.type === 'ToolCalled' || e.event.type === 'ActionProposed');
      const strangers = work.filter((e) => e.event.actor.id !== owner);
      if (strangers.length > 0) runFindings.push(`${runId}: ${strangers.length} tool calls/proposals by ${[...new Set(strangers.map((e) => e.event.actor.id))].join(', ')}, not the RunStarted worker ${owner}`);
      const end = terminal[0]?.seq ?? Infinity;
      const late = work.filter((e) => e.seq > end);
      if (late.length > 0) runFindings.push(`${runId}: ${late.length} tool calls/proposals after its end (${late.map((e) => e.seq).join(', ')})`);
      const indexes = es.filter((e) => e.event.type === 'ToolCalled').map((e) => (e.event.data as { index: number }).index);
      if (new Set(indexes).size !== indexes.length) runFindings.push(`${runId}: ToolCalled indexes repeat ${indexes.join(',')}`);
      const end0 = terminal[0]?.event;
      if (end0?.type === 'RunSucceeded') outcomes.succeeded++;
      else if (end0?.type === 'RunFailed' && /stopped while running/.test((end0.data as { error: { message: string } }).error.message)) outcomes.failedOrphaned++;
      else if (end0) {
        outcomes.failedOther++;
        runFindings.push(`${runId}: ended ${end0.type} ${JSON.stringify((end0.data as { error?: unknown }).error ?? null)}`);
      }
    }
    console.log(`      outcomes: ${JSON.stringify(outcomes)}`);
    expect(runFindings, 'runs').to.deep.equal([]);

    // The HTTP process's own view of each run (its in-memory follower, across projector kills) agrees with the log.
    const viewFindings: string[] = [];
    for (const runId of runIds) {
      const end = (byRun.get(runId) ?? []).find((e) => TERMINAL_TYPES.has(e.event.type));
      const want = end ? { RunSucceeded: 'succeeded', RunFailed: 'failed', RunCanceled: 'canceled' }[end.event.type as string] : 'not terminal';
      const got = await request('GET', `/api/v1/runs/${runId}`, tenant.keys.read);
      if (got.body.status !== want) viewFindings.push(`${runId}: GET ${got.status} ${got.body.status}, log ${want}`);
    }
    expect(viewFindings, 'GET /runs against the log').to.deep.equal([]);

    // The model was asked each turn of a run at most once: nobody ran a run's agent twice.
    const turns = new Map<string, number>();
    for (const call of model.calls) turns.set(`${call.tag}#${call.turn}`, (turns.get(`${call.tag}#${call.turn}`) ?? 0) + 1);
    expect([...turns].filter(([, n]) => n > 1), 'model turns asked more than once').to.deep.equal([]);

    // ---- actions ----
    const byAction = new Map<string, typeof log.events>();
    for (const e of log.events) {
      if (e.event.aggregate.type !== 'action') continue;
      if (!byAction.has(e.event.aggregate.id)) byAction.set(e.event.aggregate.id, []);
      byAction.get(e.event.aggregate.id)!.push(e);
    }
    const writes = (await pgClient!.query<{ text: string; campaign_id: string; n: string; txids: string }>(
      `SELECT text, campaign_id, count(*) AS n, string_agg(txid::text, ',') AS txids FROM "${svc.config.databaseSchema}".chaos_platform_writes GROUP BY text, campaign_id`,
    )).rows;
    const writesOf = new Map(writes.map((w) => [`${w.campaign_id}|${w.text}`, Number(w.n)]));
    const actionFindings: string[] = [];
    let applied = 0;
    let returned = 0;
    let takeovers = 0;
    const toApply = new Set<string>();
    for (const [actionId, es] of byAction) {
      const proposed = es.find((e) => e.event.type === 'ActionProposed');
      const data = proposed?.event.data as { disposition: string; params: { campaign_id: string; keywords: { text: string }[] } } | undefined;
      const count = (type: string) => es.filter((e) => e.event.type === type).length;
      const triggered = data?.disposition === 'auto_applied' || count('ActionApproved') > 0;
      if (count('ActionApproved') > 1) actionFindings.push(`${actionId}: ${count('ActionApproved')} ActionApproved`);
      if (count('ActionApplied') > 1) actionFindings.push(`${actionId}: ${count('ActionApplied')} ActionApplied`);
      const keywords = data?.params.keywords.map((k) => `${data.params.campaign_id}|${k.text}`) ?? [];
      const platformWrites = Math.max(0, ...keywords.map((k) => writesOf.get(k) ?? 0));
      if (!triggered) {
        if (platformWrites > 0) actionFindings.push(`${actionId}: never approved, written to the platform ${platformWrites}×`);
        continue;
      }
      toApply.add(actionId);
      const claims = count('ActionApplyStarted');
      if (claims > 1) takeovers++;
      const last = [...es].reverse().find((e) => !['ActionApplyHeartbeat'].includes(e.event.type))!;
      if (last.event.type === 'ActionApplied') applied++;
      else if (last.event.type === 'ActionReturnedToQueue') returned++;
      else actionFindings.push(`${actionId}: left in flight, last event ${last.seq} ${last.event.type} (${es.map((e) => e.event.type).join(' → ')})`);
      if (count('ActionApplied') === 1 && platformWrites !== 1) actionFindings.push(`${actionId}: applied, written to the platform ${platformWrites}× (${es.map((e) => `${e.seq} ${e.event.type} ${e.event.actor.id}`).join(' → ')})`);
      if (count('ActionApplied') === 0 && platformWrites > 0) actionFindings.push(`${actionId}: not applied, yet written to the platform ${platformWrites}× (${es.map((e) => `${e.seq} ${e.event.type}`).join(' → ')})`);
      if (last.event.type === 'ActionReturnedToQueue') actionFindings.push(`${actionId}: returned to the queue: ${(last.event.data as { reason: string }).reason}`);
    }
    console.log(`      actions to apply: ${toApply.size}, applied ${applied}, returned ${returned}, with more than one claim ${takeovers}`);
    const approvalsView = new Map<string, string>();
    for (const account of accounts) {
      for (let cursor: string | null = null, first = true; first || cursor; first = false) {
        const page = await request('GET', `/api/v1/accounts/${account.id}/approvals?limit=200${cursor ? `&cursor=${encodeURIComponent(cursor)}` : ''}`, tenant.keys.read);
        for (const a of page.body.data as { id: string; status: string }[]) approvalsView.set(a.id, a.status);
        cursor = page.body.next_cursor ?? null;
      }
    }
    const viewOfActions: string[] = [];
    for (const id of toApply) {
      const last = [...byAction.get(id)!].reverse().find((e) => e.event.type !== 'ActionApplyHeartbeat')!.event.type;
      const want = last === 'ActionApplied' ? 'applied' : last === 'ActionReturnedToQueue' ? 'returned' : 'in flight';
      if (approvalsView.get(id) !== want) viewOfActions.push(`${id}: approvals list ${approvalsView.get(id)}, log ${want}`);
    }
    expect(viewOfActions, 'approvals list against the log').to.deep.equal([]);
    expect([...approvedByUs].filter((id) => !toApply.has(id)), 'actions the API approved (200) with no ActionApproved').to.deep.equal([]);
    expect(actionFindings, 'actions').to.deep.equal([]);
    expect(problems, 'client-side problems').to.deep.equal([]);

    // ---- read models ----
    const quarantined = await pgClient!.query(`SELECT projection, seq, code, error FROM "${svc.config.databaseSchema}".event_quarantine`);
    expect(quarantined.rows, 'events parked by projections').to.deep.equal([]);
    // Projections caught up with the log, then equal to a fresh fold of it.
    const head = log.events.at(-1)?.seq ?? 0;
    const caughtUp = Date.now() + 15_000;
    let checkpoints: { projection: string; last_seq: string }[] = [];
    for (;;) {
      checkpoints = (await pgClient!.query<{ projection: string; last_seq: string }>(`SELECT projection, last_seq FROM "${svc.config.databaseSchema}".projection_checkpoints`)).rows;
      if (checkpoints.length > 0 && checkpoints.every((r) => Number(r.last_seq) >= head)) break;
      if (Date.now() > caughtUp) break;
      await sleep(250);
    }
    console.log(`      log head ${head}; checkpoints ${checkpoints.map((r) => `${r.projection}=${r.last_seq}`).join(' ')}`);
    const audit = await runCli(svc.config, ['audit', 'verify', '--json'], 90_000);
    expect(audit.code, `audit verify: ${audit.stdout.slice(0, 2000)} ${audit.stderr.slice(0, 2000)}`).to.equal(0);

    // Nothing was parked by a worker either.
    const { readFileSync, readdirSync } = await import('node:fs');
    const parked = readdirSync(logDir)
      .filter((f) => f.endsWith('.log') && !f.endsWith('stderr.log'))
      .flatMap((f) => readFileSync(join(logDir, f), 'utf8').split('\n').filter((l) => l.includes('worker parked a poison message')).map((l) => `${f}: ${l.slice(0, 400)}`));
    expect(parked, 'messages parked by workers').to.deep.equal([]);
  });

  /** Every event of the test's stream, admitted. */
  async function readLog() {
    const infra = svc.service.infrastructure;
    const events: { seq: number; subject: string; event: any }[] = [];
    const corrupt: unknown[] = [];
    for await (const result of infra.store.readFilteredChecked(infra.subjects.all, 1)) {
      if (result.ok) events.push(result.stored as any);
      else corrupt.push(result.corrupt);
    }
    return { events, corrupt };
  }

  /** Runs not yet ended, and triggered actions whose last word is not applied or returned. */
  function unsettled(log: { events: { event: any }[] }, runIds: Set<string>): string[] {
    const ended = new Set<string>();
    const actions = new Map<string, { triggered: boolean; last: string }>();
    for (const { event } of log.events) {
      if (TERMINAL_TYPES.has(event.type)) ended.add(event.data.run_id);
      if (event.aggregate.type === 'action') {
        const a = actions.get(event.aggregate.id) ?? { triggered: false, last: '' };
        if ((event.type === 'ActionProposed' && event.data.disposition === 'auto_applied') || event.type === 'ActionApproved') a.triggered = true;
        if (event.type !== 'ActionApplyHeartbeat') a.last = event.type;
        actions.set(event.aggregate.id, a);
      }
    }
    const open = [...runIds].filter((id) => !ended.has(id));
    for (const [id, a] of actions) if (a.triggered && !['ActionApplied', 'ActionReturnedToQueue'].includes(a.last)) open.push(id);
    return open;
  }
});
