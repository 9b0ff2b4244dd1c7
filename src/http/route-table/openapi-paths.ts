import { headerRef, json, parameterRef, ref, responseRef } from '../openapi/openapi-helpers.ts';
import { resolveLimits, type JsonSchema, type OpenApiResponse, type RouteDefinition, type RouteLimits } from './route-definition.ts';

type AnyRoute = RouteDefinition<any>;

/**
 * The answers a route can give because of what KIND of route it is, not what it does; each
 * is declared here once, so no route lists them by hand and none is forgotten:
 * - every route: 429 `rate-limited` (the probes only when called with credentials);
 * - every /api route: 500, and 422 for a query that fails its schema (unknown parameters included);
 * - a route with a body: 400 malformed JSON (or a bad Idempotency-Key), 413, 415, 422;
 * - a route that needs a key: 401, and 403 when it needs more than read;
 * - a route that needs a key (the key directory is in Postgres) or reads a backing service: 503 with Retry-After.
 * A route's own declaration of a status wins (e.g. approve's two kinds of 403).
 */
export function responsesByKind(route: AnyRoute): Record<string, OpenApiResponse> {
  const responses: Record<string, OpenApiResponse> = {};
  const isApi = route.path.startsWith('/api/');
  const keyed = route.access !== 'public';
  if (route.body) {
    responses['400'] = responseRef((route.headers ?? []).includes('IdempotencyKey') ? 'BadRequest' : 'MalformedJson');
    responses['413'] = responseRef('PayloadTooLarge');
    responses['415'] = responseRef('UnsupportedMediaType');
    responses['422'] = responseRef('ValidationFailed');
  } else if (isApi) {
    responses['422'] = responseRef('InvalidQuery');
  }
  if (keyed) responses['401'] = responseRef('Unauthorized');
  if (keyed && route.access !== 'read') responses['403'] = responseRef('Forbidden');
  responses['429'] = responseRef('RateLimited');
  if (isApi) responses['500'] = responseRef('InternalError');
  if (keyed || (route.backedBy ?? []).length > 0) responses['503'] = responseRef('ServiceUnavailable');
  return responses;
}

const RATE_LIMIT_HEADERS = { RateLimit: headerRef('RateLimit'), 'RateLimit-Policy': headerRef('RateLimitPolicy') };

/** Every response may carry the RateLimit headers (the limiter sets them before any route runs). */
export function withRateLimitHeaders(response: OpenApiResponse): OpenApiResponse {
  if ('$ref' in response) return response;
  return { ...response, headers: { ...(response.headers as Record<string, unknown> | undefined), ...RATE_LIMIT_HEADERS } };
}

/** The OpenAPI operation of one route of the table. */
export function operationOf(route: AnyRoute, limits: RouteLimits): Record<string, unknown> {
  const parameters: unknown[] = [
    ...Object.values(route.pathParameters ?? {}).map((p) => parameterRef(p.component)),
    ...Object.entries(route.query ?? {}).map(([name, p]) => ({
      name,
      in: 'query',
      required: p.required ?? false,
      description: p.description,
      schema: p.schema,
    })),
    ...(route.headers ?? []).map((name) => parameterRef(name)),
    parameterRef('XRequestId'),
  ];
  const responses = { ...responsesByKind(route), ...route.responses };
  const sorted = Object.fromEntries(
    Object.entries(responses)
      .sort(([a], [b]) => a.localeCompare(b))
      .map(([status, response]) => [status, withRateLimitHeaders(response)]),
  );
  const description = resolveLimits(route.description, limits);
  const bodyDescription = route.body?.description === undefined ? undefined : resolveLimits(route.body.description, limits);
  return {
    operationId: route.operationId,
    tags: [...route.tags],
    summary: route.summary,
    ...(description ? { description } : {}),
    ...(route.access === 'public' ? { security: [] } : {}),
    ...(route.access === 'write' || route.access === 'admin' ? { 'x-required-scope': route.access } : {}),
    parameters,
    ...(route.body
      ? { requestBody: { required: route.body.required, ...(bodyDescription ? { description: bodyDescription } : {}), content: json(ref(route.body.component)) } }
      : {}),
    responses: sorted,
  };
}

/** `paths` of the document: one operation per route, grouped by path template. */
export function pathsOf(routes: readonly AnyRoute[], limits: RouteLimits): Record<string, Record<string, unknown>> {
  const paths: Record<string, Record<string, unknown>> = {};
  for (const route of routes) {
    const item = (paths[route.path] ??= {});
    if (item[route.method]) throw new Error(`${route.method.toUpperCase()} ${route.path} is declared twice`);
    item[route.method] = operationOf(route, limits);
  }
  return paths;
}

/** The request-body schemas the routes own, as components (a route refers to its own by name). */
export function requestSchemasOf(routes: readonly AnyRoute[], limits: RouteLimits): Record<string, JsonSchema> {
  const schemas: Record<string, JsonSchema> = {};
  for (const route of routes) {
    if (!route.body) continue;
    const schema = resolveLimits(route.body.schema, limits);
    const existing = schemas[route.body.component];
    if (existing && JSON.stringify(existing) !== JSON.stringify(schema)) throw new Error(`two routes define ${route.body.component} differently`);
    schemas[route.body.component] = schema;
  }
  return schemas;
}

/**
 * The path parameters as components. Their documented schema is any string: a value the
 * route's own schema refuses is not a 422 but the resource's 404, like an id that does not exist.
 */
export function pathParameterComponentsOf(routes: readonly AnyRoute[]): Record<string, unknown> {
  const components: Record<string, unknown> = {};
  for (const route of routes) {
    for (const [name, parameter] of Object.entries(route.pathParameters ?? {})) {
      components[parameter.component] = { name, in: 'path', required: true, description: parameter.description, schema: { type: 'string' } };
    }
  }
  return components;
}
