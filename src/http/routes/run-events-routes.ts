import Router from '@koa/router';
import { PassThrough } from 'node:stream';
import { RunNotFoundError } from '../../../projections/runs/run-errors.ts';
import { RUNS_PROJECTION } from '../../../projections/runs/runs-projection.ts';
import { findRun, isTerminal } from '../../../projections/runs/run-view.ts';
import { authenticate, principalOf } from '../../auth/authenticate.ts';
import { admitRawEvent } from '../../events/admit-raw-event.ts';
import { isUuid, type ApiContext } from './api-context.ts';
import { toRunStreamMessage } from './run-event-stream.ts';
import { SseStreamSlots } from './sse-stream-slots.ts';

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
} as const;
type EndReason = keyof typeof END_REASONS;

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
  const router = new Router();
  const slots = new SseStreamSlots(api.config.sseMaxStreamsPerKey);
  router.get('/api/v1/runs/:runId/events', authenticate(api.keys), async (ctx) => {
    const principal = principalOf(ctx);
    const runId = ctx.params.runId!;
    if (!isUuid(runId)) throw new RunNotFoundError(runId);
    let run = await findRun(api.db, principal.workspaceId, runId);
    if (!run) {
      await api.barrier.catchUp(RUNS_PROJECTION);
      run = await findRun(api.db, principal.workspaceId, runId);
    }
    if (!run) throw new RunNotFoundError(runId);
    const lastEventId = Number(ctx.get('last-event-id') || ctx.query.last_event_id || 0);
    const resumeAfter = Number.isSafeInteger(lastEventId) && lastEventId > 0 ? lastEventId : 0;
    if (isTerminal(run.status) && resumeAfter >= run.last_seq) {
      ctx.status = 204;
      return;
    }
    const release = slots.acquire(principal.keyId, Math.ceil(RETRY_MS / 1000));

    const body = new PassThrough();
    ctx.status = 200;
    ctx.set('Content-Type', 'text/event-stream; charset=utf-8');
    ctx.set('Cache-Control', 'no-cache, no-transform');
    ctx.set('X-Accel-Buffering', 'no');
    ctx.req.socket.setTimeout(0);
    ctx.body = body;
    body.write(`retry: ${RETRY_MS}\n\n`);

    const controller = new AbortController();
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

    const filter = api.writeModel.subjects.filter(principal.workspaceId, run.account_id, '*');
    const from = Math.max(Number(run.queued_seq), resumeAfter + 1);
    void (async () => {
      try {
        for await (const raw of api.writeModel.store.followRaw(filter, from, controller.signal)) {
          const admitted = admitRawEvent(api.writeModel.store.admission, raw);
          if (admitted.kind === 'corrupt') {
            // `id:` alone moves the client's Last-Event-ID past it without dispatching an event.
            body.write(`: skipped a corrupt stored message (${admitted.code})\nid: ${raw.seq}\n\n`);
            continue;
          }
          const message = toRunStreamMessage(admitted.event, runId, api.config.publicBaseUrl);
          if (!message) continue;
          body.write(`id: ${raw.seq}\nevent: ${message.name}\ndata: ${JSON.stringify({ seq: raw.seq, ...message.data })}\n\n`);
          if (message.terminal) break;
        }
      } catch (error) {
        api.logger.warn({ run_id: runId, err: error instanceof Error ? error.message : String(error) }, 'run event stream ended with an error');
      } finally {
        clearInterval(heartbeat);
        clearInterval(keyCheck);
        clearTimeout(lifetime);
        shutdown.removeEventListener('abort', onShutdown);
        ctx.res.removeListener('close', onClose);
        controller.abort();
        release();
        if (endReason) body.write(`: ${END_REASONS[endReason]}\n${endReason === 'revoked' ? '' : `retry: ${LIFETIME_RETRY_MS}\n`}\n`);
        body.end();
      }
    })();
  });
  return router;
}
