import type { Router } from '@koa/router';
import type { Middleware } from 'koa';
import type { IncomingMessage, ServerResponse } from 'node:http';
import type { Logger } from '../log/logger.ts';
import type { RequestObserver } from './middleware/access-log.ts';
import { requestIdFor } from './middleware/request-id.ts';
import { API_RESPONSE_HEADERS } from './middleware/api-response-headers.ts';

/**
 * GET fast lanes: a poll of a run that this process holds in memory is answered before koa
 * builds a context, because koa's layers (context, a dozen async middleware, four routers)
 * cost the service more than half its throughput on that request (issue #14). A lane answers
 * only what it can answer exactly as the koa chain would, byte for byte; everything else —
 * a miss, a refusal, a query string, an unknown key — goes down the koa chain unchanged.
 */

/** What a lane found for a request. Nothing is sent yet: the rate limiter has to agree first. */
export interface FastLaneAnswer {
  /** The API key the request authenticated with: its rate-limit bucket pays. */
  readonly keyId: string;
  readonly status: 200 | 304;
  /** Header names and values, flat ([name, value, name, value…]), in the order the koa route sets them. */
  readonly headers: readonly string[];
  readonly body: string | undefined;
  /** The route template, as the koa router names it to metrics. */
  readonly route: string;
  /** Called once the answer is sent (what the koa path does on the way, e.g. counting the key lookup). */
  readonly onSent?: () => void;
}

/**
 * Answers a GET from memory, or returns undefined to leave it to the koa chain. A lane that
 * declines must leave no trace (no counter bumped, no token spent): the koa chain sees the
 * request as if the lane did not exist.
 */
export type FastLane = (path: string, request: IncomingMessage) => FastLaneAnswer | undefined;

/**
 * A before-routes middleware's share of the fast lane: spends the key's token and returns the
 * headers it adds, or undefined when it refuses (the koa chain then gives the refusal).
 */
export type FastLaneGate = (keyId: string) => readonly string[] | undefined;

const lanesOfRouters = new WeakMap<Router, FastLane>();
const gatesOfMiddleware = new WeakMap<Middleware, FastLaneGate>();

/** Gives the router a fast lane, which the app runs before koa when it mounts the router. */
export function withFastLane(router: Router, lane: FastLane): Router {
  lanesOfRouters.set(router, lane);
  return router;
}

export function fastLaneOf(router: Router): FastLane | undefined {
  return lanesOfRouters.get(router);
}

/** Declares what a before-routes middleware does for a request a fast lane answers. */
export function withFastLaneGate(middleware: Middleware, gate: FastLaneGate): Middleware {
  gatesOfMiddleware.set(middleware, gate);
  return middleware;
}

/**
 * The gate of the before-routes middleware, or undefined when the fast lane cannot stand in
 * for them: a middleware without a gate does something the lane would skip, and with two
 * gates the first could spend before the second refuses and the koa chain spends again.
 */
export function fastLaneGateFor(beforeRoutes: readonly Middleware[]): FastLaneGate | undefined {
  if (beforeRoutes.length === 0) return () => [];
  if (beforeRoutes.length > 1) return undefined;
  return gatesOfMiddleware.get(beforeRoutes[0]!);
}

export interface FastLaneRunnerOptions {
  readonly lanes: readonly FastLane[];
  readonly gate: FastLaneGate;
  readonly logger: Logger;
  readonly observeRequest?: RequestObserver;
}

type NodeHandler = (request: IncomingMessage, response: ServerResponse) => unknown;

/**
 * Wraps koa's request handler: GETs a lane answers are sent from here with the request id,
 * rate-limit headers, access-log line and metrics the koa middleware would give them; every
 * other request goes to `koa`.
 */
export function fastLaneHandler(options: FastLaneRunnerOptions, koa: NodeHandler): NodeHandler {
  const { lanes, gate, logger, observeRequest } = options;
  return (request, response) => {
    const url = request.url;
    // A query string, percent-encoding or anything but origin form is the koa chain's to read.
    if (request.method !== 'GET' || url === undefined || url.includes('?') || url.includes('%') || url[0] !== '/') return koa(request, response);
    const started = process.hrtime.bigint();
    let answer: FastLaneAnswer | undefined;
    try {
      for (const lane of lanes) {
        answer = lane(url, request);
        if (answer) break;
      }
    } catch {
      // The koa chain meets the same failure and answers it as a problem.
      answer = undefined;
    }
    const limitHeaders = answer && gate(answer.keyId);
    if (!answer || !limitHeaders) return koa(request, response);
    const incomingId = request.headers['x-request-id'];
    const requestId = requestIdFor(typeof incomingId === 'string' ? incomingId : '');
    response.writeHead(answer.status, ['X-Request-Id', requestId, ...limitHeaders, ...answer.headers, ...API_RESPONSE_HEADERS]);
    const durationMs = Number(process.hrtime.bigint() - started) / 1e6;
    observeRequest?.('GET', answer.route, answer.status, durationMs / 1000);
    if (logger.isLevelEnabled('info')) {
      logger.info({ method: 'GET', path: url, status: answer.status, duration_ms: Math.round(durationMs * 1000) / 1000, request_id: requestId }, 'http request');
    }
    answer.onSent?.();
    response.end(answer.body);
    return undefined;
  };
}
