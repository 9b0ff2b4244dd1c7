import { createServer, type IncomingMessage, type ServerResponse } from 'node:http';
import type { AddressInfo, Socket } from 'node:net';
import { v7 as uuidv7 } from 'uuid';
import type Koa from 'koa';
import type { Logger } from '../log/logger.ts';
import { problemTypeUri } from './problem-response.ts';
import { PROBLEM_CATALOGUE } from './problems/problem-catalogue.ts';

/** A request line longer than this (method, URI, version) is answered 414 uri-too-long. */
export const MAX_REQUEST_LINE_BYTES = 8 * 1024;

export interface HttpServer {
  readonly port: number;
  readonly url: string;
  /** Stops gracefully; resolves once every connection is closed. Idempotent. */
  stop(graceMs: number): Promise<void>;
}

export interface HttpServerOptions {
  readonly host: string;
  readonly port: number;
  readonly logger: Logger;
  /** Origin of problem `type` URIs, for the errors node answers before koa sees a request. */
  readonly publicBaseUrl?: string;
}

/** What node's HTTP parser refuses before any middleware runs, as our problem types, with what to send instead. */
const HEADERS_TOO_LARGE = {
  reason: 'Request Header Fields Too Large',
  type: 'headers-too-large',
  detail: 'The request line and headers exceed 16 KiB; send fewer or shorter headers.',
} as const;
const URI_TOO_LONG = {
  reason: 'URI Too Long',
  type: 'uri-too-long',
  detail: `The request line exceeds ${MAX_REQUEST_LINE_BYTES / 1024} KiB; send a shorter URI (no endpoint takes a query that long).`,
} as const;
const MALFORMED = { reason: 'Bad Request', type: 'malformed-request', detail: 'The request is not valid HTTP/1.1.' } as const;

/**
 * Which problem a parser error is. Node's parser has no "URI too long" of its own: it counts
 * the request line toward the header section's 16 KiB (HPE_HEADER_OVERFLOW). The bytes it
 * refused tell the two apart: a request line alone over MAX_REQUEST_LINE_BYTES is a URI
 * too long (414), anything else over the limit is the headers (431).
 */
function parserProblem(error: Error & { code?: string; rawPacket?: unknown }) {
  if (error.code !== 'HPE_HEADER_OVERFLOW') return MALFORMED;
  const packet = Buffer.isBuffer(error.rawPacket) ? error.rawPacket : undefined;
  if (!packet) return HEADERS_TOO_LARGE;
  const lineEnd = packet.indexOf('\r\n');
  return (lineEnd === -1 ? packet.length : lineEnd) > MAX_REQUEST_LINE_BYTES ? URI_TOO_LONG : HEADERS_TOO_LARGE;
}

/**
 * Answers a request node's parser refused (oversized headers or URI, broken HTTP) with an RFC
 * 9457 problem like every other error, instead of node's bare status line.
 */
function answerClientError(error: Error & { code?: string }, socket: Socket, publicBaseUrl: string, answering: Exchange | undefined): void {
  if (error.code === 'ECONNRESET' || !socket.writable) {
    socket.destroy();
    return;
  }
  if (answering?.req.complete) {
    // Bytes after a request read in full and still being answered (pipelined junk): that request
    // may have run, and its answer is owed. A 400 written now would take its place on the wire,
    // so the connection is closed after it instead (once: the parser reports each further chunk).
    // A request whose own body broke is answered 400 below: a handler reading that body would
    // wait for it for ever (docs/api.md says what this leaves open).
    if (!closingAfterAnswer.has(socket)) {
      closingAfterAnswer.add(socket);
      answering.res.shouldKeepAlive = false;
      answering.res.once('close', () => socket.destroySoon());
    }
    return;
  }
  const { status, reason, requestId, body } = problemOf(parserProblem(error), publicBaseUrl);
  socket.end(
    `HTTP/1.1 ${status} ${reason}\r\nContent-Type: application/problem+json\r\nContent-Length: ${Buffer.byteLength(body)}\r\n` +
      `X-Request-Id: ${requestId}\r\nConnection: close\r\n\r\n${body}`,
  );
}

/** Connections to be closed once the answer under way is written (see answerClientError). */
const closingAfterAnswer = new WeakSet<Socket>();

/** A request and the response being written for it. */
interface Exchange {
  readonly req: IncomingMessage;
  readonly res: ServerResponse;
}

/** A refusal of the edge as a problem document, with a request id of its own (no middleware ran). */
function problemOf(refused: typeof HEADERS_TOO_LARGE | typeof URI_TOO_LONG | typeof MALFORMED, publicBaseUrl: string) {
  const problem = { ...refused, ...PROBLEM_CATALOGUE[refused.type] };
  const requestId = uuidv7();
  const body = JSON.stringify({
    type: problemTypeUri(publicBaseUrl, problem.type),
    title: problem.title,
    status: problem.status,
    detail: refused.detail,
    instance: '',
    request_id: requestId,
  });
  return { status: problem.status, reason: problem.reason, requestId, body };
}

/**
 * Node's parser lets a request line through up to the header section's 16 KiB; the documented
 * limit is MAX_REQUEST_LINE_BYTES. Checked before any route (the fast lanes too), so every
 * request past it gets the same 414 as one node refused.
 */
function requestLineTooLong(req: IncomingMessage): boolean {
  const url = req.url ?? '';
  // Method, URI and version, with their two spaces: the URI is ASCII on the wire (node keeps any other byte as one latin1 character).
  return (req.method ?? '').length + 1 + url.length + ' HTTP/1.1'.length > MAX_REQUEST_LINE_BYTES;
}

function answerUriTooLong(res: ServerResponse, publicBaseUrl: string): void {
  const { status, requestId, body } = problemOf(URI_TOO_LONG, publicBaseUrl);
  res.shouldKeepAlive = false;
  res.writeHead(status, { 'Content-Type': 'application/problem+json', 'Content-Length': Buffer.byteLength(body), 'X-Request-Id': requestId });
  res.end(body);
}

/**
 * Listens with `app` and returns a handle whose `stop` drains in-flight requests
 * (up to a grace period) instead of cutting them off, so deploys lose no requests.
 */
export async function startHttpServer(app: Koa, options: HttpServerOptions): Promise<HttpServer> {
  const { logger } = options;
  const server = createServer();
  const inFlight = new Set<ServerResponse>();
  /** The exchange under way on each connection, for a parser error that follows its request. */
  const answering = new WeakMap<Socket, Exchange>();
  let stopping: Promise<void> | undefined;

  // Registered before koa's handler so a request is tracked before any of its code runs.
  server.on('request', (req: IncomingMessage, res: ServerResponse) => {
    inFlight.add(res);
    const socket = req.socket;
    answering.set(socket, { req, res });
    if (stopping) res.shouldKeepAlive = false;
    res.once('close', () => {
      inFlight.delete(res);
      if (answering.get(socket)?.res === res) answering.delete(socket);
      // The socket only counts as idle once node has finished with the response.
      if (stopping) setImmediate(() => server.closeIdleConnections());
    });
  });
  const handle = app.callback();
  server.on('request', (req: IncomingMessage, res: ServerResponse) => {
    if (requestLineTooLong(req)) answerUriTooLong(res, options.publicBaseUrl ?? '');
    else void handle(req, res);
  });
  server.on('clientError', (error: Error & { code?: string }, socket: Socket) => answerClientError(error, socket, options.publicBaseUrl ?? '', answering.get(socket)));

  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(options.port, options.host, () => {
      server.off('error', reject);
      resolve();
    });
  });
  const { port } = server.address() as AddressInfo;
  const url = `http://${urlHost(options.host)}:${port}`;
  logger.info({ url }, 'http server listening');

  return {
    port,
    url,
    stop(graceMs: number): Promise<void> {
      stopping ??= new Promise<void>((resolve) => {
        logger.info({ in_flight: inFlight.size, grace_ms: graceMs }, 'http server stopping');
        // Responses not yet started announce `Connection: close`, so clients do not reuse a dying socket.
        for (const res of inFlight) if (!res.headersSent) res.shouldKeepAlive = false;
        const deadline = setTimeout(() => {
          logger.warn({ in_flight: inFlight.size }, 'grace period over; closing remaining connections');
          server.closeAllConnections();
        }, graceMs);
        server.close(() => {
          clearTimeout(deadline);
          logger.info('http server stopped');
          resolve();
        });
        server.closeIdleConnections();
      });
      return stopping;
    },
  };
}

/** Wildcard bind addresses are not dialable everywhere; the URL points at loopback instead. */
function urlHost(host: string): string {
  if (host === '0.0.0.0' || host === '') return '127.0.0.1';
  if (host === '::') return '[::1]';
  return host.includes(':') ? `[${host}]` : host;
}
