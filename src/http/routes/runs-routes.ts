import Router from '@koa/router';
import type { Context } from 'koa';
import { v7 as uuidv7 } from 'uuid';
import { AccountNotFoundError } from '../../../commands/errors.ts';
import { lastSeqOf } from '../../../commands/write-model.ts';
import { RunNotFoundError } from '../../../projections/runs/run-errors.ts';
import { RUNS_PROJECTION } from '../../../projections/runs/runs-projection.ts';
import { findRun, findRunActions, isTerminal, runUrl, toRunRepresentation, type RunRow } from '../../../projections/runs/run-view.ts';
import { authenticate, principalOf } from '../../auth/authenticate.ts';
import type { Principal } from '../../auth/scopes.ts';
import { requestFingerprint, validateIdempotencyKey } from '../idempotency/idempotency-store.ts';
import { readJsonBody } from '../json-body.ts';
import { WorkspaceQuotas } from '../quota/workspace-quotas.ts';
import { bodyValidator } from '../request-validation.ts';
import { isIdToken, isUuid, type ApiContext } from './api-context.ts';

/** Seconds a poller should wait before asking again while a run is not terminal. */
export const POLL_RETRY_AFTER_SECONDS = 15;
const TERMINAL_MAX_AGE_SECONDS = 86_400;

interface CreateRunBody {
  brief: string;
  project_id: string;
  auto_apply?: boolean;
}

interface CreationResponse extends Record<string, unknown> {
  id: string;
  object: 'run';
  status: 'queued';
  poll_url: string;
}

/** POST, GET and DELETE /api/v1/runs: the specification's run endpoints. */
export function runsRouter(api: ApiContext): Router {
  const router = new Router();
  const auth = authenticate(api.keys);
  const quotas = new WorkspaceQuotas(
    api.db,
    {
      runsPerHour: api.config.workspaceRunsPerHour,
      modelTokensPerDay: api.config.workspaceModelTokensPerDay,
      runTimeoutMs: api.config.runTimeoutMs,
    },
  );
  const validateCreateRun = bodyValidator<CreateRunBody>({
    type: 'object',
    additionalProperties: false,
    required: ['brief', 'project_id'],
    properties: {
      brief: { type: 'string', minLength: 1, maxLength: api.config.briefMaxLength, pattern: '\\S' },
      project_id: { type: 'string', minLength: 1, maxLength: 200 },
      auto_apply: { type: 'boolean' },
    },
  });

  const creationResponse = (runId: string): CreationResponse => ({
    id: runId,
    object: 'run',
    status: 'queued',
    poll_url: runUrl(api.config.publicBaseUrl, runId),
  });

  const queueRun = async (principal: Principal, body: CreateRunBody, runId: string, requestId: string): Promise<CreationResponse> => {
    if (!isIdToken(body.project_id)) throw new AccountNotFoundError(body.project_id);
    // Only a run that is actually queued spends quota: replays and refusals never reach here.
    await quotas.admit(principal.workspaceId, runId, () => api.writeModel.startRun({
      workspaceId: principal.workspaceId,
      accountId: body.project_id,
      runId,
      brief: body.brief,
      autoApply: body.auto_apply ?? false,
      keyId: principal.keyId,
      scope: principal.scope,
      meta: { actor: { kind: 'api_key', id: principal.keyId }, correlationId: runId },
    }));
    api.logger.info({ run_id: runId, project_id: body.project_id, request_id: requestId }, 'run queued');
    return creationResponse(runId);
  };

  const respondCreated = (ctx: Context, status: number, body: Record<string, unknown>, replayed: boolean): void => {
    ctx.status = status;
    ctx.set('Location', String(body.poll_url));
    if (replayed) ctx.set('Idempotent-Replayed', 'true');
    ctx.body = body;
  };

  /** A run of the caller's workspace, waiting for the read side when it is not there yet. */
  const locateRun = async (principal: Principal, runId: string): Promise<RunRow> => {
    if (!isUuid(runId)) throw new RunNotFoundError(runId);
    const row = await findRun(api.db, principal.workspaceId, runId);
    if (row) return row;
    await api.barrier.catchUp(RUNS_PROJECTION);
    const caughtUp = await findRun(api.db, principal.workspaceId, runId);
    if (!caughtUp) throw new RunNotFoundError(runId);
    return caughtUp;
  };

  router.post('/api/v1/runs', auth, async (ctx) => {
    const principal = principalOf(ctx);
    const body = validateCreateRun(await readJsonBody(ctx, api.config.bodyLimitBytes));
    const requestId = String(ctx.state.requestId ?? '');
    const header = ctx.get('idempotency-key');
    if (!header) {
      respondCreated(ctx, 202, await queueRun(principal, body, uuidv7(), requestId), false);
      return;
    }
    const idempotencyKey = validateIdempotencyKey(header);
    const claim = await api.idempotency.claim(principal.keyId, idempotencyKey, requestFingerprint(body), uuidv7());
    if (claim.kind === 'replay') {
      respondCreated(ctx, claim.status, claim.body, true);
      return;
    }
    try {
      // A takeover follows a crash of the first attempt: its run may already be queued.
      const alreadyQueued = claim.kind === 'takeover' && (await api.barrier.catchUp(RUNS_PROJECTION))
        ? await findRun(api.db, principal.workspaceId, claim.runId)
        : undefined;
      const response = alreadyQueued ? creationResponse(claim.runId) : await queueRun(principal, body, claim.runId, requestId);
      await api.idempotency.complete(principal.keyId, idempotencyKey, 202, response);
      respondCreated(ctx, 202, response, false);
    } catch (error) {
      await api.idempotency.release(principal.keyId, idempotencyKey).catch(() => undefined);
      throw error;
    }
  });

  router.get('/api/v1/runs/:runId', auth, async (ctx) => {
    const principal = principalOf(ctx);
    const runId = ctx.params.runId!;
    const cached = api.runCache.get(runId);
    if (cached && cached.workspaceId === principal.workspaceId) {
      sendTerminal(ctx, cached.body, cached.etag);
      return;
    }
    const row = await locateRun(principal, runId);
    const actions = await findRunActions(api.db, row.id, api.config.publicBaseUrl);
    const representation = toRunRepresentation(row, api.config.publicBaseUrl, actions);
    if (isTerminal(row.status)) {
      const body = JSON.stringify(representation);
      const etag = `"${row.id}-${row.last_seq}"`;
      api.runCache.set(runId, { workspaceId: row.workspace_id, body, etag });
      sendTerminal(ctx, body, etag);
      return;
    }
    ctx.set('Retry-After', String(POLL_RETRY_AFTER_SECONDS));
    ctx.set('Cache-Control', 'no-store');
    ctx.body = representation;
  });

  router.delete('/api/v1/runs/:runId', auth, async (ctx) => {
    const principal = principalOf(ctx);
    const row = await locateRun(principal, ctx.params.runId!);
    if (row.status !== 'canceled') {
      const result = await api.writeModel.cancelRun({
        workspaceId: principal.workspaceId,
        accountId: row.account_id,
        runId: row.id,
        knownStatus: row.status,
        meta: { actor: { kind: 'api_key', id: principal.keyId }, correlationId: row.id },
      });
      const seq = lastSeqOf(result);
      if (seq !== null) await api.barrier.reach(RUNS_PROJECTION, seq);
    }
    const canceled = (await findRun(api.db, principal.workspaceId, row.id)) ?? row;
    ctx.body = toRunRepresentation(canceled, api.config.publicBaseUrl, await findRunActions(api.db, row.id, api.config.publicBaseUrl));
  });

  return router;
}

function sendTerminal(ctx: Context, body: string, etag: string): void {
  ctx.set('ETag', etag);
  ctx.set('Cache-Control', `private, max-age=${TERMINAL_MAX_AGE_SECONDS}, immutable`);
  const presented = ctx.get('if-none-match');
  // If-None-Match uses the weak comparison (RFC 9110 §13.1.2): W/"x" matches "x".
  const opaque = (tag: string) => tag.trim().replace(/^W\//, '');
  if (presented && presented.split(',').some((tag) => tag.trim() === '*' || opaque(tag) === opaque(etag))) {
    ctx.status = 304;
    return;
  }
  ctx.type = 'application/json';
  ctx.body = body;
}
