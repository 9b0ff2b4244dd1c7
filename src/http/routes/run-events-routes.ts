import type { Router } from '@koa/router';
import { PassThrough } from 'node:stream';
import { RunNotFoundError } from '../../../projections/runs/run-errors.ts';
import { RUNS_PROJECTION } from '../../../projections/runs/runs-projection.ts';
import { findRun, isTerminal } from '../../../projections/runs/run-view.ts';
import type { DomainEvent } from '../../events/catalogue/index.ts';
import type { RawStoredMessage } from '../../event-store/event-store.ts';
import { streams } from '../../event-store/subjects.ts';
import { ref, requestIdHeader, responseRef } from '../openapi/openapi-helpers.ts';
import { mountRoutes } from '../route-table/mount-routes.ts';
import { defineRoute, type RouteDefinition } from '../route-table/route-definition.ts';
import type { ApiContext } from './api-context.ts';
import { RUN_ID } from './path-parameters.ts';
import { RUN_STREAM_EVENTS, toRunStreamMessage } from './run-event-stream.ts';
import { SubjectChains } from '../../events/subject-chains.ts';
import { SseStreamSlots } from './sse-stream-slots.ts';
import { ValidationError } from '../../errors/common-errors.ts';

const HEARTBEAT_MS = 15_000;
/** Reconnect delay the stream opens with. */
const RETRY_MS = 3000;
/** Reconnect delay sent when the server ends a stream at its lifetime: come back soon. */
const LIFETIME_RETRY_MS = 500;

/** Why the server ended a stream before the run's terminal event (a comment the client may log). */
const END_REASONS = {
  lifetime: 'stream lifetime reached; reconnect with Last-Event-ID',
  revoked: 'the API key was revoked',
  shutdown: 'the server is shutting down; reconnect with Last-Event-ID',
  unreadable: 'the event log could not be read (this server lost NATS, or it timed out); reconnect with Last-Event-ID',
} as const;
type EndReason = keyof typeof END_REASONS;

/** The `retry:` line after an end: none for a revoked key, the usual delay when the log could not be read, a short one otherwise. */
function retryAfterEnd(reason: EndReason): string {
  if (reason === 'revoked') return '';
  return `retry: ${reason === 'unreadable' ? RETRY_MS : LIFETIME_RETRY_MS}\n`;
}

interface StreamDeps {
  readonly api: ApiContext;
  readonly shutdown: AbortSignal;
}

export const streamRunEventsRoute = defineRoute<StreamDeps>()<{ last_event_id?: string }>({
  method: 'get',
  path: '/api/v1/runs/{runId}/events',
  operationId: 'streamRunEvents',
  tags: ['runs'],
  summary: 'Follow a run as Server-Sent Events',
  description:
    'The run’s milestones as Server-Sent Events, for clients that would rather not poll. Event names: ' +
    `${RUN_STREAM_EVENTS.map((name) => `\`${name}\``).join(', ')}. The stream opens with \`retry: ${RETRY_MS}\`, then sends, in order, ` +
    '`queued`, `started`, one `tool_called` per tool call, one `action_proposed` per action, and exactly one terminal event ' +
    '(`succeeded`, `failed` or `canceled`), after which the server closes the stream. Each event’s `id` is its stream sequence and its `data` is JSON ' +
    '(schemas `RunStream…Data`; `data.seq` repeats the `id`); comments (`: keep-alive`) are sent every 15 s. A reconnect with ' +
    '`Last-Event-ID` (or `?last_event_id=`, for clients that cannot set headers) resumes exactly after that event; a reconnect ' +
    'after the terminal event answers 204, which tells EventSource to stop. A run of another workspace is indistinguishable ' +
    'from a missing one (404). Bounds: one key holds at most `SSE_MAX_STREAMS_PER_KEY` open streams per server process (429 ' +
    '`too-many-streams` with `Retry-After` beyond); the server ends a stream after `SSE_MAX_LIFETIME_MS` with a comment and ' +
    `\`retry: ${LIFETIME_RETRY_MS}\`, and the client resumes with \`Last-Event-ID\`; a stream whose key is revoked ends within \`SSE_KEY_RECHECK_MS\` ` +
    `(a reconnect then answers 401); a stream the server can no longer read the event log for ends with a comment saying so and \`retry: ${RETRY_MS}\`. ` +
    'A stored message that is not a trustworthy event, or a replayed copy of one of the run’s events ' +
    '(it does not continue its subject’s hash chain), is skipped with a comment naming its code and an `id:` line.',
  access: 'read',
  backedBy: ['event-log', 'database'],
  pathParameters: { runId: RUN_ID },
  headers: ['LastEventId'],
  query: {
    last_event_id: {
      description: 'Same as `Last-Event-ID`, for clients that cannot set headers; the header wins when both are sent.',
      schema: { type: 'string', pattern: '^[0-9]{1,16}$' },
    },
  },
  queryMessages: { '/last_event_id': { pattern: 'must be the `id` of an event received on this stream (decimal digits)' } },
  responses: {
    '200': {
      description: 'The event stream; it ends after the run’s terminal event.',
      headers: {
        ...requestIdHeader,
        'Cache-Control': { description: 'Never cached or transformed.', required: true, schema: { type: 'string', const: 'no-cache, no-transform' } },
        'X-Accel-Buffering': { description: 'Tells a buffering reverse proxy (nginx) to pass events through at once.', schema: { type: 'string', const: 'no' } },
      },
      content: {
        'text/event-stream': {
          schema: {
            type: 'string',
            pattern: '^retry: [0-9]+\\n\\n',
            description: 'SSE text (`id:`, `event:`, `data:` lines, events separated by a blank line).',
          },
          'x-itemSchema': ref('RunStreamMessage'),
        },
      },
    },
    '204': {
      description: 'The run is terminal and `Last-Event-ID` is at or after its last event: nothing more will come.',
      headers: requestIdHeader,
    },
    '404': responseRef('RunNotFound'),
    '429': responseRef('TooManyStreams'),
  },
  handler: ({ api, shutdown }) => {
    const slots = new SseStreamSlots(api.config.sseMaxStreamsPerKey);
    return async (ctx, { principal, params, query }) => {
      const runId = params.runId!;
      let run = await findRun(api.db, principal.workspaceId, runId);
      if (!run) {
        await api.barrier.catchUp(RUNS_PROJECTION);
        run = await findRun(api.db, principal.workspaceId, runId);
      }
      if (!run) throw new RunNotFoundError(runId);
      // GET may already have shown this run's end from the live fold, ahead of the read model:
      // a client reconnecting after that end must get its 204, not a stream that never ends.
      if (!isTerminal(run.status) && api.runCache.get(runId)) {
        await api.barrier.catchUp(RUNS_PROJECTION);
        run = (await findRun(api.db, principal.workspaceId, runId)) ?? run;
      }
      const resumeAfter = resumePoint(ctx.get('last-event-id'), query.last_event_id);
      if (isTerminal(run.status) && resumeAfter >= run.last_seq) {
        ctx.status = 204;
        return;
      }
      const release = slots.acquire(principal.keyId, Math.ceil(RETRY_MS / 1000));
      const controller = new AbortController();
      const filter = api.subjects.filter(principal.workspaceId, run.account_id, '*');
      const queuedSeq = Number(run.queued_seq);
      // Read from the run's RunQueued even when resuming, so the chains are followed from their
      // start; what the client already received is not sent again.
      // The account subject from the run's RunQueued (the read model believed it there; a later
      // event when that one is no longer believed); its run and action subjects start during the run.
      const chains = new SubjectChains({ chainStartOf: (subject) => api.store.firstGenesisSeqOf(subject) }).anchorFrom(
        api.subjects.forAggregate(streams.account(principal.workspaceId, run.account_id)),
        queuedSeq,
      );
      const messages = api.store.followRaw(filter, queuedSeq, controller.signal)[Symbol.asyncIterator]();
      // The first message (the run's RunQueued) is read before the 200 is sent: a process that
      // cannot read the event log answers 503 with Retry-After, instead of a stream that opens
      // and ends seconds later.
      let first: IteratorResult<RawStoredMessage>;
      const abandoned = () => controller.abort();
      ctx.res.once('close', abandoned);
      try {
        first = await messages.next();
      } catch (error) {
        controller.abort();
        release();
        throw error; // the error handler answers a NATS failure 503 with Retry-After
      } finally {
        ctx.res.removeListener('close', abandoned);
      }

      const body = new PassThrough();
      ctx.status = 200;
      ctx.set('Content-Type', 'text/event-stream; charset=utf-8');
      ctx.set('Cache-Control', 'no-cache, no-transform');
      ctx.set('X-Accel-Buffering', 'no');
      ctx.req.socket.setTimeout(0);
      ctx.body = body;
      body.write(`retry: ${RETRY_MS}\n\n`);

      let endReason: EndReason | null = null;
      const end = (reason: EndReason | null) => {
        endReason ??= reason;
        controller.abort();
      };
      const onClose = () => end(null);
      const onShutdown = () => end('shutdown');
      // The response's 'close' is the client going away (or the response ending); checked
      // once more here because it may have happened while the run was looked up.
      ctx.res.once('close', onClose);
      if (ctx.res.destroyed || ctx.req.socket.destroyed) end(null);
      shutdown.addEventListener('abort', onShutdown, { once: true });
      if (shutdown.aborted) end('shutdown');
      const heartbeat = setInterval(() => body.write(': keep-alive\n\n'), HEARTBEAT_MS);
      const lifetime = setTimeout(() => end('lifetime'), api.config.sseMaxLifetimeMs);
      const keyCheck = setInterval(() => {
        api.keys.find(principal.keyId).then(
          (record) => {
            if (!record || record.revoked) end('revoked');
          },
          () => undefined, // Postgres unreachable: keep streaming; the next check decides.
        );
      }, api.config.sseKeyRecheckMs);

      /** Sends what `raw` shows the client; true once the stream is over (the run's end). */
      const send = async (raw: RawStoredMessage): Promise<boolean> => {
        const { result, unknownStart } = await chains.judge(api.store.admission.tryAdmit(raw));
        if (raw.seq <= resumeAfter) {
          // The client saw this far already; if that includes the end, the stream ends here too.
          return result.ok && !unknownStart && toRunStreamMessage(result.stored.event as DomainEvent, runId, api.config.publicBaseUrl)?.terminal === true;
        }
        if (!result.ok) {
          // `id:` alone moves the client's Last-Event-ID past it without dispatching an event.
          body.write(`: skipped a corrupt stored message (${result.corrupt.code})\nid: ${raw.seq}\n\n`);
          return false;
        }
        // A subject whose start the stream did not see holds nothing it shows.
        const message = unknownStart ? null : toRunStreamMessage(result.stored.event as DomainEvent, runId, api.config.publicBaseUrl);
        if (!message) return false;
        body.write(`id: ${raw.seq}\nevent: ${message.name}\ndata: ${JSON.stringify({ seq: raw.seq, ...message.data })}\n\n`);
        return message.terminal;
      };
      void (async () => {
        try {
          if (!first.done && !controller.signal.aborted && !(await send(first.value))) {
            for (let next = await messages.next(); !next.done; next = await messages.next()) {
              if (await send(next.value)) break;
            }
          }
        } catch (error) {
          // Said to the client too: a stream that just ends looks like a run that went quiet.
          if (!controller.signal.aborted) endReason ??= 'unreadable';
          api.logger.warn({ run_id: runId, err: error instanceof Error ? error.message : String(error) }, 'run event stream ended with an error');
        } finally {
          clearInterval(heartbeat);
          clearInterval(keyCheck);
          clearTimeout(lifetime);
          shutdown.removeEventListener('abort', onShutdown);
          ctx.res.removeListener('close', onClose);
          controller.abort();
          await messages.return?.(undefined).catch(() => undefined);
          release();
          if (endReason) body.write(`: ${END_REASONS[endReason]}\n${retryAfterEnd(endReason)}\n`);
          body.end();
        }
      })();
    };
  },
});

export const RUN_EVENT_ROUTES: readonly RouteDefinition<StreamDeps>[] = [streamRunEventsRoute];

/**
 * GET /api/v1/runs/{runId}/events: the run's milestones as Server-Sent Events — queued,
 * started, each tool call, each action, and the end — for clients that would rather not
 * poll. Each SSE id is the event's stream sequence, so a reconnect with Last-Event-ID
 * resumes exactly after the last one received. The stream closes after the terminal
 * event; a reconnect after it answers 204 (which tells EventSource to stop).
 *
 * Bounded: at most SSE_MAX_STREAMS_PER_KEY open streams per key in this process (429
 * beyond), each ended after SSE_MAX_LIFETIME_MS with a short `retry:` so the client
 * resumes, and ended when its key is revoked (re-checked every SSE_KEY_RECHECK_MS). A
 * stored message that is not a trustworthy event is skipped with a comment.
 */
export function runEventsRouter(api: ApiContext, shutdown: AbortSignal): Router {
  return mountRoutes(RUN_EVENT_ROUTES, { api, shutdown }, { limits: api.config, keys: api.keys });
}

const EVENT_ID = /^[0-9]{1,16}$/;

/**
 * Where a reconnect resumes: after `Last-Event-ID` (what EventSource sends back), else after
 * `?last_event_id=`; 0 for a first connection. The header is held to the query parameter's
 * rule: a value that is not an id this stream sent (`abc`, `1e1`, 20 digits) is refused rather
 * than read as 0 (a replay from the start) or as another id.
 *
 * @throws ValidationError
 */
function resumePoint(header: string, query: string | undefined): number {
  if (header !== '') return eventIdOf(header, 'Last-Event-ID');
  // The schema took 1 to 16 digits already; 16 of them can still be past 2^53 (no sequence of this stream).
  return query === undefined ? 0 : eventIdOf(query, 'last_event_id');
}

function eventIdOf(value: string, name: 'Last-Event-ID' | 'last_event_id'): number {
  if (!EVENT_ID.test(value) || !Number.isSafeInteger(Number(value))) {
    const message = `${name}: must be the \`id\` of an event received on this stream (decimal digits)`;
    throw new ValidationError(message, [{ pointer: `/${name}`, message }]);
  }
  return Number(value);
}

