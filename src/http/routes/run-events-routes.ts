import Router from '@koa/router';
import { PassThrough } from 'node:stream';
import { RunNotFoundError } from '../../../projections/runs/run-errors.ts';
import { RUNS_PROJECTION } from '../../../projections/runs/runs-projection.ts';
import { findRun, isTerminal } from '../../../projections/runs/run-view.ts';
import { authenticate, principalOf } from '../../auth/authenticate.ts';
import type { DomainEvent } from '../../events/catalogue/index.ts';
import { isUuid, type ApiContext } from './api-context.ts';
import { toRunStreamMessage } from './run-event-stream.ts';

const HEARTBEAT_MS = 15_000;

/**
 * GET /api/v1/runs/{runId}/events: the run's milestones as Server-Sent Events — queued,
 * started, each tool call, each action, and the end — for clients that would rather not
 * poll. Each SSE id is the event's stream sequence, so a reconnect with Last-Event-ID
 * resumes exactly after the last one received. The stream closes after the terminal
 * event; a reconnect after it answers 204 (which tells EventSource to stop).
 */
export function runEventsRouter(api: ApiContext, shutdown: AbortSignal): Router {
  const router = new Router();
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
    const resumeAfter = Number.isInteger(lastEventId) && lastEventId > 0 ? lastEventId : 0;
    if (isTerminal(run.status) && resumeAfter >= run.last_seq) {
      ctx.status = 204;
      return;
    }

    const body = new PassThrough();
    ctx.status = 200;
    ctx.set('Content-Type', 'text/event-stream; charset=utf-8');
    ctx.set('Cache-Control', 'no-cache, no-transform');
    ctx.set('X-Accel-Buffering', 'no');
    ctx.req.socket.setTimeout(0);
    ctx.body = body;
    body.write('retry: 3000\n\n');

    const controller = new AbortController();
    const end = () => controller.abort();
    ctx.req.once('close', end);
    shutdown.addEventListener('abort', end, { once: true });
    const heartbeat = setInterval(() => body.write(': keep-alive\n\n'), HEARTBEAT_MS);
    const filter = api.writeModel.subjects.filter(principal.workspaceId, run.account_id, '*');
    const from = Math.max(run.queued_seq, resumeAfter + 1);
    void (async () => {
      try {
        for await (const { seq, event } of api.writeModel.store.follow(filter, from, controller.signal)) {
          const message = toRunStreamMessage(event as DomainEvent, runId, api.config.publicBaseUrl);
          if (!message) continue;
          body.write(`id: ${seq}\nevent: ${message.name}\ndata: ${JSON.stringify({ seq, ...message.data })}\n\n`);
          if (message.terminal) break;
        }
      } catch (error) {
        api.logger.warn({ run_id: runId, err: error instanceof Error ? error.message : String(error) }, 'run event stream ended with an error');
      } finally {
        clearInterval(heartbeat);
        shutdown.removeEventListener('abort', end);
        controller.abort();
        body.end();
      }
    })();
  });
  return router;
}
