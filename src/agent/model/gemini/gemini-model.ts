import {
  FinishReason,
  FunctionCallingMode,
  GoogleGenerativeAI,
  type FunctionDeclaration,
  type GenerateContentRequest,
  type GenerateContentResponse,
  type GenerativeModel,
} from '@google/generative-ai';
import type { AgentIdentity } from '../../../events/catalogue/index.ts';
import { ModelError, type ModelClient, type ModelPart, type ModelRequest, type ModelTurn, type ToolDeclaration } from '../model-port.ts';
import { abortReason, raceAbort, sleep } from '../../../runtime/abortable.ts';
import { fromGeminiParts, toGeminiContents, usageOf } from './gemini-conversation.ts';
import { classifyGeminiFailure, type GeminiFailure } from './gemini-errors.ts';
import { GeminiSchemaError, toFunctionDeclaration } from './gemini-schema.ts';

/** Configuration of {@link GeminiModel}. */
export interface GeminiModelOptions {
  readonly apiKey: string;
  /** Model name without the `models/` prefix, e.g. `gemini-2.5-flash`. */
  readonly model: string;
  /** API origin; the SDK appends `/v1beta/models/{model}:generateContent`. Defaults to Google's. */
  readonly baseUrl?: string;
  /** Calls per `generate`, first one included. Default 4. */
  readonly maxAttempts?: number;
  /** First backoff delay; doubles per retry, with jitter. Default 500 ms. */
  readonly retryBaseMs?: number;
  /** Clock (epoch ms), for reporting how long the retries took. Default `Date.now`. */
  readonly now?: () => number;
}

/** Backoff never grows past this, nor does a server-advised RetryInfo delay. */
const MAX_RETRY_DELAY_MS = 60_000;

/** Finish reasons meaning Gemini withheld or cut the answer for policy reasons. */
const BLOCKED_FINISH_REASONS: ReadonlySet<string> = new Set([
  FinishReason.SAFETY,
  FinishReason.RECITATION,
  FinishReason.LANGUAGE,
  FinishReason.BLOCKLIST,
  FinishReason.PROHIBITED_CONTENT,
  FinishReason.SPII,
]);

/** Finish reasons of a complete answer. */
const PLAIN_FINISH_REASONS: ReadonlySet<string> = new Set([FinishReason.STOP, FinishReason.FINISH_REASON_UNSPECIFIED]);

/** A finish reason newer than SDK 0.24's enum: the model called a tool although none could be called. */
const UNEXPECTED_TOOL_CALL = 'UNEXPECTED_TOOL_CALL';

/**
 * The model port over Google's Gemini API (`@google/generative-ai`). One `generate` is one
 * `generateContent` call, retried with exponential backoff on 429, 5xx and network failures.
 */
export class GeminiModel implements ModelClient {
  readonly identity: AgentIdentity;
  private readonly client: GenerativeModel;
  private readonly maxAttempts: number;
  private readonly retryBaseMs: number;
  private readonly now: () => number;
  /**
   * Gemini's form of each declaration list a caller offered: a run offers the same list on
   * every turn (ToolRegistry holds one per scope), and converting it cost a few tenths of a
   * millisecond per turn. Only frozen lists are kept: one its caller can still change would
   * be answered from a stale conversion.
   */
  private readonly converted = new WeakMap<readonly ToolDeclaration[], FunctionDeclaration[]>();

  constructor(options: GeminiModelOptions) {
    this.identity = { kind: 'gemini', model: options.model };
    // No SDK `timeout`: the caller's signal bounds each call, and the SDK never clears its
    // timeout timer, which would keep the process alive for that long after every call.
    this.client = new GoogleGenerativeAI(options.apiKey).getGenerativeModel(
      { model: options.model },
      options.baseUrl !== undefined ? { baseUrl: options.baseUrl } : {},
    );
    this.maxAttempts = Math.max(1, options.maxAttempts ?? 4);
    this.retryBaseMs = options.retryBaseMs ?? 500;
    this.now = options.now ?? Date.now;
  }

  /**
   * @throws ModelError when Gemini refuses the request, blocks the answer, or still fails after
   *   `maxAttempts`; the signal's reason (an AbortError) when `request.signal` fires.
   */
  async generate(request: ModelRequest): Promise<ModelTurn> {
    const params = this.toRequest(request);
    const response = await this.callWithRetries(params, request.signal);
    return toModelTurn(response);
  }

  private toRequest(request: ModelRequest): GenerateContentRequest {
    let functionDeclarations = this.converted.get(request.tools);
    try {
      if (!functionDeclarations) {
        functionDeclarations = request.tools.map(toFunctionDeclaration);
        if (Object.isFrozen(request.tools)) this.converted.set(request.tools, functionDeclarations);
      }
    } catch (error) {
      if (error instanceof GeminiSchemaError) throw new ModelError(`a tool schema Gemini cannot express: ${error.message}`, undefined, { cause: error });
      throw error;
    }
    return {
      contents: toGeminiContents(request.conversation),
      ...(request.system ? { systemInstruction: request.system } : {}),
      // No tools at all rather than an empty list, which Gemini refuses.
      ...(functionDeclarations.length > 0 ? { tools: [{ functionDeclarations }] } : {}),
      // Once the run has used its tool calls the declarations stay (the conversation is full of
      // calls to them) but calling is switched off: with the tools simply left out, Gemini may
      // still call one and end its answer UNEXPECTED_TOOL_CALL instead of answering.
      ...(functionDeclarations.length > 0 && request.toolChoice === 'none' ? { toolConfig: { functionCallingConfig: { mode: FunctionCallingMode.NONE } } } : {}),
    };
  }

  private async callWithRetries(params: GenerateContentRequest, signal: AbortSignal): Promise<GenerateContentResponse> {
    const started = this.now();
    for (let attempt = 1; ; attempt++) {
      // The SDK only listens for a future 'abort' event: given a signal that already fired it
      // sends the request anyway.
      if (signal.aborted) throw abortReason(signal);
      let failure: GeminiFailure;
      try {
        // A fresh copy per attempt: the SDK rewrites `systemInstruction` in the object it is given.
        // raceAbort so the rejection is prompt and is the signal's reason, whatever the SDK does.
        const result = await raceAbort(this.client.generateContent({ ...params }, { signal }), signal);
        return result.response;
      } catch (error) {
        if (signal.aborted) throw abortReason(signal);
        failure = classifyGeminiFailure(error);
        if (!failure.retry) throw new ModelError(failure.message, failure.status, { cause: error });
        if (attempt >= this.maxAttempts) {
          const elapsed = Math.round(this.now() - started);
          throw new ModelError(`${failure.message} (gave up after ${attempt} attempts in ${elapsed} ms)`, failure.status, { cause: error });
        }
      }
      await sleep(this.backoffMs(attempt, failure.retryAfterMs), signal);
    }
  }

  /** Equal jitter: half the exponential step fixed, half random, so clients that failed together spread out. */
  private backoffMs(attempt: number, retryAfterMs: number | undefined): number {
    const step = Math.min(MAX_RETRY_DELAY_MS, this.retryBaseMs * 2 ** (attempt - 1));
    const jittered = step / 2 + Math.random() * (step / 2);
    return retryAfterMs === undefined ? jittered : Math.max(jittered, Math.min(retryAfterMs, MAX_RETRY_DELAY_MS));
  }
}

/**
 * One candidate's answer as the port's turn. Only STOP (or no reason) is a plain answer;
 * MAX_TOKENS is one cut off, and every other finish reason that leaves the run nothing to go
 * on with is a ModelError carrying the tokens the answer cost.
 */
function toModelTurn(response: GenerateContentResponse): ModelTurn {
  const usage = usageOf(response);
  const fail = (message: string): never => {
    throw new ModelError(message, undefined, { usage });
  };
  const candidate = response.candidates?.[0];
  if (!candidate) {
    const feedback = response.promptFeedback;
    if (feedback?.blockReason) fail(`Gemini blocked the prompt (${feedback.blockReason})${feedback.blockReasonMessage ? `: ${feedback.blockReasonMessage}` : ''}`);
    return fail('Gemini returned no candidates');
  }
  const reason: string | undefined = candidate.finishReason;
  const detail = candidate.finishMessage ? `: ${candidate.finishMessage}` : '';
  if (reason && BLOCKED_FINISH_REASONS.has(reason)) fail(`Gemini blocked the answer (finish reason ${reason})${detail}`);
  if (reason === FinishReason.MALFORMED_FUNCTION_CALL) fail(`Gemini produced a malformed function call${detail}`);
  // Gemini called a tool it was not allowed to (none offered, or calling switched off).
  if (reason === UNEXPECTED_TOOL_CALL) fail(`Gemini called a tool when it was not allowed to (finish reason ${reason})${detail}`);
  // Parts are read directly rather than through response.text()/functionCalls(): those split
  // text from calls and lose the order the model produced them in.
  let parts: ModelPart[];
  try {
    parts = fromGeminiParts(candidate.content?.parts ?? []);
  } catch (error) {
    if (error instanceof ModelError) return fail(error.message);
    throw error;
  }
  if (reason === FinishReason.MAX_TOKENS) {
    // Thinking can use up the whole output budget before a word of the answer is written.
    if (parts.length === 0) fail('Gemini used up its output-token limit before answering (finish reason MAX_TOKENS)');
    return { parts, usage, truncated: true };
  }
  if (reason && !PLAIN_FINISH_REASONS.has(reason) && parts.length === 0) fail(`Gemini ended without an answer (finish reason ${reason})${detail}`);
  return { parts, usage };
}
