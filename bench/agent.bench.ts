import { spawn, type ChildProcess } from 'node:child_process';
import { readdir, readFile } from 'node:fs/promises';
import { fileURLToPath } from 'node:url';
import { v4 as uuidv4 } from 'uuid';
import { newEvent, type EventAddress } from '../commands/shared/new-event.ts';
import { GeminiModel } from '../src/agent/model/gemini/gemini-model.ts';
import type { ConversationEntry, ModelClient } from '../src/agent/model/model-port.ts';
import { SanitizingModel } from '../src/agent/model/sanitizing-model.ts';
import { AgentStep } from '../src/agent/agent-loop.ts';
import { RUN_LIMITS } from '../src/agent/run-limits.ts';
import { systemPrompt } from '../src/agent/system-prompt.ts';
import { ToolRegistry } from '../src/agent/tools/tool-registry.ts';
import { EMPTY_POSITION, type SubjectPosition } from '../src/event-store/event-store.ts';
import { JetStreamEventStore as EventStore } from '../src/event-store/jetstream-event-store.ts';
import { ensureEventStream } from '../src/event-store/stream-setup.ts';
import { Subjects } from '../src/event-store/subjects.ts';
import type { EventEnvelope } from '../src/events/envelope.ts';
import { createAccount, createWorkspace, issueKey, sandboxSeedFor } from '../src/operator/operator-commands.ts';
import type { AdsPlatform, PlatformAccountRef } from '../src/platform/ads-platform.ts';
import type { Config } from '../src/config/config.ts';
import { createPlatform } from '../src/platform/create-platform.ts';
import type { Infrastructure } from '../src/runtime/infrastructure.ts';
import { AGENT_WORKER_CONSUMER } from '../src/workers/agent-worker.ts';
import { serviceEnv } from '../test/support/cli.ts';
import { sampleOf } from '../test/support/prometheus.ts';
import type { TestService } from '../test/support/test-service.ts';
import { envelopeGapMs, inPool, RunWatcher, startBenchService } from './support/bench-service.ts';
import { benchConfig, releaseConfig } from './support/isolation.ts';
import { briefWithTools, startScriptedGeminiProcess, type ScriptedGemini } from './support/scripted-gemini.ts';
import { compare, compareLatency, figure, note, now, section, summarize, timed } from './support/report.ts';
import { accountDecider } from '../commands/account/account-decider.ts';

/**
 * Agent pipeline benchmarks (issue 4), with a scripted Gemini that answers at once, so
 * what is measured is the service's own pipeline:
 *   a. queue-to-start latency: 202 of POST /runs → RunStarted, idle in-process workers,
 *      vs one store.append → follow delivery (the floor of one hop through JetStream);
 *   b. cost per tool call: runs with 10 read-tool calls vs runs with none, vs one store.append,
 *      with every role in one process (as `npm start` runs it; BENCH_SECTIONS=b-all) and with the
 *      agent worker in a process of its own (ROLES=agent-worker, as scale-out runs it;
 *      BENCH_SECTIONS=b-worker); the components (append, tool, model turn) are sampled between
 *      the pairs of runs, so the shared machine's load drifts over both alike;
 *   c. runs per minute with 1 vs 4 agent-worker processes (AGENT_WORKER_CONCURRENCY=1 each).
 */

const QUEUE_RUNS = 100;
const QUEUE_WARMUP = 5;
const TOOL_PAIRS = 20;
/**
 * Pairs run before the measured ones, unmeasured. A worker process fresh from its start runs its
 * first hundred tool calls or so before V8 has optimised its hot paths, which doubled the
 * pipeline's CPU per call with 2 pairs; a worker serves for days, so the steady state is measured
 * (BENCH_TOOL_WARMUP_PAIRS=2 shows the other).
 */
const TOOL_WARMUP_PAIRS = Number(process.env.BENCH_TOOL_WARMUP_PAIRS ?? 10);
const TOOL_CALLS = 10;
/** Component samples taken after each pair of runs: 200 appends and 100 platform calls over the 20 pairs, and 20 of each model turn. */
const APPENDS_PER_PAIR = 10;
const TOOLS_PER_PAIR = 5;
const PROCESS_RUNS = 60;
const PROCESS_TOOL_CALLS = 2;
const PROCESS_COUNTS = [1, 4] as const;
/** Rounds in ABBA order, so drift of the shared machine's load hits both counts alike. */
const PROCESS_ROUNDS = [1, 4, 4, 1] as const;
/** Timed batches per round; per process count the median over its rounds is the result. */
const BATCHES_PER_ROUND = 2;
const READ_TOOL = 'list_campaigns';

const ROOT = fileURLToPath(new URL('..', import.meta.url));
const BRIEF = 'Review the campaigns and tell me whether anything needs changing.';

interface Tenant {
  readonly workspaceId: string;
  readonly key: string;
}

async function tenant(infra: Infrastructure, name: string): Promise<Tenant> {
  const workspaceId = (await createWorkspace(infra, name)).value.id;
  const key = (await issueKey(infra, workspaceId, 'write', 'bench')).value.key;
  return { workspaceId, key };
}

async function sandboxAccounts(infra: Infrastructure, workspaceId: string, count: number): Promise<PlatformAccountRef[]> {
  return inPool(
    Array.from({ length: count }, (_, i) => i),
    16,
    async (i) => {
      const name = `bench sandbox ${i}`;
      const accountId = (await createAccount(infra, workspaceId, name, 'sandbox')).value.id;
      return { accountId, name, platform: 'sandbox' as const, sandboxSeed: sandboxSeedFor(accountId) };
    },
  );
}

/** Generates the sandbox data of each account now, so no timed run pays for it. */
async function generateSandboxData(infra: Infrastructure, accounts: readonly PlatformAccountRef[]): Promise<number> {
  const platform = createPlatform(infra.database.db);
  const { ms } = await timed(() => inPool(accounts, 2, (account) => platform.listCampaigns(account)));
  return ms;
}

async function postRun(svc: TestService, key: string, accountId: string, brief: string): Promise<string> {
  const response = await svc.request('POST', '/api/v1/runs', { key, body: { brief, project_id: accountId } });
  const body = (await response.json()) as { id: string };
  if (response.status !== 202) throw new Error(`POST /runs answered ${response.status}: ${JSON.stringify(body)}`);
  return body.id;
}

function geminiEnv(gemini: ScriptedGemini): Record<string, string> {
  return { GEMINI_API_KEY: gemini.apiKey, GEMINI_BASE_URL: gemini.baseUrl };
}

function succeeded(watcher: RunWatcher, runIds: readonly string[]): { ok: number; other: string[] } {
  const other: string[] = [];
  for (const runId of runIds) {
    const outcome = watcher.outcome(runId);
    if (outcome === 'RunSucceeded') continue;
    const failed = watcher.runs.get(runId)?.events.get('RunFailed') as EventEnvelope<'RunFailed', { error: { code: string; message: string } }> | undefined;
    other.push(failed ? `${failed.data.error.code}: ${failed.data.error.message}` : String(outcome));
  }
  return { ok: runIds.length - other.length, other };
}

// ---------------------------------------------------------------------------------------
// a + b: in-process service, default roles (agent-worker with concurrency 4)

async function benchInProcess(sections: { readonly queue: boolean; readonly toolCalls: boolean }): Promise<void> {
  const gemini = await startScriptedGeminiProcess({ toolCalls: 'from-brief', call: { name: READ_TOOL } });
  let svc: TestService | undefined;
  let watcher: RunWatcher | undefined;
  try {
    svc = await startBenchService('agent', geminiEnv(gemini));
    const infra = svc.service.infrastructure;
    const { workspaceId, key } = await tenant(infra, 'bench agent');
    watcher = await RunWatcher.start(infra, workspaceId);
    const setup = await timed(() => sandboxAccounts(infra, workspaceId, (sections.queue ? QUEUE_RUNS + QUEUE_WARMUP : 0) + 1));
    const accounts = setup.value;
    figure('setup: createAccount (sandbox), 16 at once', setup.ms / 1000, 's', `(${accounts.length} accounts, data generated lazily; not a result)`);
    note('the scripted model is served from a process of its own, as Gemini is remote to the service');

    if (sections.queue) await queueToStart(svc, watcher, workspaceId, key, accounts.slice(0, QUEUE_RUNS + QUEUE_WARMUP));

    if (sections.toolCalls) {
      section(
        `b. cost per tool call, all roles in one process (node src/main.ts as npm start runs it): ${TOOL_PAIRS} runs with ${TOOL_CALLS} ${READ_TOOL} calls ` +
          `vs ${TOOL_PAIRS} runs with none, alternating on one account (sandbox data generated beforehand)`,
      );
      note('every event of a tool call is also handled in this process by the 3 projectors (a Postgres transaction each), the run-state follower and the bench watcher');
      const toolAccount = accounts[accounts.length - 1]!;
      await generateSandboxData(infra, [toolAccount]);
      const components = await ComponentSampler.open(infra, gemini, toolAccount);
      try {
        reportToolCallCost(
          await toolCallRuns(svc, watcher, key, toolAccount, { cpu: thisProcess, metricsUrl: `${svc.baseUrl}/metrics` }, components),
          components.result(),
        );
      } finally {
        await components.close();
      }
    }
  } finally {
    await watcher?.stop();
    await svc?.stop();
    await gemini.close();
  }
}

async function queueToStart(svc: TestService, watcher: RunWatcher, workspaceId: string, key: string, accounts: readonly PlatformAccountRef[]): Promise<void> {
  const infra = svc.service.infrastructure;
  section(`a. queue-to-start: 202 of POST /runs → RunStarted seen on the stream, ${QUEUE_RUNS} runs one after another on ${QUEUE_RUNS} accounts, idle workers`);
  note('workers: in-process agent-worker, concurrency 4, waiting on the pull consumer; model answers text at once; each run ends before the next is queued');
  note('baseline: store.append of an AccountCreated (the CreateAccount command) → the same follower sees it, sequential, same run');
  note('(RunQueued is appended before the 202 is written, so the worker can start while the response is on its way)');
  const baselineSamples: number[] = [];
  for (let i = 0; i < QUEUE_RUNS; i++) {
    const accountId = uuidv4();
    const t0 = now();
    const created = await infra.commands.handle(accountDecider, {
      type: 'CreateAccount',
      workspaceId,
      accountId,
      name: `baseline ${i}`,
      platform: 'none',
      sandboxSeed: null,
      meta: { actor: { kind: 'system', id: 'bench' }, correlationId: accountId },
    });
    baselineSamples.push((await watcher.waitForEvent(created.appended[0]!.event.id)) - t0);
  }
  const clientSamples: number[] = [];
  const envelopeSamples: number[] = [];
  const runIds: string[] = [];
  for (const [i, account] of [...accounts.slice(QUEUE_RUNS), ...accounts.slice(0, QUEUE_RUNS)].entries()) {
    const runId = await postRun(svc, key, account.accountId, BRIEF);
    const answered = now();
    const timeline = await watcher.waitFor(runId, 'RunStarted');
    await watcher.waitTerminal(runId);
    if (i < QUEUE_WARMUP) continue;
    runIds.push(runId);
    clientSamples.push(timeline.seen.get('RunStarted')! - answered);
    envelopeSamples.push(envelopeGapMs(timeline.events.get('RunQueued')!, timeline.events.get('RunStarted')!));
  }
  compareLatency('202 → RunStarted seen', clientSamples, 'append → follow sees it', baselineSamples);
  compareLatency('envelope Queued→Started time', envelopeSamples, 'append → follow sees it', baselineSamples);
  const early = clientSamples.filter((ms) => ms < 0).length;
  const outcomes = succeeded(watcher, runIds);
  note(
    `${outcomes.ok}/${runIds.length} runs succeeded${outcomes.other.length ? ` (others: ${[...new Set(outcomes.other)].join('; ')})` : ''}; ` +
      `${early} RunStarted seen before the client had the 202; envelope times have 1 ms resolution`,
  );
}

/** CPU time (user + system, ms) a process, or one thread of it, has used so far: where a run's work is done. */
type CpuClock = () => Promise<number>;

/**
 * The clocks of the process doing the runs: all its threads (what the machine pays, V8's GC
 * and compiler threads included), and its main thread alone (the event loop, where the
 * pipeline's own code runs).
 */
interface CpuClocks {
  readonly process: CpuClock;
  readonly mainThread: CpuClock;
  /** Which process that is. */
  readonly of: string;
}

const thisProcess: CpuClocks = {
  process: async () => {
    const { user, system } = process.cpuUsage();
    return (user + system) / 1000;
  },
  mainThread: async () => {
    const { user, system } = process.threadCpuUsage();
    return (user + system) / 1000;
  },
  of: 'this process (every role, and the bench watcher)',
};

/**
 * CPU time a task has run, in ms, from its /proc schedstat (nanoseconds): /proc stat's utime
 * and stime count 10 ms clock ticks, too coarse for a run that costs a few milliseconds.
 */
async function schedstatCpu(path: string): Promise<number> {
  const stat = await readFile(path, 'utf8');
  return Number(stat.slice(0, stat.indexOf(' '))) / 1e6;
}

/** Another process's CPU time from /proc: all its threads (each task's schedstat), and its main thread (the task whose id is the pid). */
function otherProcess(pid: number, of: string): CpuClocks {
  return {
    process: async () => {
      const tasks = await readdir(`/proc/${pid}/task`);
      const times = await Promise.all(tasks.map((task) => schedstatCpu(`/proc/${pid}/task/${task}/schedstat`).catch(() => 0)));
      return times.reduce((a, b) => a + b, 0);
    },
    mainThread: () => schedstatCpu(`/proc/${pid}/task/${pid}/schedstat`),
    of,
  };
}

/** Resolves once every projector of the in-process service has applied the stream up to its head, so a run's projection work is not billed to the next run. */
async function projectorsCaughtUp(svc: TestService, timeoutMs = 10_000): Promise<void> {
  const head = await svc.service.infrastructure.store.lastSequence();
  const deadline = now() + timeoutMs;
  while (svc.service.projectorCopy!.statuses().some((status) => status.lastSeq < head)) {
    if (now() > deadline) throw new Error(`projectors did not reach ${head} within ${timeoutMs} ms`);
    await new Promise((resolve) => setTimeout(resolve, 5));
  }
}

/** CPU ms per run of the process doing the runs, by kind of run. */
interface RunCpu {
  readonly tools: number[];
  readonly none: number[];
}

/** Runs with TOOL_CALLS tool calls and runs with none, alternating, as the stream saw them. */
interface ToolCallRuns {
  readonly durations: { readonly tools: number[]; readonly none: number[] };
  readonly steps: { readonly tools: Set<number>; readonly none: Set<number> };
  /** ToolCalled → next ToolCalled of one run, as seen on the stream. */
  readonly toolGaps: number[];
  /** ToolCalled.duration_ms: validation + tool, as the agent loop timed it. */
  readonly toolExecution: number[];
  /** CPU ms the process doing the runs used per run, from the POST until the projectors caught up: all threads, and the main thread. */
  readonly cpu: RunCpu;
  readonly mainThreadCpu: RunCpu;
  /** Which process that is. */
  readonly cpuOf: string;
  /** Seconds per run in each agent step, as the process doing the runs timed them (its agent_step_duration_seconds). */
  readonly stepSeconds: { readonly tools: StepTotals[]; readonly none: StepTotals[] };
}

/** Seconds spent in each agent step (src/agent/agent-loop.ts, AgentStep), and how many of each. */
type StepTotals = Record<AgentStep, { seconds: number; count: number }>;

/** The agent step totals a process's /metrics shows now. */
async function scrapeStepTotals(metricsUrl: string): Promise<StepTotals> {
  const text = await (await fetch(metricsUrl)).text();
  const series = (kind: 'sum' | 'count', step: AgentStep) => sampleOf(text, `agent_step_duration_seconds_${kind}{step="${step}"}`) ?? 0;
  return Object.fromEntries(Object.values(AgentStep).map((step) => [step, { seconds: series('sum', step), count: series('count', step) }])) as StepTotals;
}

function stepTotalsBetween(before: StepTotals, after: StepTotals): StepTotals {
  return Object.fromEntries(
    Object.values(AgentStep).map((step) => [step, { seconds: after[step].seconds - before[step].seconds, count: after[step].count - before[step].count }]),
  ) as StepTotals;
}

/**
 * Runs the pairs, and after each pair samples the components in this process (see
 * {@link ComponentSampler}), so the runs and the components they are compared with see the
 * same load of the shared machine.
 */
async function toolCallRuns(
  svc: TestService,
  watcher: RunWatcher,
  key: string,
  account: PlatformAccountRef,
  worker: { readonly cpu: CpuClocks; readonly metricsUrl: string },
  components: ComponentSampler,
): Promise<ToolCallRuns> {
  const { cpu } = worker;
  const runs: ToolCallRuns = {
    durations: { tools: [], none: [] },
    steps: { tools: new Set(), none: new Set() },
    toolGaps: [],
    toolExecution: [],
    cpu: { tools: [], none: [] },
    mainThreadCpu: { tools: [], none: [] },
    cpuOf: cpu.of,
    stepSeconds: { tools: [], none: [] },
  };
  for (let pair = 0; pair < TOOL_WARMUP_PAIRS + TOOL_PAIRS; pair++) {
    for (const kind of pair % 2 === 0 ? (['tools', 'none'] as const) : (['none', 'tools'] as const)) {
      await projectorsCaughtUp(svc);
      // Scraped outside the CPU window: the scrape's own cost is not a run's.
      const stepsBefore = await scrapeStepTotals(worker.metricsUrl);
      const cpuBefore = await cpu.process();
      const mainBefore = await cpu.mainThread();
      const runId = await postRun(svc, key, account.accountId, briefWithTools(BRIEF, kind === 'tools' ? TOOL_CALLS : 0));
      const timeline = await watcher.waitTerminal(runId);
      await projectorsCaughtUp(svc);
      const cpuUsed = (await cpu.process()) - cpuBefore;
      const mainUsed = (await cpu.mainThread()) - mainBefore;
      const steps = stepTotalsBetween(stepsBefore, await scrapeStepTotals(worker.metricsUrl));
      const done = timeline.events.get('RunSucceeded') as EventEnvelope<'RunSucceeded', { usage: { steps: number } }> | undefined;
      if (!done) throw new Error(`run ${runId} (${kind}) did not succeed: ${JSON.stringify([...timeline.events.values()].at(-1)?.data)}`);
      const called = timeline.events.get('ToolCalled') as EventEnvelope<'ToolCalled', { output: Record<string, unknown> }> | undefined;
      if (called) components.toolOutput = called.data.output;
      if (pair < TOOL_WARMUP_PAIRS) continue;
      runs.durations[kind].push(timeline.seen.get('RunSucceeded')! - timeline.seen.get('RunStarted')!);
      runs.cpu[kind].push(cpuUsed);
      runs.mainThreadCpu[kind].push(mainUsed);
      runs.stepSeconds[kind].push(steps);
      runs.steps[kind].add(done.data.usage.steps);
      timeline.toolCalls.forEach((call, i) => {
        runs.toolExecution.push(call.durationMs);
        if (i > 0) runs.toolGaps.push(call.at - timeline.toolCalls[i - 1]!.at);
      });
    }
    await components.sample({ warmUp: pair < TOOL_WARMUP_PAIRS });
  }
  return runs;
}

/** What one tool call adds besides the pipeline, each measured alone in this process between the runs. */
interface ToolCallComponents {
  readonly append: number[];
  /** CPU ms of this process per store.append, over the same appends: all threads, and the main thread. */
  readonly appendCpu: number;
  readonly appendMainThreadCpu: number;
  readonly tool: number[];
  readonly toolCpu: number;
  readonly toolMainThreadCpu: number;
  /** CPU ms of this process per added model turn (client side: the SDK, the request, the answer). */
  readonly modelTurnCpu: number;
  readonly modelTurnMainThreadCpu: number;
  /** Per model turn a tool call adds (the turns after 1..TOOL_CALLS tool results): samples of each. */
  readonly modelTurns: number[][];
  /** CPU ms per call of the three chained as a run chains them (tool, append, next turn), without the worker. */
  readonly chainedCpu: number;
  readonly chainedMainThreadCpu: number;
}

/** Summed CPU of one component over its measured samples. */
class CpuTally {
  count = 0;
  process = 0;
  mainThread = 0;

  async measure(count: number, work: () => Promise<void>): Promise<void> {
    const before = { process: await thisProcess.process(), mainThread: await thisProcess.mainThread() };
    await work();
    this.process += (await thisProcess.process()) - before.process;
    this.mainThread += (await thisProcess.mainThread()) - before.mainThread;
    this.count += count;
  }

  perSample(): { process: number; mainThread: number } {
    return { process: this.process / this.count, mainThread: this.mainThread / this.count };
  }
}

/**
 * The components of a tool call, each measured alone in this process: one store.append of a
 * ToolCalled (sequential, chained, signed, on a scratch stream no projector or worker reads),
 * the tool's platform call, and the model turn a tool call adds (createModel's client against
 * the same scripted server, turn k carrying k tool results). A slice of each is taken after
 * every pair of runs, so a change in the shared machine's load hits the runs and their
 * components alike; the totals are those the benchmark measured in one go after the runs before.
 */
class ComponentSampler {
  /** A ToolCalled output of the runs, so the model turns measured alone carry the same conversation. */
  toolOutput: Record<string, unknown> = {};

  private readonly appends: number[] = [];
  private readonly tools: number[] = [];
  private readonly turns: number[][] = Array.from({ length: TOOL_CALLS }, () => []);
  private appendCpu = new CpuTally();
  private toolCpu = new CpuTally();
  private turnCpu = new CpuTally();
  private chainedCpu = new CpuTally();

  private readonly scratch: ScratchAppends;
  private readonly platform: AdsPlatform;
  private readonly account: PlatformAccountRef;
  private readonly model: ModelClient;
  private readonly system = systemPrompt({ canPropose: true, today: new Date() });
  private readonly declarations = ToolRegistry.forScope('write').declarations();
  private readonly brief = briefWithTools(BRIEF, TOOL_CALLS);

  private constructor(scratch: ScratchAppends, infra: Infrastructure, gemini: ScriptedGemini, account: PlatformAccountRef) {
    this.scratch = scratch;
    this.platform = createPlatform(infra.database.db);
    this.account = account;
    // The model as the worker builds it (createModel), against the same scripted server.
    this.model = new SanitizingModel(new GeminiModel({ apiKey: gemini.apiKey, model: 'gemini-2.5-flash', baseUrl: gemini.baseUrl }));
  }

  static async open(infra: Infrastructure, gemini: ScriptedGemini, account: PlatformAccountRef): Promise<ComponentSampler> {
    return new ComponentSampler(await ScratchAppends.open(infra), infra, gemini, account);
  }

  /** One slice: APPENDS_PER_PAIR appends, TOOLS_PER_PAIR platform calls, one model turn after each of 1..TOOL_CALLS results. */
  async sample({ warmUp }: { warmUp: boolean }): Promise<void> {
    await this.appendCpu.measure(APPENDS_PER_PAIR, async () => {
      for (let i = 0; i < APPENDS_PER_PAIR; i++) this.appends.push(await this.scratch.append());
    });
    await this.toolCpu.measure(TOOLS_PER_PAIR, async () => {
      for (let i = 0; i < TOOLS_PER_PAIR; i++) this.tools.push((await timed(() => this.platform.listCampaigns(this.account))).ms);
    });
    await this.turnCpu.measure(TOOL_CALLS, async () => {
      for (let k = 1; k <= TOOL_CALLS; k++) this.turns[k - 1]!.push(await this.modelTurn(k));
    });
    await this.chainedCpu.measure(TOOL_CALLS, () => this.chained());
    if (warmUp) this.reset();
  }

  result(): ToolCallComponents {
    const append = this.appendCpu.perSample();
    const tool = this.toolCpu.perSample();
    const turn = this.turnCpu.perSample();
    const chained = this.chainedCpu.perSample();
    return {
      append: this.appends,
      appendCpu: append.process,
      appendMainThreadCpu: append.mainThread,
      tool: this.tools,
      toolCpu: tool.process,
      toolMainThreadCpu: tool.mainThread,
      modelTurns: this.turns,
      modelTurnCpu: turn.process,
      modelTurnMainThreadCpu: turn.mainThread,
      chainedCpu: chained.process,
      chainedMainThreadCpu: chained.mainThread,
    };
  }

  close(): Promise<void> {
    return this.scratch.close();
  }

  private reset(): void {
    this.appends.length = 0;
    this.tools.length = 0;
    for (const samples of this.turns) samples.length = 0;
    this.appendCpu = new CpuTally();
    this.toolCpu = new CpuTally();
    this.turnCpu = new CpuTally();
    this.chainedCpu = new CpuTally();
  }

  /**
   * The same components one after another, as a run does them: per call the tool, the append of
   * its result, the model turn carrying it. Alternating three clients' I/O on one thread costs
   * more than each alone in a loop (the caches and the machine's other processes see to that);
   * the worker cannot do less than this.
   */
  private async chained(): Promise<void> {
    const conversation: ConversationEntry[] = [{ role: 'user', text: this.brief }];
    for (let k = 1; k <= TOOL_CALLS; k++) {
      const output = { campaigns: await this.platform.listCampaigns(this.account) };
      await this.scratch.append();
      conversation.push({ role: 'model', parts: [{ kind: 'function_call', call: { name: READ_TOOL, args: {} } }] });
      conversation.push({ role: 'tool', results: [{ name: READ_TOOL, response: output }] });
      const offered = k < RUN_LIMITS.maxToolCalls ? this.declarations : [];
      await this.model.generate({ system: this.system, conversation, tools: offered, signal: AbortSignal.timeout(10_000) });
    }
  }

  /** The turn a tool call adds: turn k carries the conversation so far, with k tool results in it. */
  private async modelTurn(k: number): Promise<number> {
    const conversation: ConversationEntry[] = [{ role: 'user', text: this.brief }];
    for (let i = 0; i < k; i++) {
      conversation.push({ role: 'model', parts: [{ kind: 'function_call', call: { name: READ_TOOL, args: {} } }] });
      conversation.push({ role: 'tool', results: [{ name: READ_TOOL, response: this.toolOutput }] });
    }
    const offered = k < RUN_LIMITS.maxToolCalls ? this.declarations : [];
    return (await timed(() => this.model.generate({ system: this.system, conversation, tools: offered, signal: AbortSignal.timeout(10_000) }))).ms;
  }
}

/**
 * The raw cost of one store.append: sequential ToolCalled events (with a real list_campaigns-
 * sized output) chained on one run subject of a scratch stream, so no projector or worker sees them.
 */
class ScratchAppends {
  private readonly config: Config;
  private readonly store: EventStore;
  private readonly subject: string;
  private readonly runId = uuidv4();
  private readonly address: EventAddress;
  private position: SubjectPosition = EMPTY_POSITION;
  private index = 0;

  private constructor(config: Config, store: EventStore) {
    this.config = config;
    this.store = store;
    this.address = { workspaceId: 'ws-bench', accountId: 'acc-bench', aggregate: { type: 'run', id: this.runId } };
    this.subject = new Subjects(config.subjectPrefix).forAggregate(this.address);
  }

  static async open(infra: Infrastructure): Promise<ScratchAppends> {
    const config = benchConfig('agentappend');
    try {
      await ensureEventStream(infra.jsm, { name: config.eventStream, subjects: [new Subjects(config.subjectPrefix).all], replicas: 1 });
      return new ScratchAppends(config, new EventStore(infra.js, infra.jsm, config.eventStream, { signer: infra.signing.signer })); // signed, as the service appends
    } catch (error) {
      await releaseConfig(config);
      throw error;
    }
  }

  async append(): Promise<number> {
    const meta = { actor: { kind: 'worker' as const, id: 'bench' }, correlationId: this.runId };
    const data = { run_id: this.runId, index: ++this.index, name: READ_TOOL, input: {}, ok: true, output: SCRATCH_OUTPUT, duration_ms: 2 };
    const event = newEvent('ToolCalled', data, this.address, meta);
    const { value, ms } = await timed(() => this.store.append(this.subject, [event], this.position));
    this.position = { lastSequence: value[0]!.seq, lastHash: value[0]!.event.hash };
    return ms;
  }

  close(): Promise<void> {
    return releaseConfig(this.config);
  }
}

const SCRATCH_OUTPUT = {
  campaigns: Array.from({ length: 6 }, (_, i) => ({
    id: `cmp-${i}`,
    name: `Campaign ${i} — generic search`,
    status: 'enabled',
    daily_budget: 120 + i,
    bidding: { type: 'target_cpa', target_cpa: 25, target_roas_percent: null, portfolio: null },
  })),
};

function reportToolCallCost(runs: ToolCallRuns, components: ToolCallComponents): void {
  const withTools = summarize(runs.durations.tools);
  const without = summarize(runs.durations.none);
  const append = summarize(components.append);
  note(
    `run duration = RunStarted → RunSucceeded as seen on the stream; model steps per run: with tools ${[...runs.steps.tools].join(',')}, ` +
      `without ${[...runs.steps.none].join(',')}`,
  );
  compareLatency(`run with ${TOOL_CALLS} tool calls`, runs.durations.tools, 'run without tool calls', runs.durations.none, '(tools/none)');
  compare({
    name: `per tool call ((p50 diff)/${TOOL_CALLS})`,
    value: (withTools.p50 - without.p50) / TOOL_CALLS,
    unit: 'ms',
    baselineName: 'one store.append p50',
    baselineValue: append.p50,
  });
  compare({
    name: `per tool call ((mean diff)/${TOOL_CALLS})`,
    value: (withTools.mean - without.mean) / TOOL_CALLS,
    unit: 'ms',
    baselineName: 'one store.append mean',
    baselineValue: append.mean,
  });
  compareLatency('ToolCalled → next ToolCalled', runs.toolGaps, 'one store.append', components.append);
  note(`what one tool call adds, measured alone in this process, a slice after each pair of runs (p50 / mean):`);
  figure(`  store.append ToolCalled (n=${components.append.length})`, append.p50, 'ms', `mean ${append.mean.toFixed(2)} ms; sequential, chained, signed, scratch stream`);
  const tool = summarize(components.tool);
  figure(`  ${READ_TOOL} on the sandbox (n=${components.tool.length})`, tool.p50, 'ms', `mean ${tool.mean.toFixed(2)} ms; platform call alone`);
  const execution = summarize(runs.toolExecution);
  figure(`  ToolCalled.duration_ms (n=${runs.toolExecution.length})`, execution.p50, 'ms', `mean ${execution.mean.toFixed(2)} ms; validation + tool, as the agent loop timed it`);
  // The p50 of each added turn, averaged over the turns: later turns send longer conversations.
  const turnP50s = components.modelTurns.map((samples) => summarize(samples).p50);
  const turn = turnP50s.reduce((a, b) => a + b, 0) / turnP50s.length;
  figure(
    `  model turn after 1..${TOOL_CALLS} results (n=${components.modelTurns[0]!.length} each)`,
    turn,
    'ms',
    `mean of the turns' p50s (${turnP50s[0]!.toFixed(2)} … ${turnP50s.at(-1)!.toFixed(2)} ms); createModel's client → the scripted server`,
  );
  // Issue 14 item 5: what the event pipeline itself adds to a tool call (the checks before it,
  // the ToolCalled append, the worker's bookkeeping, what other roles do with the event),
  // net of the model turn and the tool's own work.
  // ToolCalled.duration_ms is whole milliseconds (its p50 is 0 for a sub-millisecond tool), so the tool timed alone is taken.
  compare({
    name: 'pipeline per tool call, model and tool timed alone (p50: per call - model turn - tool)',
    value: Math.max(0, (withTools.p50 - without.p50) / TOOL_CALLS - turn - tool.p50),
    unit: 'ms',
    baselineName: 'one store.append p50',
    baselineValue: append.p50,
  });
  // The same in CPU time, which waiting for the shared machine's cores does not inflate: what
  // the process doing the runs spends per tool call, against what this process spends per append.
  const meanOf = (values: readonly number[]) => values.reduce((a, b) => a + b, 0) / values.length;
  // The same, with the model turns and the tools timed where they ran: the process doing the runs
  // times every step (agent_step_duration_seconds) under the run's own load, where the components
  // above were timed alone in this process between the runs. What is left of a tool call is the
  // event pipeline's: the check before it, the ToolCalled append, the worker's own code.
  const stepMs = (kind: 'tools' | 'none', step: AgentStep) => meanOf(runs.stepSeconds[kind].map((totals) => totals[step].seconds * 1000));
  const modelTurnAdded = (stepMs('tools', AgentStep.ModelTurn) - stepMs('none', AgentStep.ModelTurn)) / TOOL_CALLS;
  const toolInSitu = stepMs('tools', AgentStep.Tool) / TOOL_CALLS;
  note(
    `timed in ${runs.cpuOf} per tool call (mean): model turn added ${modelTurnAdded.toFixed(2)} ms, tool ${toolInSitu.toFixed(2)} ms, ` +
      `check ${(stepMs('tools', AgentStep.Check) / TOOL_CALLS).toFixed(2)} ms, ToolCalled append ${(stepMs('tools', AgentStep.Record) / TOOL_CALLS).toFixed(2)} ms`,
  );
  compare({
    name: 'pipeline per tool call, model and tool timed in the run (mean: per call - model turn - tool)',
    value: Math.max(0, (withTools.mean - without.mean) / TOOL_CALLS - modelTurnAdded - toolInSitu),
    unit: 'ms',
    baselineName: 'one store.append mean',
    baselineValue: append.mean,
  });
  const cpuPerCall = (meanOf(runs.cpu.tools) - meanOf(runs.cpu.none)) / TOOL_CALLS;
  note(`CPU time of ${runs.cpuOf} per run (mean): with tools ${meanOf(runs.cpu.tools).toFixed(1)} ms, without ${meanOf(runs.cpu.none).toFixed(1)} ms; /proc schedstat (ns) for another process, process.cpuUsage for this one`);
  compare({ name: `CPU per tool call ((mean diff)/${TOOL_CALLS})`, value: cpuPerCall, unit: 'ms', baselineName: 'CPU per store.append', baselineValue: components.appendCpu });
  figure('  CPU per model turn (client side)', components.modelTurnCpu, 'ms', 'measured alone, same conversations');
  figure(`  CPU per ${READ_TOOL} (platform call)`, components.toolCpu, 'ms', 'measured alone');
  compare({
    name: 'pipeline CPU per tool call (per call - model turn - tool)',
    value: Math.max(0, cpuPerCall - components.modelTurnCpu - components.toolCpu),
    unit: 'ms',
    baselineName: 'CPU per store.append',
    baselineValue: components.appendCpu,
  });
  // Where the pipeline's CPU goes: the append itself; what chaining the components costs over
  // each alone (measured by chaining the bare components); and what the worker adds beyond them.
  const chaining = components.chainedCpu - components.modelTurnCpu - components.toolCpu - components.appendCpu;
  note(
    `  of which: the append ${components.appendCpu.toFixed(2)} ms; chaining tool, append and model turn as a run does, without the worker, ` +
      `${components.chainedCpu.toFixed(2)} ms per call (${chaining.toFixed(2)} ms over the three alone); ` +
      `the worker beyond that chain ${(cpuPerCall - components.chainedCpu).toFixed(2)} ms`,
  );
  // The main thread alone: the event loop, where the pipeline's own code runs, without the CPU
  // V8's garbage-collector and compiler threads spend beside it (which the process figure counts).
  const mainPerCall = (meanOf(runs.mainThreadCpu.tools) - meanOf(runs.mainThreadCpu.none)) / TOOL_CALLS;
  note(
    `main-thread CPU per run (mean): with tools ${meanOf(runs.mainThreadCpu.tools).toFixed(1)} ms, without ${meanOf(runs.mainThreadCpu.none).toFixed(1)} ms; ` +
      `per model turn ${components.modelTurnMainThreadCpu.toFixed(2)} ms, per ${READ_TOOL} ${components.toolMainThreadCpu.toFixed(2)} ms`,
  );
  compare({
    name: 'pipeline main-thread CPU per tool call (per call - model turn - tool)',
    value: Math.max(0, mainPerCall - components.modelTurnMainThreadCpu - components.toolMainThreadCpu),
    unit: 'ms',
    baselineName: 'main-thread CPU per store.append',
    baselineValue: components.appendMainThreadCpu,
  });
  note(
    `  of which: the append ${components.appendMainThreadCpu.toFixed(2)} ms; the bare chain ${components.chainedMainThreadCpu.toFixed(2)} ms per call ` +
      `(${(components.chainedMainThreadCpu - components.modelTurnMainThreadCpu - components.toolMainThreadCpu - components.appendMainThreadCpu).toFixed(2)} ms over the three alone); ` +
      `the worker beyond that chain ${(mainPerCall - components.chainedMainThreadCpu).toFixed(2)} ms`,
  );
}

// ---------------------------------------------------------------------------------------
// b (worker process): the same runs with the agent worker in its own process

async function benchToolCallsWorkerProcess(): Promise<void> {
  section(
    `b. cost per tool call, agent worker in its own process (ROLES=agent-worker, as scale-out runs it; this process: http,projectors): ` +
      `${TOOL_PAIRS} runs with ${TOOL_CALLS} ${READ_TOOL} calls vs ${TOOL_PAIRS} with none, alternating on one account`,
  );
  const gemini = await startScriptedGeminiProcess({ toolCalls: 'from-brief', call: { name: READ_TOOL } });
  let svc: TestService | undefined;
  let watcher: RunWatcher | undefined;
  let workers: WorkerProcess[] = [];
  let components: ComponentSampler | undefined;
  try {
    svc = await startBenchService('agentworker', { ROLES: 'http,projectors', ...geminiEnv(gemini) });
    const infra = svc.service.infrastructure;
    const { workspaceId, key } = await tenant(infra, 'bench worker process');
    watcher = await RunWatcher.start(infra, workspaceId);
    const [account] = await sandboxAccounts(infra, workspaceId, 1);
    await generateSandboxData(infra, [account!]);
    workers = [await spawnWorker(svc, gemini, 4)];
    await consumerIdle(infra);
    const worker = workers[0]!;
    components = await ComponentSampler.open(infra, gemini, account!);
    const runs = await toolCallRuns(svc, watcher, key, account!, { cpu: otherProcess(worker.child.pid!, 'the worker process'), metricsUrl: `${worker.url}/metrics` }, components);
    reportToolCallCost(runs, components.result());
  } finally {
    await components?.close();
    await stopWorkers(workers);
    await watcher?.stop();
    await svc?.stop();
    await gemini.close();
  }
}

// ---------------------------------------------------------------------------------------
// c: runs per minute with 1 vs 4 worker processes

interface WorkerProcess {
  readonly child: ChildProcess;
  readonly exited: Promise<number | null>;
  /** Where it serves its health and metrics (a process without the http role). */
  readonly url: string;
}

function spawnWorker(svc: TestService, gemini: ScriptedGemini, concurrency = 1): Promise<WorkerProcess> {
  const { config } = svc;
  const child = spawn(process.execPath, ['src/main.ts'], {
    cwd: ROOT,
    env: {
      PATH: process.env.PATH,
      HOME: process.env.HOME,
      // BENCH_WORKER_NODE_OPTIONS=--cpu-prof profiles the worker process (flags for it alone).
      ...(process.env.BENCH_WORKER_NODE_OPTIONS ? { NODE_OPTIONS: process.env.BENCH_WORKER_NODE_OPTIONS } : {}),
      ...serviceEnv(config),
      ...geminiEnv(gemini),
      ROLES: 'agent-worker',
      AGENT_WORKER_CONCURRENCY: String(concurrency),
      SHUTDOWN_GRACE_MS: '5000',
    },
    stdio: ['ignore', 'ignore', 'pipe'],
  });
  const exited = new Promise<number | null>((resolve) => child.once('exit', (code) => resolve(code)));
  return new Promise((resolve, reject) => {
    let stderr = '';
    const timer = setTimeout(() => reject(new Error(`worker process did not start within 60 s: ${stderr}`)), 60_000);
    child.stderr!.setEncoding('utf8');
    child.stderr!.on('data', (chunk: string) => {
      stderr += chunk;
      const listening = /listening on (http:\/\/\S+)/.exec(stderr);
      if (listening) {
        clearTimeout(timer);
        resolve({ child, exited, url: listening[1]! });
      }
    });
    void exited.then((code) => {
      clearTimeout(timer);
      reject(new Error(`worker process exited with ${code} before starting: ${stderr}`));
    });
  });
}

async function stopWorkers(workers: readonly WorkerProcess[]): Promise<void> {
  await Promise.all(
    workers.map(async ({ child, exited }) => {
      if (child.exitCode !== null || child.signalCode !== null) return;
      child.kill('SIGTERM');
      const timeout = setTimeout(() => child.kill('SIGKILL'), 15_000);
      await exited;
      clearTimeout(timeout);
    }),
  );
}

/** Waits until the shared worker consumer has nothing pending or unacknowledged. */
async function consumerIdle(infra: Infrastructure, timeoutMs = 30_000): Promise<void> {
  const deadline = now() + timeoutMs;
  for (;;) {
    const info = await infra.jsm.consumers.info(infra.config.eventStream, AGENT_WORKER_CONSUMER).catch(() => null);
    if (info && info.num_pending === 0 && info.num_ack_pending === 0) return;
    if (now() > deadline) throw new Error(`consumer ${AGENT_WORKER_CONSUMER} still busy after ${timeoutMs} ms`);
    await new Promise((resolve) => setTimeout(resolve, 50));
  }
}

/** Queues one run per account (16 POSTs at a time) and waits for all to end; ms from the first POST to the last terminal event. */
async function batch(svc: TestService, watcher: RunWatcher, key: string, accounts: readonly PlatformAccountRef[]) {
  const started = now();
  const runIds = await inPool(accounts, 16, (account) => postRun(svc, key, account.accountId, BRIEF));
  const queuedBy = now() - started;
  await Promise.all(runIds.map((runId) => watcher.waitTerminal(runId, 120_000)));
  const last = Math.max(...runIds.map((runId) => [...watcher.runs.get(runId)!.seen.values()].reduce((a, b) => Math.max(a, b), 0)));
  return { ms: last - started, queuedBy, ...succeeded(watcher, runIds) };
}

async function benchProcesses(): Promise<void> {
  section(
    `c. runs per minute: ${PROCESS_RUNS} runs on ${PROCESS_RUNS} accounts (model: ${PROCESS_TOOL_CALLS} × ${READ_TOOL}, then text, all instant), ` +
      `1 vs 4 agent-worker processes (node src/main.ts, AGENT_WORKER_CONCURRENCY=1)`,
  );
  note(
    `in-process service: http,projectors; time = first POST → last terminal event seen; rounds ${PROCESS_ROUNDS.join(', ')} processes ` +
      `(ABBA), ${BATCHES_PER_ROUND} batches each on the same accounts, median per count; start-up and a warm-up batch per round not timed`,
  );
  const gemini = await startScriptedGeminiProcess({ toolCalls: PROCESS_TOOL_CALLS, call: { name: READ_TOOL } });
  let svc: TestService | undefined;
  let watcher: RunWatcher | undefined;
  let workers: WorkerProcess[] = [];
  try {
    svc = await startBenchService('agentprocs', { ROLES: 'http,projectors', ...geminiEnv(gemini) });
    const infra = svc.service.infrastructure;
    const { workspaceId, key } = await tenant(infra, 'bench workers');
    watcher = await RunWatcher.start(infra, workspaceId);
    const accounts = await sandboxAccounts(infra, workspaceId, PROCESS_RUNS);
    const generation = await generateSandboxData(infra, accounts);
    note(`setup: ${PROCESS_RUNS} sandbox accounts, data generated in ${(generation / 1000).toFixed(1)} s (not a result)`);

    type Batch = Awaited<ReturnType<typeof batch>>;
    const batches = new Map<number, Batch[]>(PROCESS_COUNTS.map((count) => [count, []]));
    const startups = new Map<number, number[]>(PROCESS_COUNTS.map((count) => [count, []]));
    for (const count of PROCESS_ROUNDS) {
      const start = await timed(() => Promise.all(Array.from({ length: count }, () => spawnWorker(svc!, gemini))));
      workers = start.value;
      startups.get(count)!.push(start.ms);
      await consumerIdle(infra);
      const warm = await batch(svc, watcher, key, accounts.slice(0, 2 * count));
      if (warm.ok !== 2 * count) throw new Error(`warm-up with ${count} processes: ${warm.other.join('; ')}`);
      for (let i = 0; i < BATCHES_PER_ROUND; i++) batches.get(count)!.push(await batch(svc, watcher, key, accounts));
      await stopWorkers(workers);
      workers = [];
    }
    const results = new Map<number, number>();
    for (const count of PROCESS_COUNTS) {
      const list = batches.get(count)!;
      const times = list.map((b) => b.ms).sort((a, b) => a - b);
      const middle = times.length / 2;
      const median = times.length % 2 ? times[Math.floor(middle)]! : (times[middle - 1]! + times[middle]!) / 2;
      const perMinute = (PROCESS_RUNS * 60_000) / median;
      results.set(count, perMinute);
      const ok = list.reduce((sum, b) => sum + b.ok, 0);
      const other = [...new Set(list.flatMap((b) => b.other))];
      figure(
        `${count} worker process${count > 1 ? 'es' : ''} (median of ${list.length})`,
        perMinute,
        'runs/min',
        `(batches ${list.map((b) => (b.ms / 1000).toFixed(2)).join(' / ')} s; ` +
          `${ok}/${PROCESS_RUNS * list.length} succeeded${other.length ? `, others: ${other.join('; ')}` : ''}; ` +
          `start-up ${startups.get(count)!.map((ms) => (ms / 1000).toFixed(1)).join(' / ')} s)`,
      );
    }
    compare({
      name: `${PROCESS_COUNTS[1]} worker processes`,
      value: results.get(PROCESS_COUNTS[1])!,
      unit: 'runs/min',
      baselineName: `${PROCESS_COUNTS[0]} worker process`,
      baselineValue: results.get(PROCESS_COUNTS[0])!,
      ratioNote: `(${PROCESS_COUNTS[1]}/${PROCESS_COUNTS[0]}; 2 cores shared with NATS, Postgres and the service)`,
    });
  } finally {
    await stopWorkers(workers);
    await watcher?.stop();
    await svc?.stop();
    await gemini.close();
  }
}

export async function run(): Promise<void> {
  const only = (process.env.BENCH_SECTIONS ?? '').split(',').map((s) => s.trim()).filter(Boolean);
  const wanted = (...ids: string[]) => only.length === 0 || ids.some((id) => only.includes(id));
  // b-all and b-worker select one half of b: every role in one process, or the worker in its own.
  if (wanted('a', 'b', 'b-all')) await benchInProcess({ queue: wanted('a'), toolCalls: wanted('b', 'b-all') });
  if (wanted('b', 'b-worker')) await benchToolCallsWorkerProcess();
  if (wanted('c')) await benchProcesses();
}
