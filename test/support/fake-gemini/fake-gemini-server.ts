import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';

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

/** One scripted answer. */
export type FakeStep =
  /** A 200 answer: text first, then the calls. */
  | {
      readonly text?: string;
      readonly functionCalls?: readonly FakeFunctionCall[];
      readonly usage?: { readonly input: number; readonly output: number };
      /** Default STOP. */
      readonly finishReason?: string;
    }
  /** A 200 answer with no candidates: the prompt was blocked. */
  | { readonly promptBlocked: string }
  /** A 200 answer with exactly this JSON body. */
  | { readonly body: unknown }
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

export class FakeGeminiServer {
  /** Every generateContent body received, in order (including ones refused for a bad key). */
  readonly requests: FakeRequestBody[] = [];
  /** The model named in each request's path, parallel to {@link requests}. */
  readonly models: string[] = [];
  private steps: FakeStep[] = [];
  private readonly timers = new Set<NodeJS.Timeout>();
  private readonly apiKey: string;

  constructor(options: { apiKey?: string } = {}) {
    this.apiKey = options.apiKey ?? FAKE_GEMINI_API_KEY;
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
    if ('body' in step) {
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
    sendJson(res, 200, {
      candidates: [{ content: { role: 'model', parts }, finishReason: step.finishReason ?? 'STOP', index: 0 }],
      ...(step.usage
        ? {
            usageMetadata: {
              promptTokenCount: step.usage.input,
              candidatesTokenCount: step.usage.output,
              totalTokenCount: step.usage.input + step.usage.output,
            },
          }
        : {}),
      modelVersion: 'fake',
    });
  }
}

async function readBody(req: IncomingMessage): Promise<string> {
  const chunks: Buffer[] = [];
  for await (const chunk of req) chunks.push(chunk as Buffer);
  return Buffer.concat(chunks).toString('utf8');
}

function sendError(res: ServerResponse, status: number, message: string, details?: unknown[]): void {
  sendJson(res, status, { error: { code: status, message, status: STATUS_NAMES[status] ?? 'UNKNOWN', ...(details ? { details } : {}) } });
}

function sendJson(res: ServerResponse, status: number, body: unknown): void {
  if (res.destroyed) return;
  res.writeHead(status, { 'content-type': 'application/json; charset=UTF-8' });
  res.end(JSON.stringify(body));
}
