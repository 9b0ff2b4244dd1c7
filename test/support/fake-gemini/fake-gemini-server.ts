import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { readBody, sendJson } from '../loopback-server.ts';

/**
 * A local HTTP server speaking the slice of the Gemini REST API the SDK uses:
 * `POST /v1beta/models/{model}:generateContent`. Each test scripts the answers; the real
 * `@google/generative-ai` SDK talks to it over the wire, so tests see exactly what it sends.
 */

/** A function call the fake model makes. `args` omitted → sent without `args`, as Gemini does. */
export interface FakeFunctionCall {
  readonly name: string;
  readonly args?: Record<string, unknown>;
  readonly thoughtSignature?: string;
}

/** Token counts of an answer, sent as usageMetadata. */
export interface FakeUsage {
  readonly input: number;
  readonly output: number;
  /** Sent as thoughtsTokenCount: what a thinking model (Gemini 2.5+) spent thinking, billed as output. */
  readonly thoughts?: number;
  /** Sent as toolUsePromptTokenCount, billed as input. */
  readonly toolUsePrompt?: number;
}

/** One scripted answer. */
export type FakeStep =
  /** A 200 answer: text first, then the calls. */
  | {
      readonly text?: string;
      readonly functionCalls?: readonly FakeFunctionCall[];
      readonly usage?: FakeUsage;
      /** Default STOP. */
      readonly finishReason?: string;
    }
  /** A 200 answer with no candidates: the prompt was blocked. */
  | { readonly promptBlocked: string }
  /** A 200 answer with exactly this JSON body. */
  | { readonly body: unknown }
  /** A 200 answer with exactly this text as its body: JSON no object serialises to, such as a number 1e400. */
  | { readonly raw: string }
  /** An API error. `retryDelay` (e.g. "0.2s") adds a google.rpc.RetryInfo detail, as Gemini's 429s have. */
  | { readonly status: number; readonly message: string; readonly retryDelay?: string }
  /** Waits, then plays `then` (unless the client hung up meanwhile). */
  | { readonly delayMs: number; readonly then: FakeStep };

/** A request body as the SDK sent it (parsed JSON). */
export type FakeRequestBody = { readonly contents: unknown[]; readonly [key: string]: unknown };

/** The API key the fake accepts unless told otherwise. */
export const FAKE_GEMINI_API_KEY = 'fake-gemini-key';

const STATUS_NAMES: Readonly<Record<number, string>> = {
  400: 'INVALID_ARGUMENT',
  403: 'PERMISSION_DENIED',
  404: 'NOT_FOUND',
  429: 'RESOURCE_EXHAUSTED',
  500: 'INTERNAL',
  503: 'UNAVAILABLE',
};

/** What Gemini 3 answers (400 INVALID_ARGUMENT) when a function call it signed comes back without its thoughtSignature. */
export const MISSING_THOUGHT_SIGNATURE_MESSAGE =
  'Function call is missing a thought_signature in functionCall parts. This is required for tools to work correctly, and missing thought_signature may lead to degraded model performance.';

export class FakeGeminiServer {
  /** Every generateContent body received, in order (including ones refused for a bad key). */
  readonly requests: FakeRequestBody[] = [];
  /** The model named in each request's path, parallel to {@link requests}. */
  readonly models: string[] = [];
  private steps: FakeStep[] = [];
  private readonly timers = new Set<NodeJS.Timeout>();
  private readonly apiKey: string;
  private readonly requireThoughtSignatures: boolean;
  /** The thoughtSignature of each signed function call answered, by name and arguments. */
  private readonly signatures = new Map<string, string>();

  /**
   * @param options.requireThoughtSignatures answer 400 as Gemini 3 does when a function call
   *   this server signed comes back in a later request without its signature (default true).
   *   The 400 consumes no scripted step.
   */
  constructor(options: { apiKey?: string; requireThoughtSignatures?: boolean } = {}) {
    this.apiKey = options.apiKey ?? FAKE_GEMINI_API_KEY;
    this.requireThoughtSignatures = options.requireThoughtSignatures ?? true;
  }

  /** Replaces the answers still to give; each request consumes one step. */
  script(steps: readonly FakeStep[]): void {
    this.steps = [...steps];
  }

  /** Steps not consumed yet. */
  get remaining(): number {
    return this.steps.length;
  }

  /** Listens on a free local port. `baseUrl` is what `GeminiModel`'s `baseUrl` takes. */
  async start(): Promise<{ baseUrl: string; close(): Promise<void> }> {
    const server = createServer((req, res) => void this.handle(req, res));
    await new Promise<void>((resolve, reject) => {
      server.once('error', reject);
      server.listen(0, '127.0.0.1', () => resolve());
    });
    const { port } = server.address() as AddressInfo;
    return { baseUrl: `http://127.0.0.1:${port}`, close: () => this.close(server) };
  }

  private async close(server: Server): Promise<void> {
    for (const timer of this.timers) clearTimeout(timer);
    this.timers.clear();
    server.closeAllConnections();
    await new Promise<void>((resolve) => server.close(() => resolve()));
  }

  private async handle(req: IncomingMessage, res: ServerResponse): Promise<void> {
    const route = /^\/v1beta\/models\/([^/:]+):generateContent$/.exec(req.url ?? '');
    if (req.method !== 'POST' || !route?.[1]) {
      sendError(res, 404, `fake Gemini: no route for ${req.method} ${req.url}`);
      return;
    }
    let body: FakeRequestBody;
    try {
      body = JSON.parse(await readBody(req)) as FakeRequestBody;
    } catch {
      sendError(res, 400, 'fake Gemini: the request body is not JSON');
      return;
    }
    this.requests.push(body);
    this.models.push(decodeURIComponent(route[1]));

    if (req.headers['x-goog-api-key'] !== this.apiKey) {
      // What Gemini answers for a wrong key: 400 (not 401), reason API_KEY_INVALID.
      sendJson(res, 400, {
        error: {
          code: 400,
          message: 'API key not valid. Please pass a valid API key.',
          status: 'INVALID_ARGUMENT',
          details: [
            {
              '@type': 'type.googleapis.com/google.rpc.ErrorInfo',
              reason: 'API_KEY_INVALID',
              domain: 'googleapis.com',
              metadata: { service: 'generativelanguage.googleapis.com' },
            },
          ],
        },
      });
      return;
    }

    const unsigned = this.requireThoughtSignatures ? this.unsignedCallIn(body) : null;
    if (unsigned) {
      sendError(res, 400, `${MISSING_THOUGHT_SIGNATURE_MESSAGE} Additional data, function call \`default_api:${unsigned.name}\` , position ${unsigned.position}.`);
      return;
    }

    const step = this.steps.shift();
    if (!step) {
      sendError(res, 500, `fake Gemini: script exhausted at request #${this.requests.length}`);
      return;
    }
    this.play(step, res);
  }

  private play(step: FakeStep, res: ServerResponse): void {
    if ('delayMs' in step) {
      const timer = setTimeout(() => {
        this.timers.delete(timer);
        if (!res.destroyed) this.play(step.then, res);
      }, step.delayMs);
      this.timers.add(timer);
      // The client giving up (abort) must not leave the timer holding the test process.
      res.once('close', () => {
        clearTimeout(timer);
        this.timers.delete(timer);
      });
      return;
    }
    if ('status' in step) {
      const details = step.retryDelay ? [{ '@type': 'type.googleapis.com/google.rpc.RetryInfo', retryDelay: step.retryDelay }] : undefined;
      sendError(res, step.status, step.message, details);
      return;
    }
    if ('raw' in step) {
      this.rememberSignatures(JSON.parse(step.raw));
      if (res.destroyed) return;
      res.writeHead(200, { 'content-type': 'application/json; charset=UTF-8' });
      res.end(step.raw);
      return;
    }
    if ('body' in step) {
      this.rememberSignatures(step.body);
      sendJson(res, 200, step.body);
      return;
    }
    if ('promptBlocked' in step) {
      sendJson(res, 200, {
        promptFeedback: { blockReason: step.promptBlocked, safetyRatings: [] },
        usageMetadata: { promptTokenCount: 7, totalTokenCount: 7 },
      });
      return;
    }
    const parts: unknown[] = [];
    if (step.text !== undefined) parts.push({ text: step.text });
    for (const call of step.functionCalls ?? []) {
      parts.push({
        functionCall: { name: call.name, ...(call.args !== undefined ? { args: call.args } : {}) },
        ...(call.thoughtSignature !== undefined ? { thoughtSignature: call.thoughtSignature } : {}),
      });
    }
    const body = {
      candidates: [{ content: { role: 'model', parts }, finishReason: step.finishReason ?? 'STOP', index: 0 }],
      ...(step.usage ? { usageMetadata: usageMetadata(step.usage) } : {}),
      modelVersion: 'fake',
    };
    this.rememberSignatures(body);
    sendJson(res, 200, body);
  }

  private rememberSignatures(body: unknown): void {
    for (const part of candidatePartsOf(body)) {
      if (part.functionCall && typeof part.thoughtSignature === 'string') this.signatures.set(callKey(part.functionCall), part.thoughtSignature);
    }
  }

  /** The first model function call of `body` this server signed that came back without that signature. */
  private unsignedCallIn(body: FakeRequestBody): { name: string; position: number } | null {
    let position = 0;
    for (const content of body.contents as { role?: string; parts?: WirePart[] }[]) {
      for (const part of content.parts ?? []) {
        position++;
        if (content.role !== 'model' || !part.functionCall) continue;
        const signature = this.signatures.get(callKey(part.functionCall));
        if (signature !== undefined && part.thoughtSignature !== signature) return { name: String(part.functionCall.name), position };
      }
    }
    return null;
  }
}

/** A part as it travels, in either direction. */
interface WirePart {
  readonly text?: string;
  readonly functionCall?: { readonly name?: unknown; readonly args?: unknown };
  readonly thoughtSignature?: string;
}

function candidatePartsOf(body: unknown): WirePart[] {
  const candidates = (body as { candidates?: { content?: { parts?: WirePart[] } }[] } | null)?.candidates;
  return Array.isArray(candidates) ? (candidates[0]?.content?.parts ?? []) : [];
}

/** A call's identity across turns: its name and arguments (sent back as `{}` when Gemini omitted them). */
function callKey(call: { readonly name?: unknown; readonly args?: unknown }): string {
  return JSON.stringify([call.name, call.args ?? {}]);
}

function usageMetadata(usage: FakeUsage): Record<string, number> {
  const thoughts = usage.thoughts ?? 0;
  const toolUsePrompt = usage.toolUsePrompt ?? 0;
  return {
    promptTokenCount: usage.input,
    candidatesTokenCount: usage.output,
    ...(usage.thoughts !== undefined ? { thoughtsTokenCount: thoughts } : {}),
    ...(usage.toolUsePrompt !== undefined ? { toolUsePromptTokenCount: toolUsePrompt } : {}),
    totalTokenCount: usage.input + usage.output + thoughts + toolUsePrompt,
  };
}

function sendError(res: ServerResponse, status: number, message: string, details?: unknown[]): void {
  sendJson(res, status, { error: { code: status, message, status: STATUS_NAMES[status] ?? 'UNKNOWN', ...(details ? { details } : {}) } });
}
