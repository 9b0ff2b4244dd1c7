import type { Router } from '@koa/router';
import type { Context } from 'koa';
import { fastUuidV7 as uuidv7 } from '../fast-uuid-v7.ts';
import { AccountNotFoundError, RunNotCancelableError } from '../../../commands/errors.ts';
import { ServiceUnavailableError } from '../../errors/common-errors.ts';
import { lastSeqOf } from '../../../commands/shared/handle.ts';
import { accountDecider } from '../../../commands/account/account-decider.ts';
import { RECENT_RUN_IDS } from '../../../commands/account/account-state.ts';
import { loadAccount } from '../../../commands/queries.ts';
import { RunNotFoundError } from '../../../projections/runs/run-errors.ts';
import { RUNS_PROJECTION } from '../../../projections/runs/runs-projection.ts';
import { findRun, findRunActions, isTerminal, runUrl, toRunRepresentation, type RunRow } from '../../../projections/runs/run-view.ts';
import { toActionRepresentation, type ActionRepresentation } from '../representations/action-representation.ts';
import type { Principal } from '../../auth/scopes.ts';
import { idempotencyKeyOf, requestFingerprint } from '../idempotency/idempotency-store.ts';
import { TakeoverUndecidedError } from '../idempotency/idempotency-errors.ts';
import { headerRef, json, problem, ref, requestIdHeader, responseRef } from '../openapi/openapi-helpers.ts';
import { WorkspaceQuotas } from '../quota/workspace-quotas.ts';
import { mountRoutes } from '../route-table/mount-routes.ts';
import { defineRoute, koaPath, type RouteDefinition } from '../route-table/route-definition.ts';
import { cachedPrincipal } from '../../auth/authenticate.ts';
import { withFastLane, type FastLane } from '../fast-lane.ts';
import type { LiveRun } from '../../runtime/live-runs.ts';
import { isIdToken, type ApiContext } from './api-context.ts';
import type { CachedRun, TerminalRunCache } from './terminal-run-cache.ts';
import { RUN_ID } from './path-parameters.ts';

/** Seconds a poller should wait before asking again while a run is not terminal. */
export const POLL_RETRY_AFTER_SECONDS = 15;
const TERMINAL_MAX_AGE_SECONDS = 86_400;

interface CreateRunBody {
  brief: string;
  project_id: string;
  auto_apply: boolean;
}

interface CreationResponse extends Record<string, unknown> {
  id: string;
  object: 'run';
  status: 'queued';
  poll_url: string;
}

const route = defineRoute<ApiContext>();

/** The run's actions as the one Action representation. */
async function runActions(api: ApiContext, runId: string): Promise<ActionRepresentation[]> {
  return (await findRunActions(api.db, runId)).map((action) => toActionRepresentation(action, action.account_id, api.config.publicBaseUrl));
}

/** A run of the caller's workspace, waiting for the read side when it is not there yet. */
async function findRunRow(api: ApiContext, principal: Principal, runId: string): Promise<RunRow> {
  const row = await findRun(api.db, principal.workspaceId, runId);
  if (row) return row;
  await api.barrier.catchUp(RUNS_PROJECTION);
  const caughtUp = await findRun(api.db, principal.workspaceId, runId);
  if (!caughtUp) throw new RunNotFoundError(runId);
  return caughtUp;
}

type LocatedRun = { readonly kind: 'row'; readonly row: RunRow } | { readonly kind: 'live'; readonly run: LiveRun };

/**
 * Like {@link findRunRow}, for GET: a run missing from Postgres may be one another request
 * created a moment ago, which the live follower folds within a millisecond or two of its
 * append, usually well before the projector commits it.
 */
async function locateRun(api: ApiContext, principal: Principal, runId: string): Promise<LocatedRun> {
  const row = await findRun(api.db, principal.workspaceId, runId);
  if (row) return { kind: 'row', row };
  if (api.liveRuns && (await api.liveRuns.catchUp())) {
    const live = api.liveRuns.get(runId);
    if (live && live.row.workspace_id === principal.workspaceId) return { kind: 'live', run: live };
  }
  return { kind: 'row', row: await findRunRow(api, principal, runId) };
}

/** The terminal run's response and ETag, as GET serves and caches them. */
function terminalResponse(row: RunRow, publicBaseUrl: string, actions: readonly ActionRepresentation[]): { body: string; etag: string } {
  return { body: JSON.stringify(toRunRepresentation(row, publicBaseUrl, actions)), etag: `"${row.id}-${row.last_seq}"` };
}

/**
 * Puts a run the live follower saw end into the terminal-run cache, so its first poll after
 * the end costs no database round trip either.
 *
 * @example
 * ```ts
 * new RunStateFollower({ ..., onTerminal: (run) => cacheTerminalRun(runCache, run, config.publicBaseUrl) });
 * ```
 */
export function cacheTerminalRun(cache: TerminalRunCache, run: LiveRun, publicBaseUrl: string): void {
  const actions = run.actions.map((action) => toActionRepresentation(action, action.account_id, publicBaseUrl));
  cache.set(run.row.id, { workspaceId: run.row.workspace_id, ...terminalResponse(run.row, publicBaseUrl, actions) });
}

/** 200 with the run: cacheable and with an ETag once terminal, with Retry-After before. */
function sendRun(ctx: Context, api: ApiContext, row: RunRow, actions: readonly ActionRepresentation[]): void {
  if (isTerminal(row.status)) {
    const { body, etag } = terminalResponse(row, api.config.publicBaseUrl, actions);
    api.runCache.set(row.id, { workspaceId: row.workspace_id, body, etag });
    sendTerminal(ctx, body, etag);
    return;
  }
  ctx.set('Retry-After', String(POLL_RETRY_AFTER_SECONDS));
  ctx.set('Cache-Control', 'no-store');
  ctx.body = toRunRepresentation(row, api.config.publicBaseUrl, actions);
}

export const createRunRoute = route<Record<string, never>, CreateRunBody>({
  method: 'post',
  path: '/api/v1/runs',
  operationId: 'createRun',
  tags: ['runs'],
  summary: 'Start a run',
  description:
    'Queues a run of the brief on the account and answers at once with 202 and the poll URL. One run per account at a time: ' +
    'a second one while a run is queued or running answers 409 `run-in-progress`. Read-scoped keys may start runs; such a run ' +
    'has its write tools removed and always ends with `actions: []`. With `Idempotency-Key` (scoped to the API key, kept 24 hours) ' +
    'a retry replays the original 202 with `Idempotent-Replayed: true`; the same key with another body answers 422 (bodies are ' +
    'compared after defaults are filled in: spelling out `"auto_apply": false` is the same request), and a retry ' +
    'while the first request is still processing answers 409 `idempotent-request-in-progress` with `Retry-After`. ' +
    'To know at once when the run ends, follow GET /api/v1/runs/{runId}/events instead of polling.',
  access: 'read',
  backedBy: ['event-log', 'database'],
  headers: ['IdempotencyKey'],
  body: {
    component: 'CreateRunRequest',
    required: true,
    description: (limits) => `Unknown members are refused (422). The body is at most ${limits.bodyLimitBytes} bytes (413 beyond).`,
    schema: (limits) => ({
      type: 'object',
      additionalProperties: false,
      required: ['brief', 'project_id'],
      properties: {
        brief: {
          type: 'string',
          minLength: 1,
          maxLength: limits.briefMaxLength,
          pattern: '\\S',
          description: 'Plain-English task for the agent; must contain a non-space character; at most BRIEF_MAX_LENGTH characters.',
        },
        project_id: { type: 'string', minLength: 1, maxLength: 200, description: 'The account the run works on (an `id` from GET /api/v1/accounts).' },
        auto_apply: { type: 'boolean', default: false, description: 'Lets the safe-apply policy apply bounded, low-risk changes.' },
      },
    }),
    messages: { '/project_id': { minLength: 'must not be empty; send an account `id` from GET /api/v1/accounts' } },
  },
  responses: {
    '202': {
      description: 'Run queued (or, with `Idempotent-Replayed: true`, the replay of the original response).',
      headers: { ...requestIdHeader, Location: headerRef('Location'), 'Idempotent-Replayed': headerRef('IdempotentReplayed') },
      content: json(ref('RunCreated')),
    },
    '400': responseRef('BadRequest'),
    '404': {
      description: 'No account `project_id` in the key’s workspace (`account-not-found`); another workspace’s account is indistinguishable.',
      headers: requestIdHeader,
      content: problem(),
    },
    '409': {
      description:
        'Another run is queued or running on the account (`run-in-progress`, with `active_run_id`), or a request with the same ' +
        'Idempotency-Key is still being processed (`idempotent-request-in-progress`, with `Retry-After`).',
      headers: { ...requestIdHeader, 'Retry-After': headerRef('RetryAfterOptional') },
      content: problem(),
    },
    '422': {
      description:
        'The body breaks the schema (`validation-error`, with `errors[]`), the query has a parameter (it takes none), or the ' +
        'Idempotency-Key was first used with another body (`idempotency-key-reused`).',
      headers: requestIdHeader,
      content: problem(),
    },
    '429': {
      description:
        'Over the request rate (`rate-limited`, with `policy`), or a workspace quota is used up (`quota-exceeded`, with `quota`: ' +
        '`runs_per_hour` or `model_tokens_per_day`, `limit`, `used` and `resets_at`). Retry after `Retry-After` seconds.',
      headers: { ...requestIdHeader, 'Retry-After': headerRef('RetryAfter') },
      content: problem(),
    },
  },
  handler: (api) => {
    const quotas = new WorkspaceQuotas(
      api.db,
      {
        runsPerHour: api.config.workspaceRunsPerHour,
        modelTokensPerDay: api.config.workspaceModelTokensPerDay,
      },
    );

    const creationResponse = (runId: string): CreationResponse => ({
      id: runId,
      object: 'run',
      status: 'queued',
      poll_url: runUrl(api.config.publicBaseUrl, runId),
    });

    const queueRun = async (principal: Principal, body: CreateRunBody, runId: string, requestId: string): Promise<CreationResponse> => {
      if (!isIdToken(body.project_id)) throw new AccountNotFoundError(body.project_id);
      // The token quota reads usage from the read model; a run end GET already showed from the
      // live fold must count, so wait for the projection to hold it (only while it may not).
      const endAhead = api.config.workspaceModelTokensPerDay > 0 ? api.liveRuns?.endAhead(principal.workspaceId) : undefined;
      if (endAhead !== undefined && (await api.barrier.reach(RUNS_PROJECTION, endAhead))) api.liveRuns?.settled(principal.workspaceId, endAhead);
      // Having waited for the read model to hold a run's end, the quota must read it, not an earlier read.
      const fresh = endAhead !== undefined;
      // Only a run that is actually queued spends quota: replays and refusals never reach here.
      await quotas.admit(principal.workspaceId, runId, () => api.commands.handle(accountDecider, {
        type: 'StartRun',
        workspaceId: principal.workspaceId,
        accountId: body.project_id,
        runId,
        brief: body.brief,
        autoApply: body.auto_apply ?? false,
        keyId: principal.keyId,
        scope: principal.scope,
        meta: { actor: { kind: 'api_key', id: principal.keyId }, correlationId: runId },
      }), (queued) => queued.appended.at(-1)?.seq, { fresh });
      api.logger.info({ run_id: runId, project_id: body.project_id, request_id: requestId }, 'run queued');
      return creationResponse(runId);
    };

    /**
     * Whether the attempt a takeover follows (one that crashed, or whose append's outcome was
     * unknown) queued its run. The account remembers the ids of its last RECENT_RUN_IDS runs:
     * the write model tells at once, with no wait for the read model, unless the account may
     * have queued that many runs since (then only the caught-up read model tells). Not caught up:
     * the claim is kept, so a retry takes it over again with the same run id instead of queueing
     * a second run. A run queued but not remembered yet (a replica behind) is found by the
     * decider anyway: the append expects the account's last sequence and reloads on conflict.
     */
    const queuedBefore = async (principal: Principal, accountId: string, runId: string): Promise<boolean> => {
      if (!isIdToken(accountId)) return false;
      const account = (await loadAccount(api.aggregates, principal.workspaceId, accountId)).state;
      if (account.activeRun?.runId === runId || account.recentRunIds.includes(runId)) return true;
      // Fewer runs than it remembers: the run was never queued (a replica behind is the decider's to catch).
      if (account.recentRunIds.length < RECENT_RUN_IDS) return false;
      if (!(await api.barrier.catchUp(RUNS_PROJECTION))) throw new TakeoverUndecidedError();
      return (await findRun(api.db, principal.workspaceId, runId)) !== undefined;
    };

    const respondCreated = (ctx: Context, status: number, body: Record<string, unknown>, replayed: boolean): void => {
      ctx.status = status;
      ctx.set('Location', String(body.poll_url));
      if (replayed) ctx.set('Idempotent-Replayed', 'true');
      ctx.body = body;
    };

    return async (ctx, request) => {
      const { principal } = request;
      const body = await request.body();
      const requestId = String(ctx.state.requestId ?? '');
      const idempotencyKey = idempotencyKeyOf(ctx.headers);
      if (idempotencyKey === null) {
        respondCreated(ctx, 202, await queueRun(principal, body, uuidv7(), requestId), false);
        return;
      }
      const claim = await api.idempotency.claim(principal.keyId, idempotencyKey, requestFingerprint(body), uuidv7());
      if (claim.kind === 'replay') {
        respondCreated(ctx, claim.status, claim.body, true);
        return;
      }
      try {
        const alreadyQueued = claim.kind === 'takeover' && (await queuedBefore(principal, body.project_id, claim.runId));
        const response = alreadyQueued ? creationResponse(claim.runId) : await queueRun(principal, body, claim.runId, requestId);
        await api.idempotency.complete(claim.held, 202, response);
        respondCreated(ctx, 202, response, false);
      } catch (error) {
        // Undecided: the claim is kept as taken, so the retry after its lease decides again with the same run id.
        if (!(error instanceof TakeoverUndecidedError)) await api.idempotency.giveUp(claim.held, error).catch(() => undefined);
        throw error;
      }
    };
  },
});

export const getRunRoute = route({
  method: 'get',
  path: '/api/v1/runs/{runId}',
  operationId: 'getRun',
  tags: ['runs'],
  summary: 'Poll a run',
  description:
    `While the run is \`queued\` or \`running\` the response carries \`Retry-After: ${POLL_RETRY_AFTER_SECONDS}\` and \`Cache-Control: no-store\`; pollers ` +
    'should honour it and stop once the status is terminal; a client that wants to know at once follows GET /api/v1/runs/{runId}/events instead. ' +
    'A terminal run never changes: its response has an `ETag`, ' +
    '`Cache-Control: private, max-age=…` and no `Retry-After`, and `If-None-Match` with that ETag answers 304. ' +
    'A run of another workspace is indistinguishable from a missing one (404).',
  access: 'read',
  backedBy: ['database', 'event-log'],
  pathParameters: { runId: RUN_ID },
  headers: ['IfNoneMatch'],
  responses: {
    '200': {
      description: 'The run.',
      headers: {
        ...requestIdHeader,
        'Retry-After': {
          description: 'Seconds to wait before polling again; present only while the run is `queued` or `running`.',
          schema: { type: 'string', const: String(POLL_RETRY_AFTER_SECONDS) },
        },
        ETag: headerRef('ETagOptional'),
        'Cache-Control': {
          description: '`no-store` while the run is not terminal; `private, max-age=<seconds>, immutable` once it is.',
          required: true,
          schema: { type: 'string', pattern: '^(no-store|private, max-age=[0-9]+(, immutable)?)$' },
        },
      },
      content: json(ref('Run')),
    },
    '304': {
      description: 'The terminal run is unchanged since the ETag in `If-None-Match`; no body.',
      headers: { ...requestIdHeader, ETag: headerRef('ETag'), 'Cache-Control': headerRef('TerminalCacheControl') },
    },
    '404': responseRef('RunNotFound'),
  },
  handler: (api) => {
    const liveBodies = liveRunBodies(api);
    return async (ctx, { principal, params }) => {
      const runId = params.runId!;
      const cached = api.runCache.get(runId);
      if (cached && cached.workspaceId === principal.workspaceId) {
        sendTerminal(ctx, cached.body, cached.etag);
        return;
      }
      // A queued or running run this process follows: no database round trip, and no serializing
      // again until its next event.
      const live = api.liveRuns?.get(runId);
      if (live && live.row.workspace_id === principal.workspaceId && !isTerminal(live.row.status)) {
        const body = liveBodies(live);
        ctx.set('Retry-After', String(POLL_RETRY_AFTER_SECONDS));
        ctx.set('Cache-Control', 'no-store');
        ctx.type = 'application/json';
        ctx.body = body;
        return;
      }
      const located = await locateRun(api, principal, runId);
      if (located.kind === 'live') {
        sendRun(ctx, api, located.run.row, located.run.actions.map((action) => toActionRepresentation(action, action.account_id, api.config.publicBaseUrl)));
        return;
      }
      sendRun(ctx, api, located.row, await runActions(api, located.row.id));
    };
  },
});

export const cancelRunRoute = route({
  method: 'delete',
  path: '/api/v1/runs/{runId}',
  operationId: 'cancelRun',
  tags: ['runs'],
  summary: 'Cancel a queued run',
  description:
    'A queued run becomes `canceled` and the response is the canceled run. Idempotent: DELETE of a run that is already ' +
    '`canceled` answers 200 with the run again. A running run cannot be interrupted (409 `run-not-cancelable`; it stays ' +
    '`running`); a run that succeeded or failed answers 409 `run-already-finished`. Both 409s carry `run_status`.',
  access: 'read',
  backedBy: ['database', 'event-log'],
  pathParameters: { runId: RUN_ID },
  responses: {
    '200': {
      description: 'The canceled run.',
      headers: requestIdHeader,
      content: json({ allOf: [ref('Run'), { type: 'object', properties: { status: { const: 'canceled' } } }] }),
    },
    '404': responseRef('RunNotFound'),
    '409': {
      description: 'The run is running (`run-not-cancelable`) or already succeeded/failed (`run-already-finished`).',
      headers: requestIdHeader,
      content: problem('RunNotCancelableProblem'),
    },
  },
  handler: (api) => async (ctx, { principal, params }) => {
    // GET may have shown the run from the live fold, ahead of the read model: read no older state here.
    if (api.liveRuns) await api.barrier.catchUp(RUNS_PROJECTION);
    const row = await findRunRow(api, principal, params.runId!);
    if (row.status !== 'canceled') {
      try {
        const result = await api.commands.handle(accountDecider, {
          type: 'CancelRun',
          workspaceId: principal.workspaceId,
          accountId: row.account_id,
          runId: row.id,
          knownStatus: row.status,
          meta: { actor: { kind: 'api_key', id: principal.keyId }, correlationId: row.id },
        });
        const seq = lastSeqOf(result);
        if (seq !== null) await api.barrier.reach(RUNS_PROJECTION, seq);
      } catch (error) {
        if (!(error instanceof RunNotCancelableError) || error.runStatus === 'running') throw error;
        // The run ended after the read above: canceled by a concurrent DELETE (then this one is
        // answered as a repeat, 200), or finished (then the 409 names how). A read model too far
        // behind to tell which is a 503 to retry, not a guess.
        if (!(await api.barrier.catchUp(RUNS_PROJECTION))) {
          throw new ServiceUnavailableError('The run has ended, and the read model is too far behind to tell whether it was canceled; retry in a few seconds.', 2);
        }
        const ended = await findRun(api.db, principal.workspaceId, row.id);
        if (ended?.status !== 'canceled') throw ended && isTerminal(ended.status) ? new RunNotCancelableError(row.id, ended.status) : error;
      }
    }
    const canceled = (await findRun(api.db, principal.workspaceId, row.id)) ?? row;
    ctx.body = toRunRepresentation(canceled, api.config.publicBaseUrl, await runActions(api, row.id));
  },
});

export const RUN_ROUTES: readonly RouteDefinition<ApiContext>[] = [createRunRoute, getRunRoute, cancelRunRoute];

/** POST, GET and DELETE /api/v1/runs: the specification's run endpoints, with GET's fast lane. */
export function runsRouter(api: ApiContext): Router {
  return withFastLane(mountRoutes(RUN_ROUTES, api, { limits: api.config, keys: api.keys }), runPollFastLane(api));
}

/** Serialized bodies of live runs, per service: LiveRuns hands out the same object until the run changes. */
const liveBodiesOfServices = new WeakMap<ApiContext, (live: LiveRun) => string>();

function liveRunBodies(api: ApiContext): (live: LiveRun) => string {
  let bodyOf = liveBodiesOfServices.get(api);
  if (!bodyOf) {
    const bodies = new WeakMap<LiveRun, string>();
    bodyOf = (live) => {
      let body = bodies.get(live);
      if (body === undefined) {
        const actions = live.actions.map((action) => toActionRepresentation(action, action.account_id, api.config.publicBaseUrl));
        body = JSON.stringify(toRunRepresentation(live.row, api.config.publicBaseUrl, actions));
        bodies.set(live, body);
      }
      return body;
    };
    liveBodiesOfServices.set(api, bodyOf);
  }
  return bodyOf;
}

const RUN_POLL_PREFIX = '/api/v1/runs/';
const RUN_POLL_ROUTE = koaPath(getRunRoute.path);
const TERMINAL_CACHE_CONTROL = `private, max-age=${TERMINAL_MAX_AGE_SECONDS}, immutable`;
/** What koa's `ctx.type = 'application/json'` writes. */
const JSON_CONTENT_TYPE = 'application/json; charset=utf-8';
/** Content-Length of cached bodies, counted once per body. */
const bodyLengths = new WeakMap<CachedRun, string>();

/**
 * GET /api/v1/runs/{runId} of a run held in memory — a terminal run in the cache or a queued
 * or running one the live follower holds — answered without koa (src/http/fast-lane.ts), with
 * the headers, in the order, that {@link getRunRoute} and koa give it. Declines (the route then
 * answers) when the run is not in memory or not the caller's, or the key is not in the key
 * cache, is not valid, or lacks the route's scope.
 */
export function runPollFastLane(api: ApiContext): FastLane {
  const liveBodies = liveRunBodies(api);
  const scope = getRunRoute.access;
  if (scope === 'public') throw new Error('the run poll fast lane authenticates as its route does: the route must not be public');
  // The key lookup the koa path would have counted.
  const onSent = () => api.keys.countCacheHit();
  return (path, request) => {
    if (!path.startsWith(RUN_POLL_PREFIX)) return undefined;
    const runId = path.slice(RUN_POLL_PREFIX.length);
    const principal = cachedPrincipal(api.keys, request.headers.authorization ?? '', scope);
    if (!principal) return undefined;
    // Only ids that reached the cache or the follower can hit: the exact lookup is the path check.
    // The same read as the route's own first one (it makes a cached run recent), so declining leaves no trace.
    const cached = api.runCache.get(runId);
    if (cached) {
      if (cached.workspaceId !== principal.workspaceId) return undefined;
      if (ifNoneMatchHits(request.headers['if-none-match'] ?? '', cached.etag)) {
        return { keyId: principal.keyId, status: 304, headers: ['ETag', cached.etag, 'Cache-Control', TERMINAL_CACHE_CONTROL], body: undefined, route: RUN_POLL_ROUTE, onSent };
      }
      let length = bodyLengths.get(cached);
      if (length === undefined) bodyLengths.set(cached, (length = String(Buffer.byteLength(cached.body))));
      const headers = ['ETag', cached.etag, 'Cache-Control', TERMINAL_CACHE_CONTROL, 'Content-Type', JSON_CONTENT_TYPE, 'Content-Length', length];
      return { keyId: principal.keyId, status: 200, headers, body: cached.body, route: RUN_POLL_ROUTE, onSent };
    }
    const live = api.liveRuns?.get(runId);
    if (!live || live.row.workspace_id !== principal.workspaceId || isTerminal(live.row.status)) return undefined;
    const body = liveBodies(live);
    const headers = ['Retry-After', String(POLL_RETRY_AFTER_SECONDS), 'Cache-Control', 'no-store', 'Content-Type', JSON_CONTENT_TYPE, 'Content-Length', String(Buffer.byteLength(body))];
    return { keyId: principal.keyId, status: 200, headers, body, route: RUN_POLL_ROUTE, onSent };
  };
}

/** If-None-Match uses the weak comparison (RFC 9110 §13.1.2): W/"x" matches "x". */
function ifNoneMatchHits(presented: string, etag: string): boolean {
  const opaque = (tag: string) => tag.trim().replace(/^W\//, '');
  return presented !== '' && presented.split(',').some((tag) => tag.trim() === '*' || opaque(tag) === opaque(etag));
}

function sendTerminal(ctx: Context, body: string, etag: string): void {
  ctx.set('ETag', etag);
  ctx.set('Cache-Control', TERMINAL_CACHE_CONTROL);
  if (ifNoneMatchHits(ctx.get('if-none-match'), etag)) {
    ctx.status = 304;
    return;
  }
  ctx.type = 'application/json';
  ctx.body = body;
}
