import type { Context } from 'koa';
import type { AppError } from '../../errors/app-error.ts';
import type { KeyScope } from '../../events/catalogue/index.ts';
import type { Principal } from '../../auth/scopes.ts';

/** A JSON Schema (2020-12), as OpenAPI 3.1 and ajv both take it. */
export type JsonSchema = { readonly [keyword: string]: unknown };

/** Deployment values that schemas and descriptions depend on (limits from config). */
export interface RouteLimits {
  readonly briefMaxLength: number;
  readonly bodyLimitBytes: number;
}

/** A value written once that may depend on the deployment's limits. */
export type WithLimits<T> = T | ((limits: RouteLimits) => T);

export function resolveLimits<T>(value: WithLimits<T>, limits: RouteLimits): T {
  return typeof value === 'function' ? (value as (limits: RouteLimits) => T)(limits) : value;
}

/**
 * Plain-words replacements for the generic sentence of one keyword at one pointer, declared
 * beside the schema: `{ '/brief': { pattern: 'must contain at least one non-space character' } }`.
 * The pointer `/` is the body (or query) itself, e.g. for a top-level `oneOf`.
 */
export type MessageOverrides = Readonly<Record<string, Readonly<Record<string, string>>>>;

/** `public`: no API key. A scope: a key of that scope or higher. */
export type RouteAccess = 'public' | KeyScope;

/** What the route reads or writes besides its own memory: each can be unreachable, so each route that touches one can answer 503. */
export type BackingService = 'event-log' | 'database' | 'platform';

export interface PathParameter {
  /** `#/components/parameters/<name>` of the document. */
  readonly component: string;
  readonly description: string;
  readonly schema: JsonSchema;
  /** What a value that cannot exist answers (a 404 of the resource, never a 422: a path names a thing). */
  readonly notFound: (value: string) => AppError;
}

export interface QueryParameter {
  readonly description: string;
  readonly schema: JsonSchema;
  readonly required?: boolean;
}

export interface RequestBody {
  /** Name under `#/components/schemas`; the schema lives there and the operation refers to it. */
  readonly component: string;
  readonly schema: WithLimits<JsonSchema>;
  /** As the document says it. */
  readonly required: boolean;
  /** No body (or an empty one) is read as `{}` and validated as such; default: when not `required`. Otherwise it is 400 malformed-json. */
  readonly absentIsEmptyObject?: boolean;
  readonly description?: WithLimits<string>;
  readonly messages?: MessageOverrides;
}

/** An OpenAPI response object, or a `$ref` to one. */
export type OpenApiResponse = { readonly [key: string]: unknown };

/** What the registrar hands a handler: the validated request. */
export interface RouteRequest<Q, B> {
  readonly principal: Principal;
  readonly params: Readonly<Record<string, string>>;
  readonly query: Q;
  /** Reads and validates the body (with its schema's defaults filled in) when the handler wants it: the order of checks stays the handler's. */
  readonly body: () => Promise<B>;
}

export type RouteHandler<Q = Record<string, unknown>, B = unknown> = (ctx: Context, request: RouteRequest<Q, B>) => Promise<void> | void;

/**
 * One route, declared once: the registrar mounts it on koa with its validators, and the
 * OpenAPI document is generated from the same declaration.
 *
 * @example
 * ```ts
 * export const listAccountsRoute = defineRoute<ApiContext>()({
 *   method: 'get', path: '/api/v1/accounts', operationId: 'listAccounts', tags: ['accounts'],
 *   summary: 'List the accounts of the key’s workspace', description: '…', access: 'read',
 *   responses: { '200': { description: 'The accounts.', content: json(ref('AccountList')) } },
 *   handler: (api) => async (ctx, { principal }) => { ctx.body = … },
 * });
 * ```
 */
export interface RouteDefinition<D, Q = any, B = any> {
  readonly method: 'get' | 'post' | 'delete';
  /** OpenAPI template: `/api/v1/runs/{runId}`. */
  readonly path: string;
  readonly operationId: string;
  readonly tags: readonly string[];
  readonly summary: string;
  readonly description: WithLimits<string>;
  readonly access: RouteAccess;
  /** Backing services besides the key directory (which every keyed route reads). */
  readonly backedBy?: readonly BackingService[];
  readonly pathParameters?: Readonly<Record<string, PathParameter>>;
  /** Every query parameter the route takes; any other one is refused with 422 on /api routes. */
  readonly query?: Readonly<Record<string, QueryParameter>>;
  readonly queryMessages?: MessageOverrides;
  /** `#/components/parameters/<name>` of the request headers it reads (X-Request-Id is added to every route). */
  readonly headers?: readonly string[];
  readonly body?: RequestBody;
  /** The route's own answers; the ones every route of its kind can give (401, 403, 422, 429, 500, 503, …) are added by the generator. */
  readonly responses: Readonly<Record<string, OpenApiResponse>>;
  readonly handler: (deps: D) => RouteHandler<Q, B>;
}

/** Types a route's handler against its query and body while keeping the table's element type. */
export function defineRoute<D>() {
  return <Q = Record<string, unknown>, B = unknown>(route: RouteDefinition<D, Q, B>): RouteDefinition<D, Q, B> => route;
}

/** `/api/v1/runs/{runId}` → `/api/v1/runs/:runId` (@koa/router's syntax). */
export function koaPath(path: string): string {
  return path.replace(/\{(\w+)\}/g, ':$1');
}

export function routeName(route: Pick<RouteDefinition<unknown>, 'method' | 'path'>): string {
  return `${route.method.toUpperCase()} ${route.path}`;
}
