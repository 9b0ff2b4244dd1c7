import { spawn } from 'node:child_process';
import { createServer, type IncomingMessage, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { fileURLToPath } from 'node:url';
import { FAKE_GEMINI_API_KEY, type FakeFunctionCall } from '../../test/support/fake-gemini/fake-gemini-server.ts';

/**
 * A stateless stand-in for Gemini's `generateContent`, for benchmarks that run many runs
 * at once. test/support's FakeGeminiServer plays one shared script in request order, so
 * concurrent runs would take each other's steps; here each answer depends only on the
 * request itself: the conversation's model turns so far decide whether the model calls a
 * tool again or answers in text. Every run therefore sees the same turns, whatever the
 * concurrency, and the server never runs out of steps.
 *
 * {@link startScriptedGeminiProcess} serves it from a process of its own, as Gemini is to the
 * service: parsing ever longer conversations then does not take the service's event loop.
 */
export interface ScriptedGeminiOptions {
  /** Tool calls per run, one per model turn, before the text answer. */
  readonly toolCalls: (body: GeminiRequestBody) => number;
  /** The call made on each tool turn. */
  readonly call: FakeFunctionCall;
  readonly text?: string;
}

/** Options a separate process can be given: tool calls per run as a number, or read from the brief's `[tools=N]` marker. */
export interface ScriptedGeminiProcessOptions {
  readonly toolCalls: number | 'from-brief';
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
  close(): Promise<void>;
}

/** The brief of a run (its first user turn), e.g. to pick the number of tool calls per run. */
export function briefOf(body: GeminiRequestBody): string {
  const first = body.contents?.find((c) => c.role === 'user');
  const part = first?.parts?.find((p) => typeof p.text === 'string');
  return typeof part?.text === 'string' ? part.text : '';
}

/** A brief asking the scripted model for `calls` tool calls (see `toolCalls: 'from-brief'`). */
export function briefWithTools(brief: string, calls: number): string {
  return `${brief} [tools=${calls}]`;
}

export function toolCallsOfBrief(brief: string): number {
  return Number(/\[tools=(\d+)\]/.exec(brief)?.[1] ?? 0);
}

export async function startScriptedGemini(options: ScriptedGeminiOptions): Promise<ScriptedGemini> {
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
    close: async () => {
      server.closeAllConnections();
      await new Promise<void>((resolve) => server.close(() => resolve()));
    },
  };
}

const OPTIONS_ENV = 'SCRIPTED_GEMINI_OPTIONS';
const LISTENING = 'scripted gemini listening on ';

function fromProcessOptions(options: ScriptedGeminiProcessOptions): ScriptedGeminiOptions {
  const { toolCalls } = options;
  return { ...options, toolCalls: toolCalls === 'from-brief' ? (body) => toolCallsOfBrief(briefOf(body)) : () => toolCalls };
}

/** The scripted model in a child process (this file run as a script); closed with the returned `close`. */
export async function startScriptedGeminiProcess(options: ScriptedGeminiProcessOptions): Promise<ScriptedGemini> {
  const child = spawn(process.execPath, [fileURLToPath(import.meta.url)], {
    env: { PATH: process.env.PATH, [OPTIONS_ENV]: JSON.stringify(options) },
    stdio: ['ignore', 'pipe', 'inherit'],
  });
  const exited = new Promise<void>((resolve) => child.once('exit', () => resolve()));
  const baseUrl = await new Promise<string>((resolve, reject) => {
    let out = '';
    child.stdout!.setEncoding('utf8');
    child.stdout!.on('data', (chunk: string) => {
      out += chunk;
      const line = out.split('\n').find((l) => l.startsWith(LISTENING));
      if (line) resolve(line.slice(LISTENING.length).trim());
    });
    void exited.then(() => reject(new Error(`the scripted Gemini process exited before listening: ${out}`)));
  });
  return {
    baseUrl,
    apiKey: FAKE_GEMINI_API_KEY,
    close: async () => {
      if (child.exitCode === null && child.signalCode === null) child.kill('SIGTERM');
      await exited;
    },
  };
}

function send(res: ServerResponse, status: number, body: unknown): void {
  if (res.destroyed) return;
  res.writeHead(status, { 'content-type': 'application/json; charset=UTF-8' });
  res.end(JSON.stringify(body));
}

if (process.argv[1] === fileURLToPath(import.meta.url)) {
  const gemini = await startScriptedGemini(fromProcessOptions(JSON.parse(process.env[OPTIONS_ENV] ?? '{}') as ScriptedGeminiProcessOptions));
  process.once('SIGTERM', () => void gemini.close().then(() => process.exit(0)));
  process.stdout.write(`${LISTENING}${gemini.baseUrl}\n`);
}
