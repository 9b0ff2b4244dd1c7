import { createServer, type IncomingMessage, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { FAKE_GEMINI_API_KEY, type FakeFunctionCall } from '../../test/support/fake-gemini/fake-gemini-server.ts';

/**
 * A stateless stand-in for Gemini's `generateContent`, for benchmarks that run many runs
 * at once. test/support's FakeGeminiServer plays one shared script in request order, so
 * concurrent runs would take each other's steps; here each answer depends only on the
 * request itself: the conversation's model turns so far decide whether the model calls a
 * tool again or answers in text. Every run therefore sees the same turns, whatever the
 * concurrency, and the server never runs out of steps.
 */
export interface ScriptedGeminiOptions {
  /** Tool calls per run, one per model turn, before the text answer. */
  readonly toolCalls: (body: GeminiRequestBody) => number;
  /** The call made on each tool turn. */
  readonly call: FakeFunctionCall;
  readonly text?: string;
}

export interface GeminiRequestBody {
  readonly contents?: readonly { readonly role?: string; readonly parts?: readonly Record<string, unknown>[] }[];
  readonly systemInstruction?: unknown;
}

export interface ScriptedGemini {
  readonly baseUrl: string;
  readonly apiKey: string;
  /** generateContent requests answered so far. */
  requests(): number;
  close(): Promise<void>;
}

/** The brief of a run (its first user turn), e.g. to pick the number of tool calls per run. */
export function briefOf(body: GeminiRequestBody): string {
  const first = body.contents?.find((c) => c.role === 'user');
  const part = first?.parts?.find((p) => typeof p.text === 'string');
  return typeof part?.text === 'string' ? part.text : '';
}

export async function startScriptedGemini(options: ScriptedGeminiOptions): Promise<ScriptedGemini> {
  let answered = 0;
  const handle = async (req: IncomingMessage, res: ServerResponse) => {
    const chunks: Buffer[] = [];
    for await (const chunk of req) chunks.push(chunk as Buffer);
    if (req.method !== 'POST' || !/^\/v1beta\/models\/[^/:]+:generateContent$/.test(req.url ?? '')) {
      return send(res, 404, { error: { code: 404, message: `no route for ${req.method} ${req.url}`, status: 'NOT_FOUND' } });
    }
    if (req.headers['x-goog-api-key'] !== FAKE_GEMINI_API_KEY) {
      return send(res, 400, { error: { code: 400, message: 'API key not valid.', status: 'INVALID_ARGUMENT' } });
    }
    let body: GeminiRequestBody;
    try {
      body = JSON.parse(Buffer.concat(chunks).toString('utf8')) as GeminiRequestBody;
    } catch {
      return send(res, 400, { error: { code: 400, message: 'not JSON', status: 'INVALID_ARGUMENT' } });
    }
    answered++;
    const modelTurns = (body.contents ?? []).filter((c) => c.role === 'model').length;
    const parts =
      modelTurns < options.toolCalls(body)
        ? [{ functionCall: { name: options.call.name, ...(options.call.args !== undefined ? { args: options.call.args } : {}) } }]
        : [{ text: options.text ?? 'Done: nothing needs changing.' }];
    send(res, 200, {
      candidates: [{ content: { role: 'model', parts }, finishReason: 'STOP', index: 0 }],
      usageMetadata: { promptTokenCount: 100, candidatesTokenCount: 10, totalTokenCount: 110 },
      modelVersion: 'bench',
    });
  };
  const server = createServer((req, res) => void handle(req, res));
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(0, '127.0.0.1', () => resolve());
  });
  const { port } = server.address() as AddressInfo;
  return {
    baseUrl: `http://127.0.0.1:${port}`,
    apiKey: FAKE_GEMINI_API_KEY,
    requests: () => answered,
    close: async () => {
      server.closeAllConnections();
      await new Promise<void>((resolve) => server.close(() => resolve()));
    },
  };
}

function send(res: ServerResponse, status: number, body: unknown): void {
  if (res.destroyed) return;
  res.writeHead(status, { 'content-type': 'application/json; charset=UTF-8' });
  res.end(JSON.stringify(body));
}
