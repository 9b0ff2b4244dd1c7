import type { RunOutcome } from '../../commands/account/run-lifecycle.ts';
import type { ToolCalledData } from '../events/catalogue/index.ts';
import { isAppError } from '../errors/app-error.ts';
import { ValidationError } from '../errors/common-errors.ts';
import type { ActionDraft } from '../policy/action-draft.ts';
import type { ActionRepresentation } from '../policy/proposal-service.ts';
import type { AdsPlatform, Campaign, PlatformAccountRef } from '../platform/ads-platform.ts';
import { ModelError, type ConversationEntry, type FunctionResult, type ModelClient } from './model/model-port.ts';
import { fitOutput } from './tools/fit-output.ts';
import { jsonNestingDepth, MAX_JSON_DEPTH } from '../text/json-depth.ts';
import { RUN_LIMITS } from './run-limits.ts';
import { systemPrompt } from './system-prompt.ts';
import { ToolInputError } from './tools/agent-tool.ts';
import { ALL_TOOL_NAMES, type ToolRegistry } from './tools/tool-registry.ts';
import { clipText } from '../text/clip-text.ts';
import { sanitizeText } from '../text/hostile-text.ts';

export interface AgentRunRequest {
  readonly runId: string;
  readonly brief: string;
  readonly account: PlatformAccountRef;
  readonly tools: ToolRegistry;
  readonly canPropose: boolean;
  readonly wallClockMs: number;
  readonly modelBudgetMs: number;
}

/**
 * The steps a run's time is spent in, each timed where it happens (`agent_step_duration_seconds`):
 * what an operator needs to tell a slow model or platform from a slow event log.
 */
export const AgentStep = {
  /** One model request, answered or failed. */
  ModelTurn: 'model_turn',
  /** The check before a tool call that the run may go on (its key, its account). */
  Check: 'check',
  /** One tool: input validation and the platform call. */
  Tool: 'tool',
  /** Appending the tool call's ToolCalled to the run's transcript. */
  Record: 'record',
} as const;
export type AgentStep = (typeof AgentStep)[keyof typeof AgentStep];

export interface AgentRunDependencies {
  readonly model: ModelClient;
  readonly platform: AdsPlatform;
  /** Appends ToolCalled; the transcript is durable before the model sees the result. */
  recordToolCall(call: ToolCalledData): Promise<void>;
  /**
   * Records a proposal. `signal` is the run's: once it fired (the run's time is up) the run
   * has ended or is ending, and a tool still working must not leave an action behind it.
   */
  propose(draft: ActionDraft, summary: string, reason: string, signal: AbortSignal, campaign?: Campaign): Promise<ActionRepresentation>;
  readonly now: () => Date;
  /**
   * Asked before each tool call: null while the run may go on, or why it must stop (its key
   * was revoked, the run is no longer this worker's). Nothing is called after a stop.
   */
  mayContinue?(): Promise<RunStop | null>;
  /** Told how long each step took, whether it succeeded or threw. */
  observeStep?(step: AgentStep, seconds: number): void;
}

/** Why a run stops before its next tool call. */
export interface RunStop {
  readonly code: 'key_revoked' | 'internal' | 'account_not_connected';
  readonly message: string;
}

/** How the agent ended; the worker adds the run's duration to make it a RunOutcome. */
export type AgentOutcome = RunOutcome extends infer O ? (O extends RunOutcome ? Omit<O, 'durationMs'> : never) : never;

class RunTimedOut extends Error {}

/**
 * The run failed in a way none of its outcomes describes (a bug, the event log refusing a
 * write): thrown with the usage the run had already spent, which the failed run still reports.
 */
export class AgentCrashed extends Error {
  readonly usage: AgentUsage;

  constructor(cause: unknown, usage: AgentUsage) {
    super(cause instanceof Error ? cause.message : String(cause), { cause });
    this.name = 'AgentCrashed';
    this.usage = usage;
  }
}

export interface AgentUsage {
  readonly input_tokens: number;
  readonly output_tokens: number;
  readonly steps: number;
}

class RunStopped extends Error {
  readonly stop: RunStop;

  constructor(stop: RunStop) {
    super(stop.message);
    this.stop = stop;
  
  }
}

/**
 * One run of the agent: model turn, tool calls, model turn, ... until the model answers
 * in text. Enforces the run's limits whatever the model does: at most 10 tool calls
 * (then tool calling is switched off), the wall clock and the model-time budget, and the text cap.
 */
export async function runAgent(request: AgentRunRequest, deps: AgentRunDependencies): Promise<AgentOutcome> {
  const wallClock = AbortSignal.timeout(request.wallClockMs);
  const usage = { input_tokens: 0, output_tokens: 0, steps: 0 };
  const conversation: ConversationEntry[] = [{ role: 'user', text: request.brief }];
  const system = systemPrompt({ canPropose: request.canPropose, today: deps.now() });
  let toolCalls = 0;
  let modelTimeMs = 0;
  let lastText = '';
  /** The model stopped writing lastText at its output-token limit. */
  let lastTextCut = false;

  const finish = (text: string) => {
    const tooLong = text.length > RUN_LIMITS.maxTextLength;
    return { text: tooLong ? clipText(text, RUN_LIMITS.maxTextLength) : text, truncated: tooLong || lastTextCut, usage: { ...usage } };
  };
  const count = (spent: { input_tokens: number; output_tokens: number }) => {
    usage.steps++;
    usage.input_tokens += spent.input_tokens;
    usage.output_tokens += spent.output_tokens;
  };

  try {
    for (;;) {
      if (wallClock.aborted) throw new RunTimedOut(`the run exceeded its wall clock of ${request.wallClockMs} ms`);
      const remainingBudget = request.modelBudgetMs - modelTimeMs;
      if (remainingBudget <= 0) throw new RunTimedOut(`the model-time budget of ${request.modelBudgetMs} ms is used up`);
      if (usage.steps >= RUN_LIMITS.maxSteps) return { kind: 'succeeded', ...finish(lastText) };

      const tools = request.tools.declarations();
      // After the last tool call the model keeps the declarations (its conversation calls them)
      // but may only answer.
      const mayCallTools = toolCalls < RUN_LIMITS.maxToolCalls && tools.length > 0;
      const budget = AbortSignal.timeout(Math.max(1, Math.floor(remainingBudget)));
      const started = performance.now();
      let turn;
      try {
        turn = await deps.model.generate({ system, conversation, tools, toolChoice: mayCallTools ? 'auto' : 'none', signal: AbortSignal.any([wallClock, budget]) });
      } catch (error) {
        if (wallClock.aborted) throw new RunTimedOut(`the run exceeded its wall clock of ${request.wallClockMs} ms`);
        if (budget.aborted) throw new RunTimedOut(`the model-time budget of ${request.modelBudgetMs} ms is used up`);
        // An answer the run cannot use was still billed.
        if (error instanceof ModelError && error.usage) count(error.usage);
        throw error;
      } finally {
        const took = performance.now() - started;
        modelTimeMs += took;
        deps.observeStep?.(AgentStep.ModelTurn, took / 1000);
      }
      count(turn.usage);
      conversation.push({ role: 'model', parts: turn.parts });

      const text = turn.parts.flatMap((p) => (p.kind === 'text' ? [p.text] : [])).join('');
      if (text) {
        lastText = text;
        lastTextCut = turn.truncated === true;
      }
      const calls = turn.parts.flatMap((p) => (p.kind === 'function_call' ? [p.call] : []));
      if (calls.length === 0 || !mayCallTools) return { kind: 'succeeded', ...finish(lastText) };

      const results: FunctionResult[] = [];
      for (const call of calls) {
        if (toolCalls >= RUN_LIMITS.maxToolCalls) {
          results.push({ name: call.name, response: toolError(`tool call limit of ${RUN_LIMITS.maxToolCalls} reached; answer now`) });
          continue;
        }
        const stop = deps.mayContinue ? await timed(deps, AgentStep.Check, () => deps.mayContinue!()) : null;
        if (stop) throw new RunStopped(stop);
        toolCalls++;
        const started = performance.now();
        const executed = await timed(deps, AgentStep.Tool, () => executeTool(request, deps, call.name, call.args, wallClock));
        const { ok } = executed;
        // What the model is given is what the history records.
        const output = fitOutput(executed.output, RUN_LIMITS.maxToolOutputChars);
        const duration = performance.now() - started;
        await timed(deps, AgentStep.Record, () =>
          deps.recordToolCall({
            run_id: request.runId,
            index: toolCalls,
            name: clipText(call.name, 100),
            input: capInput(call.args),
            ok,
            output,
            duration_ms: Math.round(duration),
          }),
        );
        results.push({ name: call.name, response: output });
      }
      conversation.push({ role: 'tool', results });
    }
  } catch (error) {
    const partial = finish(lastText);
    if (error instanceof RunTimedOut) return { kind: 'failed', code: 'timed_out', message: error.message, ...partial };
    if (error instanceof RunStopped) return { kind: 'failed', code: error.stop.code, message: error.stop.message, ...partial };
    if (error instanceof ModelError) {
      return { kind: 'failed', code: 'agent_error', message: `model error${error.status ? ` ${error.status}` : ''}: ${error.message}`, ...partial };
    }
    throw new AgentCrashed(error, partial.usage);
  }
}

async function timed<T>(deps: AgentRunDependencies, step: AgentStep, work: () => Promise<T>): Promise<T> {
  if (!deps.observeStep) return work();
  const started = performance.now();
  try {
    return await work();
  } finally {
    deps.observeStep(step, (performance.now() - started) / 1000);
  }
}

async function executeTool(
  request: AgentRunRequest,
  deps: AgentRunDependencies,
  name: string,
  args: Record<string, unknown>,
  signal: AbortSignal,
): Promise<{ ok: boolean; output: Record<string, unknown> }> {
  const tool = request.tools.get(name);
  if (!tool) {
    const error = ALL_TOOL_NAMES.has(name) ? `tool ${name} is not available to this run` : `unknown tool ${name}`;
    return { ok: false, output: toolError(error) };
  }
  const invalid = request.tools.validate(name, args);
  if (invalid) return { ok: false, output: toolError(`invalid input: ${invalid}`) };
  try {
    // Raced against the wall clock: a tool may ignore its signal (a platform or database call
    // that hangs), and the run must still end at its limit instead of staying running.
    const output = await untilAborted(
      tool.run(args, {
        platform: deps.platform,
        account: request.account,
        today: deps.now(),
        signal,
        propose: (draft, summary, reason, campaign) => deps.propose(draft, summary, reason, signal, campaign),
      }),
      signal,
    );
    return { ok: true, output };
  } catch (error) {
    if (signal.aborted) throw new RunTimedOut(`the run exceeded its wall clock of ${request.wallClockMs} ms during the tool call ${name}`);
    // A platform that refuses the account's authorisation ends the run: no later tool call can succeed.
    if (isAppError(error) && error.code === 'account-not-connected') throw new RunStopped({ code: 'account_not_connected', message: error.message });
    if (error instanceof ToolInputError || isAppError(error)) return { ok: false, output: toolError(explained(error)) };
    return { ok: false, output: toolError(`the tool failed: ${error instanceof Error ? error.message : String(error)}`) };
  }
}

/**
 * What the model is told of a refusal: the message, and for a refused input which field and
 * why (a proposal whose reason is too long), so that it can correct the call rather than
 * repeat it.
 */
function explained(error: Error): string {
  if (!(error instanceof ValidationError) || error.errors.length === 0) return error.message;
  return `${error.message} ${error.errors.map((e) => `${e.pointer}: ${e.message}`).join('; ')}`;
}

/**
 * A tool's error as the model sees it and ToolCalled records it. Platform and database
 * messages are as hostile as platform data (U+0000, lone surrogates, which no event may
 * carry) and unbounded.
 */
function toolError(message: string): Record<string, unknown> {
  return { error: clipText(sanitizeText(message), RUN_LIMITS.maxToolErrorChars) };
}

/** `work`, or a rejection as soon as `signal` aborts (the work itself goes on unobserved). */
function untilAborted<T>(work: Promise<T>, signal: AbortSignal): Promise<T> {
  if (signal.aborted) return Promise.reject(signal.reason);
  let onAbort: () => void = () => undefined;
  const aborted = new Promise<never>((_resolve, reject) => {
    onAbort = () => reject(signal.reason);
    signal.addEventListener('abort', onAbort, { once: true });
  });
  // A tool that fails after the abort must not surface as an unhandled rejection.
  work.catch(() => undefined);
  return Promise.race([work, aborted]).finally(() => signal.removeEventListener('abort', onAbort));
}

/**
 * The model's arguments as ToolCalled records them: a JSON copy (a number the model wrote as
 * 1e400 is Infinity in memory, which JSON, and so the stored event, has no way to hold), cut
 * like an output when it is too large for one event next to the output.
 */
function capInput(input: Record<string, unknown>): Record<string, unknown> {
  const json = JSON.stringify(input);
  // Kept as text when too long, or nested deeper than any tool takes (an event refuses values
  // nested past 64 levels: src/events/canonical-json.ts), so the call is recorded all the same.
  if (json.length <= RUN_LIMITS.maxToolInputChars && jsonNestingDepth(json) <= MAX_JSON_DEPTH) return JSON.parse(json) as Record<string, unknown>;
  return { truncated_input: clipText(json, RUN_LIMITS.maxToolInputChars), original_chars: json.length };
}
