import { createServer, type IncomingMessage, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';

/** A local HTTP server on a free loopback port: how the tests' fakes of outside services (Gemini, Google Ads) listen. */
export interface LoopbackServer {
  readonly baseUrl: string;
  /** Drops every connection (a held answer too) and stops listening. */
  close(): Promise<void>;
}

/**
 * Serves `handle` on 127.0.0.1 at a free port. A handler's failure is the handler's to answer:
 * wrap it (`(req, res) => handle(req, res).catch(() => res.destroy())`).
 *
 * @example
 * const server = await listenOnLoopback(async (req, res) => sendJson(res, 200, { echo: await readBody(req) }));
 * // ... GEMINI_BASE_URL: server.baseUrl ...
 * await server.close();
 */
export async function listenOnLoopback(handle: (req: IncomingMessage, res: ServerResponse) => void): Promise<LoopbackServer> {
  const server = createServer(handle);
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(0, '127.0.0.1', () => resolve());
  });
  const { port } = server.address() as AddressInfo;
  return {
    baseUrl: `http://127.0.0.1:${port}`,
    close: async () => {
      server.closeAllConnections();
      await new Promise<void>((resolve) => server.close(() => resolve()));
    },
  };
}

/** The request's body as UTF-8 text. */
export async function readBody(req: IncomingMessage): Promise<string> {
  const chunks: Buffer[] = [];
  for await (const chunk of req) chunks.push(chunk as Buffer);
  return Buffer.concat(chunks).toString('utf8');
}

/** A JSON answer, unless the client is gone. */
export function sendJson(res: ServerResponse, status: number, body: unknown): void {
  if (res.destroyed) return;
  res.writeHead(status, { 'content-type': 'application/json; charset=UTF-8' });
  res.end(JSON.stringify(body));
}
