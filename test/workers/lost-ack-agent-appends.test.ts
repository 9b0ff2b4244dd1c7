import { expect } from 'chai';
import type { ModelClient, ModelRequest, ModelTurn } from '../../src/agent/model/model-port.ts';
import type { Config } from '../../src/config/config.ts';
import { lastMatchingSeq } from '../../src/event-store/ordered-read.ts';
import { createLogger } from '../../src/log/logger.ts';
import { createAccount, createWorkspace, issueKey } from '../../src/operator/operator-commands.ts';
import type { AdsPlatform, PlatformAccountRef, PlatformChange } from '../../src/platform/ads-platform.ts';
import { createPlatform } from '../../src/platform/create-platform.ts';
import { ProposalService } from '../../src/policy/proposal-service.ts';
import { openInfrastructure, type Infrastructure } from '../../src/runtime/infrastructure.ts';
import { startService, type RunningService } from '../../src/runtime/service.ts';
import { AGENT_WORKER_CONSUMER, AgentWorker } from '../../src/workers/agent-worker.ts';
import { APPLY_WORKER_CONSUMER, ApplyWorker } from '../../src/workers/apply-worker.ts';
import { ApprovalsAppliedChangeLookup } from '../../projections/approvals/applied-change-lookup.ts';
import { dropIsolated, isolatedConfig } from '../support/isolation.ts';
import { PrivateNats } from '../support/private-nats.ts';
import { SeededRandom } from '../support/seeded-random.ts';
import { LostAckRelay, type LostAckTrigger } from '../support/lost-ack-relay.ts';

/**
 * The agent worker's and the apply worker's own appends when the event is stored but its
 * PubAck never reaches the worker: the "did my write land?" case of a network fault or a NATS
 * leader failover, met by background work (which rides an outage through, reloads and decides
 * again) instead of an API request. A real advertising account must never get a change applied
 * twice, never have one proposal recorded as two actions (which would also take two of the
 * account's 20 auto-apply slots of the day), and never have a run left `running`.
 *
 * Topology: one private nats-server. Process B (http, projectors: `startService`) reaches it
 * directly; it is where the test's client talks and what the test reads the event log through.
 * Process W is the workers: an agent worker and an apply worker wired as `startService` wires
 * them (src/runtime/service.ts), on an Infrastructure of their own whose NATS connection goes
 * through {@link LostAckRelay}. Two things differ from the service's wiring, both so that the
 * test can count: the model is {@link BriefScriptedModel} (each run's brief names a plan: one
 * propose tool call, then a text answer), and the platform is the real one (sandbox accounts)
 * behind a proxy that counts `applyChange` calls, which the sandbox itself cannot show (its
 * changes are idempotent: a budget set twice reads as set once).
 *
 * The relay, armed on an event type and an account id, lets the first client→server chunk that
 * holds both (the worker's publish of that event) through to nats-server, which stores it, and
 * from then on drops every byte the server sends back on that connection: the PubAck is lost and
 * so is everything else (reads, deliveries) until "the fault ends" (`heal()`, LOST_ACK_AGENT_SEED
 * picks when: 300–1500 ms after the publish; LOST_ACK_AGENT_HEAL_MS fixes it): the connection is destroyed and W reconnects
 * through the relay (nats.js retries every 250 ms). The worker's publish times out (nats.js, 5 s)
 * whether the fault ended before or not: the server sent the ack on the dead connection.
 *
 * Scenarios, each on a fresh sandbox account (so every event on its subjects is the scenario's):
 * 1.  a run's ActionProposed loses its ack (auto_apply false);
 * 2.  the same with auto_apply true (the slot, the apply);
 * 2b. the AutoApplySlotReserved of an auto-applied proposal loses its ack;
 * 3.  the run's RunSucceeded loses its ack;
 * 3b. the run's RunStarted (the claim) loses its ack;
 * 4a. the apply worker's claim (ActionApplyStarted) of an approved action loses its ack;
 * 4b. the apply worker's ActionApplied of an auto-applied action loses its ack.
 * After the fault each waits until the run is terminal (bounded: a run still `running` after it
 * is a failure, "stuck"), the action has left the apply path when one was to be applied, and
 * both worker consumers are idle (every message delivered and acknowledged: nothing is left that
 * could still do something twice), then counts exactly, in the event log (read through B), in
 * GET history, in GET approvals, in GET run, in the platform calls and in the model's turns.
 *
 * W's log (level LOST_ACK_AGENT_LOG, default info) is kept in memory; its lines about a
 * scenario's run and actions are part of every failure message, as evidence.
 */

const SEED = Number(process.env.LOST_ACK_AGENT_SEED ?? 20261127);
const LOG_LEVEL = (process.env.LOST_ACK_AGENT_LOG ?? 'info') as 'info' | 'warn' | 'debug';
const TERMINAL = new Set(['succeeded', 'failed', 'canceled']);
/** A run not terminal this long after its fault is stuck (the fault costs ~5 s: the publish timeout, then a reload). */
const RUN_SETTLE_MS = 30_000;
/** An action to be applied that has not left the apply path after this long is wedged (longest legitimate wait: a redelivery after the 8 s ack wait, or a claim's 8 s lease). */
const APPLY_SETTLE_MS = 30_000;
/** The apply worker's consumer ack wait (APPLY_ACK_WAIT_MS's minimum) and claim lease; the agent worker's ack wait. */
const APPLY_ACK_WAIT_MS = 8000;
/** Longer than the publish timeout (5 s), as the default lease (30 s) is; LOST_ACK_AGENT_CLAIM_LEASE_MS overrides it. */
const APPLY_CLAIM_LEASE_MS = Number(process.env.LOST_ACK_AGENT_CLAIM_LEASE_MS ?? 8000);
/** When set, every fault ends this long after its publish instead of the seeded 300–1500 ms (e.g. 6000: after the publish timed out). */
const FIXED_HEAL_MS = process.env.LOST_ACK_AGENT_HEAL_MS === undefined ? undefined : Number(process.env.LOST_ACK_AGENT_HEAL_MS);
const AGENT_ACK_WAIT_MS = 4000;

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

// ---------------------------------------------------------------------------------------------
// The model and the platform of W
// ---------------------------------------------------------------------------------------------

interface Plan {
  readonly tool: string;
  readonly args: Record<string, unknown>;
}

const TEXT = (text: string): ModelTurn => ({ parts: [{ kind: 'text', text }], usage: { input_tokens: 3, output_tokens: 2 } });
const CALL = (name: string, args: Record<string, unknown>): ModelTurn => ({
  parts: [{ kind: 'function_call', call: { name, args } }],
  usage: { input_tokens: 3, output_tokens: 2 },
});

/**
 * A model scripted by the run's brief: a brief holding `[lost-ack-agent TAG]` gets the plan of
 * TAG, one tool call on its first turn and a text answer once it has a tool result. Counts the
 * turns of each tag and keeps the tool results it was given (what the run's tool told it).
 */
class BriefScriptedModel implements ModelClient {
  readonly identity = { kind: 'gemini', model: 'lost-ack-scripted' } as const;
  readonly plans = new Map<string, Plan>();
  readonly turns = new Map<string, number>();
  readonly toolResults = new Map<string, Record<string, unknown>[]>();

  async generate(request: ModelRequest): Promise<ModelTurn> {
    const first = request.conversation[0];
    const brief = first?.role === 'user' ? first.text : '';
    const tag = /\[lost-ack-agent ([a-z0-9]+)\]/.exec(brief)?.[1] ?? '?';
    this.turns.set(tag, (this.turns.get(tag) ?? 0) + 1);
    const results = request.conversation.flatMap((entry) => (entry.role === 'tool' ? entry.results.map((r) => r.response) : []));
    this.toolResults.set(tag, results);
    const plan = this.plans.get(tag);
    if (!plan || results.length > 0) return TEXT(`Finished plan ${tag}.`);
    return CALL(plan.tool, plan.args);
  }
}

interface PlatformCall {
  readonly accountId: string;
  readonly change: PlatformChange;
  readonly at: number;
}

/** The platform, with every `applyChange` recorded before it is made. */
function countingPlatform(inner: AdsPlatform, calls: PlatformCall[]): AdsPlatform {
  return new Proxy(inner, {
    get(target, property) {
      const value = Reflect.get(target, property, target) as unknown;
      if (property === 'applyChange') {
        return (account: PlatformAccountRef, change: PlatformChange) => {
          calls.push({ accountId: account.accountId, change, at: performance.now() });
          return inner.applyChange(account, change);
        };
      }
      return typeof value === 'function' ? (value as (...args: unknown[]) => unknown).bind(target) : value;
    },
  });
}

// ---------------------------------------------------------------------------------------------
// The tests
// ---------------------------------------------------------------------------------------------

interface LoggedEvent {
  readonly seq: number;
  readonly type: string;
  readonly subject: string;
  readonly aggregateId: string;
  readonly correlationId: string;
  readonly data: any;
}

interface Answer {
  readonly status: number;
  readonly body: any;
  readonly ms: number;
  readonly error?: string;
}

/** A scenario's account, campaign and plan. */
interface Setup {
  readonly tag: string;
  readonly account: string;
  readonly campaignId: string;
  readonly budgetBefore: number;
  readonly budgetProposed: number;
  readonly brief: string;
}

/** What the fault did. */
interface Fault {
  readonly eventType: string;
  readonly healAfterMs: number;
  /** The armed publish went through the relay (undefined: it never came, the scenario did not happen). */
  readonly trigger: LostAckTrigger | undefined;
  readonly swallowedBytes: number;
  readonly reconnectedAfterMs: number | null;
}

/** Everything counted at the end of a scenario. */
interface Counts {
  readonly events: readonly LoggedEvent[];
  readonly runStatus: string;
  readonly run: Answer;
  readonly approvals: readonly { id: string; status: string; run_id: string | null; kind: string }[];
  readonly historyTypes: readonly string[];
  readonly platformCalls: readonly PlatformCall[];
  readonly modelTurns: number;
  readonly toolResults: readonly Record<string, unknown>[];
  readonly budgetAfter: number | null;
  readonly of: (type: string, predicate?: (e: LoggedEvent) => boolean) => LoggedEvent[];
}

describe(`agent and apply workers whose appends are stored but whose PubAck is lost (LOST_ACK_AGENT_SEED=${SEED})`, function () {
  this.timeout(45_000);
  const random = new SeededRandom(SEED);
  const model = new BriefScriptedModel();
  const platformCalls: PlatformCall[] = [];
  const wLog: string[] = [];
  const wStatus: { at: number; type: string }[] = [];
  let nats: PrivateNats | undefined;
  let relay: LostAckRelay | undefined;
  let config: Config | undefined;
  let procB: RunningService | undefined;
  let infraW: Infrastructure | undefined;
  let agentW: AgentWorker | undefined;
  let applyW: ApplyWorker | undefined;
  let workspaceId = '';
  let writeKey = '';
  let readKey = '';
  let urlB = '';

  before(async function () {
    this.timeout(60_000);
    console.log(`      LOST_ACK_AGENT_SEED=${SEED}`);
    nats = await PrivateNats.start();
    relay = new LostAckRelay(nats.port);
    await relay.listen();
    config = isolatedConfig('lostackagent', { NATS_URL: nats.url, ROLES: 'http,projectors' });
    procB = await startService(config, createLogger('silent'));
    urlB = procB.http!.url;

    // Process W: the two worker roles, wired as src/runtime/service.ts wires them, through the relay.
    const configW: Config = { ...config, natsUrl: relay.url, roles: ['agent-worker', 'apply-worker'] };
    const destination = { write: (line: string) => void wLog.push(line.trimEnd()) };
    const logger = createLogger(LOG_LEVEL, { proc: 'W' }, destination);
    infraW = await openInfrastructure(configW, 'lost-ack-agent:W', { notice: () => undefined });
    void (async () => {
      for await (const status of infraW!.nc.status()) wStatus.push({ at: performance.now(), type: status.type });
    })().catch(() => undefined);
    const platform = countingPlatform(createPlatform(infraW.database.db, configW), platformCalls);
    agentW = new AgentWorker({
      infrastructure: infraW,
      executor: {
        platform,
        proposals: new ProposalService(infraW.commands, new ApprovalsAppliedChangeLookup(infraW.database.db), { platform }),
        model,
        wallClockMs: 60_000,
        modelBudgetMs: 60_000,
        logger,
      },
      concurrency: 2,
      logger,
      shutdownGraceMs: 2000,
      ackWaitMs: AGENT_ACK_WAIT_MS,
    });
    await agentW.start();
    applyW = new ApplyWorker({ infrastructure: infraW, platform, logger, ackWaitMs: APPLY_ACK_WAIT_MS, claimLeaseMs: APPLY_CLAIM_LEASE_MS });
    await applyW.start();

    const operator = procB.infrastructure;
    workspaceId = (await createWorkspace(operator, 'lost ack agent')).value.id;
    writeKey = (await issueKey(operator, workspaceId, 'write', 'lost-ack writer')).value.key;
    readKey = (await issueKey(operator, workspaceId, 'read', 'lost-ack reader')).value.key;
  });

  afterEach(() => {
    // A failed scenario must not leave the relay armed or a connection swallowing for the next one.
    relay?.disarm();
    relay?.heal();
  });

  after(async function () {
    this.timeout(60_000);
    relay?.disarm();
    relay?.heal();
    await agentW?.stop().catch(() => undefined);
    await applyW?.stop().catch(() => undefined);
    await infraW?.close().catch(() => undefined);
    await procB?.stop().catch(() => undefined);
    await relay?.close().catch(() => undefined);
    if (config) await dropIsolated(config).catch(() => undefined);
    await nats?.dispose().catch(() => undefined);
  });

  // ---- helpers ----

  async function send(method: string, path: string, key: string, body?: unknown): Promise<Answer> {
    const sentAt = performance.now();
    try {
      const response = await fetch(`${urlB}${path}`, {
        method,
        headers: { authorization: `Bearer ${key}`, ...(body === undefined ? {} : { 'content-type': 'application/json' }) },
        body: body === undefined ? undefined : JSON.stringify(body),
        signal: AbortSignal.timeout(15_000),
      });
      const text = await response.text();
      let parsed: any;
      try {
        parsed = text === '' ? undefined : JSON.parse(text);
      } catch {
        parsed = text;
      }
      return { status: response.status, body: parsed, ms: Math.round(performance.now() - sentAt) };
    } catch (error) {
      return { status: 0, body: undefined, ms: Math.round(performance.now() - sentAt), error: String(error) };
    }
  }

  /** A fresh sandbox account, one of its enabled campaigns, and the plan: a +10 % budget (safe). */
  async function setUp(tag: string): Promise<Setup> {
    const account = (await createAccount(procB!.infrastructure, workspaceId, `lost ack agent ${tag}`, 'sandbox')).value.id;
    const campaigns = await send('GET', `/api/v1/accounts/${account}/campaigns`, readKey);
    expect(campaigns.status, `campaigns of ${account}: ${JSON.stringify(campaigns.body)}`).to.equal(200);
    const enabled = (campaigns.body.data as { id: string; status: string; daily_budget: number; shared_budget: unknown }[]).filter(
      (c) => c.status === 'enabled' && c.shared_budget === null && c.daily_budget >= 1,
    );
    expect(enabled, `an enabled campaign with a budget of its own on ${account}`).to.not.be.empty;
    const campaign = random.pick(enabled);
    const budgetProposed = Math.round(campaign.daily_budget * 110) / 100;
    model.plans.set(tag, { tool: 'set_campaign_budget', args: { campaign_id: campaign.id, daily_budget: budgetProposed, reason: `lost-ack test ${tag}` } });
    return {
      tag,
      account,
      campaignId: campaign.id,
      budgetBefore: campaign.daily_budget,
      budgetProposed,
      brief: `Raise the daily budget of campaign ${campaign.id} by ten percent [lost-ack-agent ${tag}]`,
    };
  }

  async function postRun(setup: Setup, autoApply: boolean): Promise<string> {
    const answer = await send('POST', '/api/v1/runs', writeKey, { brief: setup.brief, project_id: setup.account, auto_apply: autoApply });
    expect(answer.status, `POST /api/v1/runs: ${JSON.stringify(answer.body)}`).to.equal(202);
    return answer.body.id as string;
  }

  /**
   * Arms the relay on W's next publish of `eventType` on `account`, and ends the fault
   * `healAfterMs` after it went through. Resolves once the fault has ended (or, when the publish
   * never came within `waitMs`, with no trigger).
   */
  function loseAckOf(eventType: string, account: string, waitMs = 20_000): { done: Promise<Fault> } {
    const drawn = random.int(300, 1500);
    const healAfterMs = FIXED_HEAL_MS ?? drawn;
    const triggered = relay!.arm([`"type":"${eventType}"`, account]);
    const done = (async (): Promise<Fault> => {
      const trigger = await Promise.race([triggered, sleep(waitMs).then(() => undefined)]);
      relay!.disarm();
      if (!trigger) return { eventType, healAfterMs, trigger, swallowedBytes: 0, reconnectedAfterMs: null };
      await sleep(healAfterMs);
      const swallowedBytes = relay!.swallowedBytes();
      const healedAt = performance.now();
      expect(relay!.heal(), 'one connection was swallowing').to.equal(1);
      let reconnectedAfterMs: number | null = null;
      for (let waited = 0; waited < 5000 && reconnectedAfterMs === null; waited += 10) {
        const reconnect = wStatus.find((s) => s.type === 'reconnect' && s.at > healedAt);
        if (reconnect) reconnectedAfterMs = Math.round(reconnect.at - healedAt);
        else await sleep(10);
      }
      return { eventType, healAfterMs, trigger, swallowedBytes, reconnectedAfterMs };
    })();
    return { done };
  }

  /** Every event on the account's subjects (account, its runs' transcripts, actions, quotas), as stored: read by B, which the fault never touched. */
  async function accountLog(account: string): Promise<LoggedEvent[]> {
    const { store, subjects } = procB!.infrastructure;
    const events: LoggedEvent[] = [];
    for await (const { seq, subject, event } of store.readFiltered(`${subjects.prefix}.v1.${workspaceId}.${account}.>`, 1)) {
      events.push({ seq, subject, type: event.type, aggregateId: event.aggregate.id, correlationId: event.correlation_id, data: event.data });
    }
    return events;
  }

  function runStatusOf(events: readonly LoggedEvent[], runId: string): string {
    let status = 'unknown';
    for (const e of events) {
      if (e.data?.run_id !== runId) continue;
      if (e.type === 'RunQueued') status = 'queued';
      else if (e.type === 'RunStarted') status = 'running';
      else if (e.type === 'RunSucceeded') status = 'succeeded';
      else if (e.type === 'RunFailed') status = 'failed';
      else if (e.type === 'RunCanceled') status = 'canceled';
    }
    return status;
  }

  /** Polls the event log until `done` holds or `timeoutMs` passed; the last log either way. */
  async function logUntil(account: string, done: (events: LoggedEvent[]) => boolean, timeoutMs: number): Promise<{ events: LoggedEvent[]; ok: boolean; ms: number }> {
    const started = performance.now();
    for (;;) {
      const events = await accountLog(account);
      if (done(events)) return { events, ok: true, ms: Math.round(performance.now() - started) };
      if (performance.now() - started > timeoutMs) return { events, ok: false, ms: Math.round(performance.now() - started) };
      await sleep(100);
    }
  }

  const runEnded = (runId: string) => (events: LoggedEvent[]) => TERMINAL.has(runStatusOf(events, runId));
  /** Every action the account has that was to be applied has left the apply path (applied, or returned). */
  const appliesEnded = (events: LoggedEvent[]) => {
    const toApply = new Set(events.filter((e) => (e.type === 'ActionProposed' && e.data.disposition === 'auto_applied') || e.type === 'ActionApproved').map((e) => e.aggregateId));
    return [...toApply].every((id) => events.some((e) => e.aggregateId === id && (e.type === 'ActionApplied' || e.type === 'ActionReturnedToQueue')));
  };

  /**
   * Both worker consumers idle: every message of their filters delivered, none waiting for an
   * ack (a message deferred or left to a redelivery is pending): nothing is left that could still
   * append or apply something. False when that is not so within `timeoutMs`.
   */
  async function workersIdle(timeoutMs = 20_000): Promise<{ idle: boolean; detail: string }> {
    const { jsm, subjects } = procB!.infrastructure;
    const stream = config!.eventStream;
    const consumers = [
      [AGENT_WORKER_CONSUMER, subjects.filter('*', '*', 'account')],
      [APPLY_WORKER_CONSUMER, subjects.filter('*', '*', 'action')],
    ] as const;
    const deadline = performance.now() + timeoutMs;
    let detail = '';
    for (;;) {
      const states = await Promise.all(
        consumers.map(async ([name, filter]) => {
          const info = await jsm.consumers.info(stream, name);
          const last = await lastMatchingSeq(jsm, stream, filter);
          return { name, idle: info.num_ack_pending === 0 && info.delivered.stream_seq >= last, ackPending: info.num_ack_pending, delivered: info.delivered.stream_seq, last, redelivered: info.num_redelivered };
        }),
      );
      detail = JSON.stringify(states);
      if (states.every((s) => s.idle)) return { idle: true, detail };
      if (performance.now() > deadline) return { idle: false, detail };
      await sleep(100);
    }
  }

  async function historyTypes(account: string): Promise<string[]> {
    const types: string[] = [];
    let cursor: number | null = null;
    for (let page = 0; page < 20; page++) {
      const answer = await send('GET', `/api/v1/accounts/${account}/history?limit=500${cursor === null ? '' : `&cursor=${cursor}`}`, readKey);
      expect(answer.status, `history of ${account}: ${JSON.stringify(answer.body)}`).to.equal(200);
      for (const entry of answer.body.data as { type?: string; corrupt?: boolean }[]) types.push(entry.corrupt ? 'corrupt' : String(entry.type));
      const next = answer.body.next_cursor as number | null;
      if (next === null || next === cursor) break;
      cursor = next;
    }
    return types;
  }

  async function approvalsOf(account: string): Promise<Counts['approvals']> {
    const answer = await send('GET', `/api/v1/accounts/${account}/approvals?limit=200`, readKey);
    expect(answer.status, `approvals of ${account}: ${JSON.stringify(answer.body)}`).to.equal(200);
    return (answer.body.data as any[]).map((a) => ({ id: a.id, status: a.status, run_id: a.run_id ?? null, kind: a.kind }));
  }

  /** The approvals read model shows every action of the log with its last status (B's projectors trail by milliseconds). */
  async function approvalsCaughtUp(account: string, events: readonly LoggedEvent[]): Promise<Counts['approvals']> {
    const expected = new Set(events.filter((e) => e.type === 'ActionProposed').map((e) => e.aggregateId));
    const lastType = new Map<string, string>();
    for (const e of events) if (expected.has(e.aggregateId)) lastType.set(e.aggregateId, e.type);
    const statusOf: Record<string, string> = { ActionApplied: 'applied', ActionReturnedToQueue: 'returned' };
    let approvals: Counts['approvals'] = [];
    for (let i = 0; i < 50; i++) {
      approvals = await approvalsOf(account);
      const settled = [...lastType].every(([id, type]) => !statusOf[type] || approvals.some((a) => a.id === id && a.status === statusOf[type]));
      if (approvals.length >= expected.size && settled) break;
      await sleep(100);
    }
    return approvals;
  }

  async function budgetNow(setup: Setup): Promise<number | null> {
    const answer = await send('GET', `/api/v1/accounts/${setup.account}/campaigns`, readKey);
    if (answer.status !== 200) return null;
    return (answer.body.data as { id: string; daily_budget: number }[]).find((c) => c.id === setup.campaignId)?.daily_budget ?? null;
  }

  async function count(setup: Setup, runId: string): Promise<Counts> {
    const events = await accountLog(setup.account);
    const approvals = await approvalsCaughtUp(setup.account, events);
    const run = await send('GET', `/api/v1/runs/${runId}`, readKey);
    return {
      events,
      runStatus: runStatusOf(events, runId),
      run,
      approvals,
      historyTypes: await historyTypes(setup.account),
      platformCalls: platformCalls.filter((c) => c.accountId === setup.account),
      modelTurns: model.turns.get(setup.tag) ?? 0,
      toolResults: model.toolResults.get(setup.tag) ?? [],
      budgetAfter: await budgetNow(setup),
      of: (type, predicate) => events.filter((e) => e.type === type && (!predicate || predicate(e))),
    };
  }

  /** W's log lines about the given ids, and its warnings and errors, for evidence. */
  const wLogAbout = (ids: readonly string[], since: number): string[] =>
    wLog
      .slice(since)
      .filter((line) => ids.some((id) => id && line.includes(id)) || /"level":(40|50|60)/.test(line))
      .map((line) => line.replace(/"service":"ads-agent-runs",|"pid":\d+,|"hostname":"[^"]*",/g, '').slice(0, 600))
      .slice(-25);

  function evidenceOf(setup: Setup, runId: string, fault: Fault, c: Counts, extra: string[], logFrom: number): string {
    const byType: Record<string, number> = {};
    for (const e of c.events) byType[e.type] = (byType[e.type] ?? 0) + 1;
    const actionIds = [...new Set(c.of('ActionProposed').map((e) => e.aggregateId))];
    return [
      `LOST_ACK_AGENT_SEED=${SEED}; scenario ${setup.tag}; account ${setup.account}; run ${runId}; campaign ${setup.campaignId} budget ${setup.budgetBefore} → proposed ${setup.budgetProposed}, now ${c.budgetAfter}`,
      `fault: ${fault.eventType} publish ${fault.trigger ? `went through the relay (chunk ${fault.trigger.chunkBytes} B)` : 'NEVER came'}; healed ${fault.healAfterMs} ms after it (${fault.swallowedBytes} server bytes swallowed); W reconnected ${fault.reconnectedAfterMs ?? '?'} ms after the heal`,
      ...extra,
      `event log of the account (${c.events.length}): ${JSON.stringify(byType)}`,
      `sequence: ${c.events.map((e) => `${e.seq}:${e.type}${e.type === 'ActionApplyStarted' ? `(attempt ${e.data.attempt}, claim ${String(e.data.claim_id).slice(0, 8)})` : ''}${e.type === 'ActionApplied' ? `(attempt ${e.data.attempt})` : ''}`).join(' ')}`,
      `history types: ${JSON.stringify(c.historyTypes)}`,
      `run: GET ${c.run.status} status=${c.run.body?.status} error=${JSON.stringify(c.run.body?.error)} result.actions=${JSON.stringify((c.run.body?.result?.actions ?? []).map((a: any) => a.id))}; in the log ${c.runStatus}`,
      `actions in the log: ${JSON.stringify(actionIds)}; approvals: ${JSON.stringify(c.approvals)}`,
      `slots: ${JSON.stringify(c.of('AutoApplySlotReserved').map((e) => ({ action: e.data.action_id, slot: e.data.slot })))}`,
      `platform applyChange calls on the account: ${c.platformCalls.length} ${JSON.stringify(c.platformCalls.map((p) => p.change))}`,
      `model: ${c.modelTurns} turns; tool results it was given: ${JSON.stringify(c.toolResults)}`,
      `W's log about these:`,
      ...wLogAbout([runId, ...actionIds], logFrom),
    ].join('\n        ');
  }

  /** Exactly one proposal: one ActionProposed (log and history), one action in approvals, the run's own result naming it, the model told its id. */
  function expectOneAction(setup: Setup, runId: string, c: Counts, evidence: string): string {
    const proposed = c.of('ActionProposed');
    // Fails if the proposal was recorded twice (two actions for one tool call: two approvals to
    // make, two changes to apply, two slots), or never (the stored one lost).
    expect(proposed.length, `ActionProposed events for the one proposal the model made:\n        ${evidence}`).to.equal(1);
    const actionId = proposed[0]!.aggregateId;
    expect(proposed[0]!.data.run_id, `the action's run:\n        ${evidence}`).to.equal(runId);
    // The user-visible log agrees (fails on a duplicate or a missing ActionProposed there).
    expect(c.historyTypes.filter((t) => t === 'ActionProposed').length, `ActionProposed in GET history:\n        ${evidence}`).to.equal(1);
    expect(c.historyTypes, `no corrupt or chain-broken entry in GET history:\n        ${evidence}`).to.not.include('corrupt');
    // Fails if the approvals read model shows two actions (or none) for the one proposal.
    expect(c.approvals.map((a) => a.id), `actions in GET approvals:\n        ${evidence}`).to.deep.equal([actionId]);
    // The run says what it proposed: fails if the tool's result (what the model and the run's
    // result were told) is an error although the action was recorded, or names another action.
    expect(c.toolResults.length, `tool results the model got:\n        ${evidence}`).to.equal(1);
    expect((c.toolResults[0] as any)?.action?.id, `the propose tool's result names the stored action (not an error):\n        ${evidence}`).to.equal(actionId);
    expect((c.run.body?.result?.actions ?? []).map((a: any) => a.id), `GET run result.actions:\n        ${evidence}`).to.deep.equal([actionId]);
    // One tool call recorded, one model turn per step (fails if the tool call was recorded twice or the run went round again).
    expect(c.of('ToolCalled', (e) => e.data.run_id === runId).length, `ToolCalled of the run:\n        ${evidence}`).to.equal(1);
    expect(c.modelTurns, `model turns of the run (call, then answer):\n        ${evidence}`).to.equal(2);
    return actionId;
  }

  /** The run ended once and GET shows it ended: exactly one RunStarted and one terminal event. */
  function expectRunEndedOnce(runId: string, c: Counts, evidence: string, settled: boolean): void {
    // Fails if the run is still `running` (or queued) RUN_SETTLE_MS after the fault: a wedged run.
    expect(settled, `the run did not end within ${RUN_SETTLE_MS} ms of the fault (stuck ${c.runStatus}):\n        ${evidence}`).to.equal(true);
    const terminal = c.events.filter((e) => ['RunSucceeded', 'RunFailed', 'RunCanceled'].includes(e.type) && e.data.run_id === runId);
    // Fails if the run ended twice (e.g. RunSucceeded then a RunFailed for the "orphaned" run) or never.
    expect(terminal.map((e) => e.type), `terminal events of the run:\n        ${evidence}`).to.have.length(1);
    expect(c.of('RunStarted', (e) => e.data.run_id === runId).length, `RunStarted of the run (one claim):\n        ${evidence}`).to.equal(1);
    expect(c.run.status, `GET run:\n        ${evidence}`).to.equal(200);
    expect(c.run.body.status, `GET run status agrees with the log:\n        ${evidence}`).to.equal(c.runStatus);
    // The model made its one proposal and answered: the run has nothing to fail for. A failure
    // would at least say why (checked first, for the report), but is a wrong outcome here.
    if (c.run.body.status === 'failed') expect(String(c.run.body.error?.message ?? ''), `a failed run says why:\n        ${evidence}`).to.not.equal('');
    expect(c.run.body.status, `the run's outcome:\n        ${evidence}`).to.equal('succeeded');
  }

  /** Exactly one slot for the action, and exactly one platform change that went live once. */
  function expectAppliedOnce(setup: Setup, actionId: string, c: Counts, evidence: string, appliesSettled: boolean): void {
    // Fails if the action is still approved/auto_applied/applying APPLY_SETTLE_MS after the fault (wedged).
    expect(appliesSettled, `the action did not leave the apply path within ${APPLY_SETTLE_MS} ms:\n        ${evidence}`).to.equal(true);
    // The platform: fails if the change was sent twice (a second apply of the same action) or never.
    expect(c.platformCalls.length, `platform applyChange calls on the account:\n        ${evidence}`).to.equal(1);
    expect(c.platformCalls[0]!.change).to.deep.include({ kind: 'set_campaign_budget', campaign_id: setup.campaignId, daily_budget: setup.budgetProposed });
    expect(c.budgetAfter, `the campaign's budget on the platform:\n        ${evidence}`).to.equal(setup.budgetProposed);
    // The action ends applied, once: fails on two ActionApplied, or on a return to the queue of a change that went live.
    expect(c.of('ActionApplied', (e) => e.aggregateId === actionId).length, `ActionApplied of the action:\n        ${evidence}`).to.equal(1);
    expect(c.of('ActionReturnedToQueue').length, `ActionReturnedToQueue:\n        ${evidence}`).to.equal(0);
    expect(c.of('ActionApplyFailed').length, `ActionApplyFailed:\n        ${evidence}`).to.equal(0);
    expect(c.approvals.find((a) => a.id === actionId)?.status, `GET approvals status of the action:\n        ${evidence}`).to.equal('applied');
  }

  /** The day's auto-apply count took the action once (fails on two slots for one action: the cap of 20 would be spent twice as fast). */
  function expectOneSlot(actionId: string, c: Counts, evidence: string): void {
    const slots = c.of('AutoApplySlotReserved');
    expect(slots.map((e) => e.data.action_id), `AutoApplySlotReserved on the account's quota of the day:\n        ${evidence}`).to.deep.equal([actionId]);
    expect(slots[0]!.data.slot, `the slot number (a fresh account's first):\n        ${evidence}`).to.equal(1);
    expect(c.historyTypes.filter((t) => t === 'AutoApplySlotReserved').length, `AutoApplySlotReserved in GET history:\n        ${evidence}`).to.equal(1);
    const proposed = c.of('ActionProposed')[0]!;
    // Fails if the action went to the queue although its slot was reserved (the slot spent for nothing).
    expect(proposed.data.disposition, `the action's disposition:\n        ${evidence}`).to.equal('auto_applied');
  }

  /**
   * One run on a fresh account whose W append of `eventType` loses its ack; waits for the run to
   * end, for what was to be applied to leave the apply path, and for the workers to be idle.
   */
  async function runWithLostAck(tag: string, eventType: string, autoApply: boolean) {
    const setup = await setUp(tag);
    const logFrom = wLog.length;
    const fault = loseAckOf(eventType, setup.account);
    const runId = await postRun(setup, autoApply);
    const faultDone = await fault.done;
    const run = await logUntil(setup.account, runEnded(runId), RUN_SETTLE_MS);
    const applies = await logUntil(setup.account, appliesEnded, APPLY_SETTLE_MS);
    const idle = await workersIdle();
    const c = await count(setup, runId);
    const evidence = evidenceOf(setup, runId, faultDone, c, [`run ended ${run.ok ? `${run.ms} ms after the fault ended` : 'NOT'}; applies ended: ${applies.ok}; workers idle: ${idle.idle} ${idle.detail}`], logFrom);
    console.log(`        ${evidence.split('\n').slice(0, 12).join('\n')}`);
    // If this fails the worker never published the event through the relay: the scenario did not happen.
    expect(faultDone.trigger, `the ${eventType} publish did not go through the relay:\n        ${evidence}`).to.not.equal(undefined);
    // Fails if W could not get back to the server after the fault ended.
    expect(faultDone.reconnectedAfterMs, `W reconnected after the fault:\n        ${evidence}`).to.not.equal(null);
    return { setup, runId, c, evidence, runSettled: run.ok, appliesSettled: applies.ok, idle };
  }

  /** Fails if a worker consumer still has a message in flight or deferred long after the fault: something keeps retrying (wedged) or could still act twice. */
  function expectIdle(idle: { idle: boolean; detail: string }, evidence: string): void {
    expect(idle.idle, `worker consumers not idle 20 s after the scenario settled: ${idle.detail}\n        ${evidence}`).to.equal(true);
  }

  // ---- scenarios ----

  it('1. ActionProposed of a run loses its ack: one action, the run succeeds', async () => {
    const { runId, c, evidence, runSettled, idle, setup } = await runWithLostAck('s1', 'ActionProposed', false);
    expectRunEndedOnce(runId, c, evidence, runSettled);
    const actionId = expectOneAction(setup, runId, c, evidence);
    expect(c.approvals.find((a) => a.id === actionId)?.status, `the action waits for approval:\n        ${evidence}`).to.equal('queued');
    // auto_apply false: no slot, nothing applied (fails if the lost ack made the action auto-apply or apply).
    expect(c.of('AutoApplySlotReserved').length, `slots:\n        ${evidence}`).to.equal(0);
    expect(c.platformCalls.length, `platform calls:\n        ${evidence}`).to.equal(0);
    expectIdle(idle, evidence);
  });

  /** An auto_apply run whose `eventType` append loses its ack: one action, one slot, one claim, applied once. */
  const autoAppliedOnce = (label: string, eventType: string) => async () => {
    const { runId, c, evidence, runSettled, appliesSettled, idle, setup } = await runWithLostAck(label, eventType, true);
    expectRunEndedOnce(runId, c, evidence, runSettled);
    const actionId = expectOneAction(setup, runId, c, evidence);
    expectOneSlot(actionId, c, evidence);
    expectAppliedOnce(setup, actionId, c, evidence, appliesSettled);
    expect(c.of('ActionApplyStarted').length, `claims (one attempt):\n        ${evidence}`).to.equal(1);
    expectIdle(idle, evidence);
  };

  it('2. ActionProposed of an auto_apply run loses its ack: one action, one slot, applied once', autoAppliedOnce('s2', 'ActionProposed'));

  it('2b. AutoApplySlotReserved of an auto_apply proposal loses its ack: one slot, one action, applied once', autoAppliedOnce('s2b', 'AutoApplySlotReserved'));

  it('3. RunSucceeded loses its ack: the run ends exactly once and GET shows it succeeded', async () => {
    const { runId, c, evidence, runSettled, idle, setup } = await runWithLostAck('s3', 'RunSucceeded', false);
    expectRunEndedOnce(runId, c, evidence, runSettled);
    expect(c.of('RunSucceeded').length, `RunSucceeded on the account:\n        ${evidence}`).to.equal(1);
    expect(c.of('RunFailed').length, `RunFailed on the account (fails if the run was also failed, e.g. as orphaned):\n        ${evidence}`).to.equal(0);
    expectOneAction(setup, runId, c, evidence);
    expect(c.platformCalls.length, `platform calls:\n        ${evidence}`).to.equal(0);
    expectIdle(idle, evidence);
  });

  it('3b. RunStarted (the claim of the run) loses its ack: the run is run once and ends once', async () => {
    const { runId, c, evidence, runSettled, idle, setup } = await runWithLostAck('s3b', 'RunStarted', false);
    expectRunEndedOnce(runId, c, evidence, runSettled);
    expectOneAction(setup, runId, c, evidence);
    expectIdle(idle, evidence);
  });

  it('4a. the apply worker’s claim (ActionApplyStarted) of an approved action loses its ack: applied once, not returned', async () => {
    const setup = await setUp('s4a');
    const logFrom = wLog.length;
    const runId = await postRun(setup, false);
    const run = await logUntil(setup.account, runEnded(runId), RUN_SETTLE_MS);
    expect(run.ok, `the run (no fault yet) ended: ${runStatusOf(run.events, runId)}`).to.equal(true);
    const proposed = run.events.filter((e) => e.type === 'ActionProposed');
    expect(proposed, 'the run proposed one action').to.have.length(1);
    const actionId = proposed[0]!.aggregateId;
    await approvalsCaughtUp(setup.account, run.events);

    const fault = loseAckOf('ActionApplyStarted', setup.account);
    const approvedAt = performance.now();
    const approve = await send('POST', `/api/v1/accounts/${setup.account}/approvals/${actionId}/approve`, writeKey, { note: 'lost-ack test 4a' });
    expect(approve.status, `approve: ${JSON.stringify(approve.body)}`).to.equal(200);
    const faultDone = await fault.done;
    const applies = await logUntil(setup.account, appliesEnded, APPLY_SETTLE_MS);
    const appliedAfterMs = Math.round(performance.now() - approvedAt);
    const idle = await workersIdle();
    const c = await count(setup, runId);
    const evidence = evidenceOf(setup, runId, faultDone, c, [`approved → apply path left ${applies.ok ? `after ${appliedAfterMs} ms` : 'NEVER'} (claim lease ${APPLY_CLAIM_LEASE_MS} ms); workers idle: ${idle.idle} ${idle.detail}`], logFrom);
    console.log(`        ${evidence.split('\n').slice(0, 12).join('\n')}`);
    expect(faultDone.trigger, `the ActionApplyStarted publish did not go through the relay:\n        ${evidence}`).to.not.equal(undefined);
    expect(faultDone.reconnectedAfterMs, `W reconnected after the fault:\n        ${evidence}`).to.not.equal(null);

    expectAppliedOnce(setup, actionId, c, evidence, applies.ok);
    expectIdle(idle, evidence);
    // One attempt, one claim (docs/policy.md, "Apply worker": "one claim per attempt, whatever
    // the redelivery or the number of workers"). Fails if the worker, deciding its own stored
    // claim again after the lost ack, refused itself (ApplyClaimHeldError), left the action
    // `applying` until its own lease ran out, and then took it over as a second attempt with a
    // second ActionApplyStarted (the attempt counter then counts one platform call twice).
    const claims = c.of('ActionApplyStarted', (e) => e.aggregateId === actionId);
    expect(claims.map((e) => e.data.attempt), `ActionApplyStarted of the action (attempts):\n        ${evidence}`).to.deep.equal([1]);
    expect(c.of('ActionApplied')[0]!.data.attempt, `the attempt ActionApplied records:\n        ${evidence}`).to.equal(1);
  });

  it('4b. the apply worker’s ActionApplied of an auto-applied action loses its ack: applied once, recorded once', async () => {
    const { runId, c, evidence, runSettled, appliesSettled, idle, setup } = await runWithLostAck('s4b', 'ActionApplied', true);
    expectRunEndedOnce(runId, c, evidence, runSettled);
    const actionId = expectOneAction(setup, runId, c, evidence);
    expectOneSlot(actionId, c, evidence);
    expectAppliedOnce(setup, actionId, c, evidence, appliesSettled);
    // Fails if the worker took its own lost-ack finish for a lost claim and someone claimed and applied again.
    expect(c.of('ActionApplyStarted').length, `claims (one attempt):\n        ${evidence}`).to.equal(1);
    expectIdle(idle, evidence);
  });
});
