import { ACTION_STATUSES } from '../../../commands/action/action-state.ts';
import { RUN_STATUSES, TERMINAL_RUN_STATUSES } from '../../../projections/runs/runs-tables.ts';
import { ACTOR_KINDS, AGGREGATE_TYPES } from '../../events/envelope.ts';
import {
  ACTION_KINDS,
  DISPOSITIONS,
  EVENT_DEFINITIONS,
  KEY_SCOPES,
  PLATFORM_KINDS,
  RISK_TIERS,
  RUN_ERROR_CODES,
} from '../../events/catalogue/index.ts';
import { BIDDING_STRATEGY_TYPES, MATCH_TYPES, type Campaign } from '../../platform/ads-platform.ts';
import { RUN_STREAM_EVENTS, type RunStreamEvent } from '../routes/run-event-stream.ts';
import { ROUTE_TABLE } from '../routes/route-table.ts';
import { pathParameterComponentsOf, pathsOf, requestSchemasOf, withRateLimitHeaders } from '../route-table/openapi-paths.ts';
import { defineRoute, type RouteDefinition, type RouteLimits } from '../route-table/route-definition.ts';
import { closed, dateTime, headerRef, json, nullable, nullableDateTime, problem, PROBLEM_MEDIA_TYPE, ref, requestIdHeader, uuid } from './openapi-helpers.ts';

/**
 * The OpenAPI 3.1 description of every endpoint the service serves. Schemas are JSON
 * Schema 2020-12 (as OpenAPI 3.1 allows) and deliberately strict — required members,
 * enums, `additionalProperties: false` on our own resources — so the API tests, which
 * validate every live response against this document, fail when the two drift apart.
 *
 * Problems are RFC 9457 documents; their `type` is `{PUBLIC_BASE_URL}/problems/<slug>`.
 */

type JsonSchema = { readonly [keyword: string]: unknown };

export interface OpenApiHeader {
  readonly description: string;
  readonly required?: boolean;
  readonly schema: JsonSchema;
}

export interface OpenApiMediaType {
  readonly schema: JsonSchema;
  /**
   * Schema of each item of a sequential media type (here: each Server-Sent Event, parsed into
   * `{id, event, data}`). OpenAPI 3.2's `itemSchema`, as an extension since this is 3.1.
   */
  readonly 'x-itemSchema'?: JsonSchema;
}

export interface OpenApiResponse {
  readonly description: string;
  readonly headers?: { readonly [name: string]: OpenApiHeader | { readonly $ref: string } };
  readonly content?: { readonly [mediaType: string]: OpenApiMediaType };
}

export interface OpenApiParameter {
  readonly name: string;
  readonly in: 'path' | 'query' | 'header' | 'cookie';
  readonly description: string;
  readonly required?: boolean;
  readonly schema: JsonSchema;
}

export interface OpenApiOperation {
  readonly operationId: string;
  readonly summary: string;
  readonly description?: string;
  readonly tags?: readonly string[];
  readonly security?: readonly { readonly [scheme: string]: readonly string[] }[];
  /** Lowest API key scope the operation accepts (read < write < admin); below it answers 403. */
  readonly 'x-required-scope'?: 'read' | 'write' | 'admin';
  readonly parameters?: readonly (OpenApiParameter | { readonly $ref: string })[];
  readonly requestBody?: {
    readonly description?: string;
    readonly required: boolean;
    readonly content: { readonly [mediaType: string]: OpenApiMediaType };
  };
  readonly responses: { readonly [status: string]: OpenApiResponse | { readonly $ref: string } };
}

export type HttpMethod = 'get' | 'post' | 'put' | 'patch' | 'delete' | 'head' | 'options';

export interface OpenApiDocument {
  readonly openapi: string;
  readonly jsonSchemaDialect?: string;
  readonly info: { readonly title: string; readonly version: string; readonly description?: string };
  readonly servers?: readonly { readonly url: string; readonly description?: string }[];
  readonly security?: readonly { readonly [scheme: string]: readonly string[] }[];
  readonly tags?: readonly { readonly name: string; readonly description?: string }[];
  readonly paths: { readonly [path: string]: { readonly [method in HttpMethod]?: OpenApiOperation } };
  readonly components: {
    readonly securitySchemes: { readonly [name: string]: Readonly<Record<string, unknown>> };
    readonly schemas: { readonly [name: string]: JsonSchema };
    readonly responses: { readonly [name: string]: OpenApiResponse };
    readonly headers: { readonly [name: string]: OpenApiHeader };
    readonly parameters: { readonly [name: string]: OpenApiParameter };
  };
}

export { PROBLEM_MEDIA_TYPE };

/** Defaults of BRIEF_MAX_LENGTH and BODY_LIMIT_BYTES, for the document tests read without a deployment. */
const DEFAULT_LIMITS: RouteLimits = { briefMaxLength: 8000, bodyLimitBytes: 65536 };

/** Campaign statuses of the platform port; ads-platform.ts has them only as a type, so completeness is checked here. */
const CAMPAIGN_STATUSES = ['enabled', 'paused', 'removed', 'unknown'] as const satisfies readonly Campaign['status'][];
const campaignStatusesComplete: [Exclude<Campaign['status'], (typeof CAMPAIGN_STATUSES)[number]>] extends [never] ? true : never = true;
void campaignStatusesComplete;

const cursorString = { type: 'string', pattern: '^[0-9]+$' } as const;

/** A cursor-paginated list of one component. */
const pagedList = (item: string, cursorDescription: string) =>
  ({
    type: 'object',
    additionalProperties: false,
    required: ['object', 'data', 'next_cursor'],
    properties: {
      object: { const: 'list' },
      data: { type: 'array', items: ref(item) },
      next_cursor: { ...nullable(cursorString), description: cursorDescription },
    },
  }) as const;
const campaignIdSchema = { type: 'string', minLength: 1 } as const;
const positiveNumber = { type: 'number', exclusiveMinimum: 0 } as const;

/** `params` of each action kind (src/policy/action-draft.ts). */
const ACTION_PARAMS = {
  add_negative_keywords: closed({
    campaign_id: campaignIdSchema,
    keywords: { type: 'array', items: closed({ text: { type: 'string', minLength: 1 }, match_type: { enum: [...MATCH_TYPES] } }) },
  }),
  pause_keywords: closed({ keyword_ids: { type: 'array', items: { type: 'string', minLength: 1 } } }),
  set_campaign_budget: closed({ campaign_id: campaignIdSchema, daily_budget: { type: 'number', minimum: 0 } }),
  set_target_cpa: closed({ campaign_id: campaignIdSchema, target_cpa: positiveNumber }),
  set_target_roas: closed({ campaign_id: campaignIdSchema, target_roas_pct: positiveNumber }),
} satisfies Record<(typeof ACTION_KINDS)[number], JsonSchema>;

/** Members of the specification's Action, shared by the run result, the target response and the approvals view. */
const actionProperties = {
  id: { type: 'string', minLength: 1, description: 'Used as {actionId} by the approve and reject endpoints.' },
  kind: { enum: [...ACTION_KINDS] },
  summary: { type: 'string' },
  risk_tier: { enum: [...RISK_TIERS] },
  disposition: {
    enum: [...DISPOSITIONS],
    description: 'What happened when it was proposed. `auto_applied` means accepted for apply, not live yet: the apply worker may still send it back to the queue.',
  },
  policy_reasons: { type: 'array', items: { type: 'string' } },
  approvals_url: {
    type: 'string',
    format: 'uri',
    description: 'The approvals console page of the account (`{PUBLIC_BASE_URL}/console/accounts/{projectId}/approvals`), where a person approves, edits or rejects its queued actions.',
  },
} as const;

/** The SSE `data` of each run stream event (src/http/routes/run-event-stream.ts), plus `seq` (= the SSE `id`). */
const streamCommon = {
  seq: { type: 'integer', minimum: 1, description: 'Stream sequence of the event; the same as the SSE `id`.' },
  run_id: uuid,
  time: dateTime,
} as const;
const RUN_STREAM_DATA = {
  queued: closed({ ...streamCommon, status: { const: 'queued' } }),
  started: closed({
    ...streamCommon,
    status: { const: 'running' },
    agent: closed({ kind: { enum: ['rules', 'gemini'] }, model: { type: 'string' } }),
  }),
  tool_called: closed({
    ...streamCommon,
    index: { type: 'integer', minimum: 1, description: '1-based position among the run’s tool calls.' },
    name: { type: 'string', minLength: 1 },
    input: { type: 'object' },
    ok: { type: 'boolean' },
    duration_ms: { type: 'integer', minimum: 0 },
  }),
  action_proposed: closed({ ...streamCommon, action: ref('Action') }),
  succeeded: closed({
    ...streamCommon,
    status: { const: 'succeeded' },
    duration_ms: { type: 'integer', minimum: 0 },
    truncated: { type: 'boolean' },
    usage: ref('Usage'),
  }),
  failed: closed({
    ...streamCommon,
    status: { const: 'failed' },
    duration_ms: { type: ['integer', 'null'], minimum: 0 },
    error: ref('RunError'),
    usage: ref('Usage'),
  }),
  canceled: closed({ ...streamCommon, status: { const: 'canceled' } }),
} satisfies Record<RunStreamEvent, JsonSchema>;
const streamDataSchemaName = (event: RunStreamEvent) =>
  `RunStream${event.replace(/(^|_)([a-z])/g, (_match: string, _sep: string, letter: string) => letter.toUpperCase())}Data`;

/** Every (type, version) of the event catalogue: what a history entry can be. */
const EVENT_TYPES = [...new Set(EVENT_DEFINITIONS.map((definition) => definition.type))];

/** Everything but `paths` (generated from the route table) and the request bodies (declared by their routes). */
const documentWithoutPaths = {
  openapi: '3.1.0',
  jsonSchemaDialect: 'https://json-schema.org/draft/2020-12/schema',
  info: {
    title: 'Agent Runs API',
    version: '1.0.0',
    description:
      'Asynchronous agent runs on advertising accounts: start a run with a plain-English brief, poll it (or follow it as Server-Sent ' +
      'Events), cancel it while queued; review what it proposed in the approvals queue, approve or reject it, propose bidding targets, ' +
      'read the account’s event history, and stop auto-apply with the workspace kill switch. ' +
      'Every error is an RFC 9457 problem (`application/problem+json`) carrying `request_id`; validation problems add `errors[]` ' +
      'with a JSON pointer per violation. Every response carries `X-Request-Id`.',
  },
  servers: [{ url: 'http://localhost:8080', description: 'Replaced by PUBLIC_BASE_URL when served.' }],
  security: [{ bearerAuth: [] }],
  tags: [
    { name: 'runs', description: 'Agent runs: create, poll, cancel, follow as Server-Sent Events.' },
    { name: 'accounts', description: 'Advertising accounts (projectIds) of the key’s workspace.' },
    { name: 'campaigns', description: 'An account’s campaigns, and proposing a new bidding target.' },
    { name: 'approvals', description: 'Proposed actions and their lifecycle: list, approve, reject.' },
    { name: 'history', description: 'The event history of an account, from the event log.' },
    { name: 'workspace', description: 'The workspace kill switch.' },
    { name: 'operations', description: 'Probes and this document.' },
  ],
  components: {
    securitySchemes: {
      bearerAuth: {
        type: 'http',
        scheme: 'bearer',
        bearerFormat: 'ak_<key id: 32 hex>_<secret: 43 base64url>',
        description:
          'API key as `Authorization: Bearer <API_KEY>`. Scopes are read < write < admin; an operation needing more than read says so in ' +
          '`x-required-scope` and answers 403 `insufficient-scope` to a lower key.',
      },
    },
    parameters: {
      IdempotencyKey: {
        name: 'Idempotency-Key',
        in: 'header',
        required: false,
        description: 'Makes a POST retry-safe: 1 to 255 visible ASCII characters (`!` to `~`, no space), scoped to the API key, remembered 24 hours. Invalid values, and a header present but empty, answer 400.',
        schema: { type: 'string', minLength: 1, maxLength: 255, pattern: '^[\\x21-\\x7e]+$' },
      },
      LastEventId: {
        name: 'Last-Event-ID',
        in: 'header',
        required: false,
        description: 'The `id` of the last event received; the stream resumes after it. Sent by EventSource on reconnect. Other values are ignored.',
        schema: { type: 'string', pattern: '^[0-9]+$' },
      },
      IfNoneMatch: {
        name: 'If-None-Match',
        in: 'header',
        required: false,
        description: 'ETag(s) of a terminal run the client holds; a match answers 304.',
        schema: { type: 'string' },
      },
      XRequestId: {
        name: 'X-Request-Id',
        in: 'header',
        required: false,
        description: 'Caller-chosen request id echoed back (1 to 128 of `A-Za-z0-9._-`); otherwise the service assigns one.',
        schema: { type: 'string', pattern: '^[A-Za-z0-9._-]{1,128}$' },
      },
    },
    headers: {
      XRequestId: {
        description: 'Id of this request; quote it when reporting a problem (it is also the problem’s `request_id`).',
        required: true,
        schema: { type: 'string', pattern: '^[A-Za-z0-9._-]{1,128}$' },
      },
      Location: {
        description: 'Absolute URL of the run (same as `poll_url`).',
        required: true,
        schema: { type: 'string', format: 'uri' },
      },
      IdempotentReplayed: {
        description: '`true` when this response is the replay of an earlier request with the same Idempotency-Key.',
        required: false,
        schema: { type: 'string', const: 'true' },
      },
      RetryAfter: {
        description: 'Seconds to wait before retrying.',
        required: true,
        schema: { type: 'string', pattern: '^[0-9]+$' },
      },
      RetryAfterOptional: {
        description: 'Seconds to wait before retrying, when a retry can succeed soon.',
        required: false,
        schema: { type: 'string', pattern: '^[0-9]+$' },
      },
      ETag: {
        description: 'Strong validator of a terminal run.',
        required: true,
        schema: { type: 'string', pattern: '^"[^"]+"$' },
      },
      ETagOptional: {
        description: 'Strong validator; present only once the run is terminal.',
        required: false,
        schema: { type: 'string', pattern: '^"[^"]+"$' },
      },
      TerminalCacheControl: {
        description: 'A terminal run never changes and may be cached privately.',
        required: true,
        schema: { type: 'string', pattern: '^private, max-age=[0-9]+(, immutable)?$' },
      },
      NoStore: {
        description: 'Never cached.',
        required: true,
        schema: { type: 'string', const: 'no-store' },
      },
      WWWAuthenticate: {
        description: 'The Bearer challenge.',
        required: true,
        schema: { type: 'string', pattern: '^Bearer ' },
      },
      RateLimitPolicy: {
        description:
          'The limit this request was counted against (draft-ietf-httpapi-ratelimit-headers-10): `"api-key"` (per API key) or ' +
          '`"client-address"` (requests without a valid key), `q` requests per `w` seconds. Absent when rate limiting is off.',
        required: false,
        schema: { type: 'string', pattern: '^"(api-key|client-address)";q=[0-9]+;w=[0-9]+$' },
      },
      RateLimit: {
        description: 'What is left of that limit: `r` requests now, `t` seconds until the whole quota is available again.',
        required: false,
        schema: { type: 'string', pattern: '^"(api-key|client-address)";r=[0-9]+;t=[0-9]+$' },
      },
    },
    responses: {
      RateLimited: {
        description:
          'Over the request rate (`rate-limited`, with `policy`: `api-key` or `client-address`); retry after `Retry-After` seconds.',
        headers: { ...requestIdHeader, 'Retry-After': headerRef('RetryAfter') },
        content: problem(),
      },
      BadRequest: {
        description: 'The body is not JSON (`malformed-json`) or the Idempotency-Key header is invalid (`invalid-idempotency-key`).',
        headers: requestIdHeader,
        content: problem(),
      },
      MalformedJson: {
        description: 'The body is not JSON (`malformed-json`).',
        headers: requestIdHeader,
        content: problem(),
      },
      ValidationFailed: {
        description: 'The body or the query breaks its schema (`validation-error`, with `errors[]`: per violation a JSON `pointer` into the body, or `/<name>` for a query parameter, and a plain-words `message` saying what to send instead).',
        headers: requestIdHeader,
        content: problem(),
      },
      InvalidQuery: {
        description:
          'A query parameter is invalid or unknown to the endpoint, or its name or value holds U+0000, a C0 control other than tab/newline/carriage return, or an unpaired surrogate (`validation-error`, with `errors[]`: pointer `/<parameter name>` and a plain-words `message` per violation).',
        headers: requestIdHeader,
        content: problem(),
      },
      AccountNotFound: {
        description: 'No account `projectId` in the key’s workspace (`account-not-found`); another workspace’s account looks exactly the same.',
        headers: requestIdHeader,
        content: problem(),
      },
      AccountNotConnected: {
        description:
          'The account has no connected advertising platform, or Google refused its authorisation (revoked or expired grant); the detail says how to reconnect it (`account-not-connected`).',
        headers: requestIdHeader,
        content: problem(),
      },
      ActionNotFound: {
        description:
          'No such account (`account-not-found`) or no action `actionId` in it (`action-not-found`); another workspace’s look exactly the same.',
        headers: requestIdHeader,
        content: problem(),
      },
      ActionNotDecidable: {
        description:
          'The action is not `queued` or `returned` (`action-not-in-queue`, with `action_status`), or it changed since the `expected_version` ' +
          'sent (`action-changed`, with its current `action_version`: read it again and decide on what it is now). ' +
          'The same request sent again by the same key after its decision was stored (a 503 whose answer was lost) is not refused: it answers 200 and records nothing.',
        headers: requestIdHeader,
        content: { [PROBLEM_MEDIA_TYPE]: { schema: { oneOf: [ref('ActionNotInQueueProblem'), ref('ActionChangedProblem')] } } },
      },
      Unauthorized: {
        description: 'Authorization is missing, not Bearer, malformed, unknown, wrong or revoked (`unauthorized`); all look alike.',
        headers: { ...requestIdHeader, 'WWW-Authenticate': headerRef('WWWAuthenticate') },
        content: problem(),
      },
      Forbidden: {
        description: 'The key’s scope is below the operation’s `x-required-scope` (`insufficient-scope`, with `required_scope` and `key_scope`).',
        headers: { ...requestIdHeader, 'WWW-Authenticate': headerRef('WWWAuthenticate') },
        content: problem('InsufficientScopeProblem'),
      },
      ApproveForbidden: {
        description:
          'The key’s scope is below `write` (`insufficient-scope`, with the Bearer challenge in `WWW-Authenticate`), or the workspace requires a distinct approver and this key proposed the action or started its run (`distinct-approver-required`, with `proposer_key_id`, no challenge: another key must approve).',
        headers: {
          ...requestIdHeader,
          'WWW-Authenticate': { description: 'The Bearer challenge; only with `insufficient-scope`.', required: false, schema: { type: 'string', pattern: '^Bearer ' } },
        },
        content: { [PROBLEM_MEDIA_TYPE]: { schema: { oneOf: [ref('InsufficientScopeProblem'), ref('DistinctApproverRequiredProblem')] } } },
      },
      RunNotFound: {
        description: 'No such run in the key’s workspace (`run-not-found`); another workspace’s run looks exactly the same.',
        headers: requestIdHeader,
        content: problem(),
      },
      PayloadTooLarge: {
        description: 'The body exceeds BODY_LIMIT_BYTES (`payload-too-large`, with `limit_bytes`).',
        headers: requestIdHeader,
        content: problem(),
      },
      UnsupportedMediaType: {
        description: 'The body is not `application/json` in UTF-8 (`unsupported-media-type`).',
        headers: requestIdHeader,
        content: problem(),
      },
      TooManyStreams: {
        description: 'The key already holds `SSE_MAX_STREAMS_PER_KEY` open event streams on this server (`too-many-streams`, with `limit`).',
        headers: { ...requestIdHeader, 'Retry-After': headerRef('RetryAfter') },
        content: problem(),
      },
      ServiceUnavailable: {
        description: 'The event log or PostgreSQL is not reachable right now, or writers contend for the same resource (`service-unavailable`); retry after `Retry-After` seconds.',
        headers: { ...requestIdHeader, 'Retry-After': headerRef('RetryAfter') },
        content: problem(),
      },
      PlatformRefused: {
        description:
          'The advertising platform refused a call the service made for this request (`platform-request-refused`): `detail` quotes the platform\'s message and error code, `platform_errors` lists each `{error_code, message}`. Or it answered a count or amount the service cannot use (`platform-answer-invalid`: not finite, negative or out of range), named in `detail`.',
        headers: requestIdHeader,
        content: problem(),
      },
      PlatformUnavailable: {
        description:
          'The advertising platform is unreachable or failing (`platform-unavailable`), or its rate limit lasts longer than the service waits (`platform-rate-limited`, quoting the platform\'s message); retry after `Retry-After` seconds.',
        headers: { ...requestIdHeader, 'Retry-After': headerRef('RetryAfter') },
        content: problem(),
      },
      InternalError: {
        description: 'Unexpected fault (`internal`); the detail quotes the request id.',
        headers: requestIdHeader,
        content: problem(),
      },
    },
    schemas: {
      RunCreated: {
        type: 'object',
        description: 'The 202 response of POST /api/v1/runs.',
        additionalProperties: false,
        required: ['id', 'object', 'status', 'poll_url'],
        properties: {
          id: uuid,
          object: { const: 'run' },
          status: { const: 'queued' },
          poll_url: { type: 'string', format: 'uri', description: 'Absolute URL of GET /api/v1/runs/{runId}.' },
        },
      },
      Run: {
        type: 'object',
        additionalProperties: false,
        required: [
          'id',
          'object',
          'status',
          'project_id',
          'auto_apply',
          'scope',
          'created_at',
          'started_at',
          'finished_at',
          'poll_url',
          'duration_ms',
          'agent',
          'result',
          'error',
        ],
        properties: {
          id: uuid,
          object: { const: 'run' },
          status: { enum: [...RUN_STATUSES], description: `Terminal: ${TERMINAL_RUN_STATUSES.join(', ')}.` },
          project_id: { type: 'string', minLength: 1 },
          auto_apply: { type: 'boolean' },
          scope: { enum: [...KEY_SCOPES], description: 'Scope of the key that started the run; `read` runs propose nothing.' },
          created_at: dateTime,
          started_at: nullableDateTime,
          finished_at: nullableDateTime,
          poll_url: { type: 'string', format: 'uri' },
          duration_ms: { type: ['integer', 'null'], minimum: 0, description: 'Null until the run has finished. A finished run always has one: from its start to its end, or from its creation to its end for a run canceled or failed before a worker started it.' },
          agent: {
            oneOf: [
              { type: 'null' },
              {
                type: 'object',
                additionalProperties: false,
                required: ['kind', 'model'],
                properties: { kind: { enum: ['rules', 'gemini'] }, model: { type: 'string' } },
              },
            ],
          },
          result: ref('RunResult'),
          error: { oneOf: [{ type: 'null' }, ref('RunError')] },
        },
        allOf: [
          {
            description: 'Only a failed run has an error.',
            if: { properties: { status: { const: 'failed' } } },
            then: { properties: { error: ref('RunError') } },
            else: { properties: { error: { type: 'null' } } },
          },
          {
            description: 'A queued run has not started or finished.',
            if: { properties: { status: { const: 'queued' } } },
            then: { properties: { started_at: { type: 'null' }, finished_at: { type: 'null' }, duration_ms: { type: 'null' } } },
          },
        ],
      },
      RunResult: {
        type: 'object',
        additionalProperties: false,
        required: ['text', 'truncated', 'actions', 'tool_calls', 'usage'],
        properties: {
          text: { type: 'string', maxLength: 32000 },
          truncated: { type: 'boolean', description: 'True when `text` hit the 32,000 character cap.' },
          actions: { type: 'array', items: ref('Action'), description: 'Always empty for a run started with a read-scoped key.' },
          tool_calls: { type: 'array', maxItems: 50, items: ref('ToolCall') },
          usage: ref('Usage'),
        },
      },
      Usage: {
        type: 'object',
        additionalProperties: false,
        required: ['input_tokens', 'output_tokens', 'steps'],
        properties: {
          input_tokens: { type: 'integer', minimum: 0 },
          output_tokens: { type: 'integer', minimum: 0 },
          steps: { type: 'integer', minimum: 0 },
        },
      },
      Action: {
        type: 'object',
        additionalProperties: false,
        required: ['id', 'kind', 'summary', 'risk_tier', 'disposition', 'policy_reasons', 'approvals_url'],
        description: 'The specification’s Action, as a run proposed it. Its later lifecycle is in the approvals view (`Approval`).',
        properties: actionProperties,
      },
      ToolCall: {
        type: 'object',
        additionalProperties: false,
        required: ['name', 'input', 'ok'],
        description: 'A tool the agent used; outputs are not recorded.',
        properties: { name: { type: 'string', minLength: 1 }, input: { type: 'object' }, ok: { type: 'boolean' } },
      },
      RunError: {
        type: 'object',
        additionalProperties: false,
        required: ['code', 'message'],
        properties: { code: { enum: [...RUN_ERROR_CODES] }, message: { type: 'string' } },
      },
      Account: {
        type: 'object',
        additionalProperties: false,
        required: ['id', 'object', 'name', 'platform', 'connected', 'created_at'],
        properties: {
          id: { type: 'string', minLength: 1, description: 'The projectId.' },
          object: { const: 'account' },
          name: { type: 'string' },
          platform: { enum: [...PLATFORM_KINDS] },
          connected: { type: 'boolean', description: 'Whether an advertising-platform account is connected; runs on an unconnected one fail.' },
          created_at: dateTime,
        },
      },
      AccountList: {
        type: 'object',
        additionalProperties: false,
        required: ['object', 'data'],
        properties: { object: { const: 'list' }, data: { type: 'array', items: ref('Account') } },
      },
      Problem: {
        type: 'object',
        description:
          'RFC 9457 problem details. Extension members (e.g. `active_run_id`, `run_status`, `limit_bytes`, `action_status`, ' +
          '`required_scope`) may appear.',
        required: ['type', 'title', 'status', 'instance', 'request_id'],
        properties: {
          type: { type: 'string', format: 'uri', description: '`{PUBLIC_BASE_URL}/problems/<slug>`.' },
          title: { type: 'string', minLength: 1 },
          status: { type: 'integer', minimum: 400, maximum: 599 },
          detail: { type: 'string' },
          instance: { type: 'string', description: 'Path of the request.' },
          request_id: { type: 'string', minLength: 1, description: 'Same as the `X-Request-Id` response header.' },
          errors: { type: 'array', items: ref('InvalidParam') },
        },
        allOf: [
          {
            description: 'A validation problem lists every violation.',
            if: { required: ['type'], properties: { type: { type: 'string', pattern: '/problems/validation-error$' } } },
            then: { required: ['errors'], properties: { status: { const: 422 }, errors: { type: 'array', minItems: 1 } } },
          },
        ],
      },
      InvalidParam: {
        type: 'object',
        additionalProperties: false,
        required: ['pointer', 'message'],
        properties: {
          pointer: {
            type: 'string',
            pattern: '^/',
            description: 'JSON pointer (RFC 6901) into the request body (`/` for the body itself), or `/<name>` of an invalid query parameter.',
          },
          message: { type: 'string' },
        },
      },
      RunNotCancelableProblem: {
        allOf: [
          ref('Problem'),
          {
            type: 'object',
            required: ['run_status'],
            properties: {
              type: { type: 'string', pattern: '/problems/(run-not-cancelable|run-already-finished)$' },
              status: { const: 409 },
              run_status: { type: 'string' },
            },
          },
        ],
      },
      InsufficientScopeProblem: {
        allOf: [
          ref('Problem'),
          {
            type: 'object',
            required: ['required_scope', 'key_scope'],
            properties: {
              type: { type: 'string', pattern: '/problems/insufficient-scope$' },
              status: { const: 403 },
              required_scope: { enum: [...KEY_SCOPES] },
              key_scope: { enum: [...KEY_SCOPES] },
            },
          },
        ],
      },
      DistinctApproverRequiredProblem: {
        allOf: [
          ref('Problem'),
          {
            type: 'object',
            required: ['proposer_key_id'],
            properties: {
              type: { type: 'string', pattern: '/problems/distinct-approver-required$' },
              status: { const: 403 },
              proposer_key_id: { type: 'string', description: 'The key that proposed the action or started its run.' },
            },
          },
        ],
      },
      ActionNotInQueueProblem: {
        allOf: [
          ref('Problem'),
          {
            type: 'object',
            required: ['action_status'],
            properties: {
              type: { type: 'string', pattern: '/problems/action-not-in-queue$' },
              status: { const: 409 },
              action_status: { enum: ACTION_STATUSES.filter((status) => status !== 'queued' && status !== 'returned') },
            },
          },
        ],
      },
      ActionChangedProblem: {
        allOf: [
          ref('Problem'),
          {
            type: 'object',
            required: ['expected_version', 'action_version', 'action_status'],
            properties: {
              type: { type: 'string', pattern: '/problems/action-changed$' },
              status: { const: 409 },
              expected_version: { type: 'string', description: 'The `expected_version` the request sent.' },
              action_version: { type: 'string', description: 'The action’s `version` now.' },
              action_status: { enum: ['queued', 'returned'] },
            },
          },
        ],
      },
      TargetConflictProblem: {
        description: '`strategy-mismatch` carries the campaign’s strategy and the field it takes; `account-not-connected` carries nothing more.',
        allOf: [
          ref('Problem'),
          {
            type: 'object',
            properties: {
              type: { type: 'string', pattern: '/problems/(strategy-mismatch|account-not-connected|idempotent-request-in-progress)$' },
              status: { const: 409 },
            },
          },
          {
            type: 'object',
            if: { required: ['type'], properties: { type: { type: 'string', pattern: '/problems/strategy-mismatch$' } } },
            then: {
              required: ['campaign_id', 'bidding_strategy', 'target_cpa', 'target_roas_pct', 'expected_field'],
              properties: {
                campaign_id: campaignIdSchema,
                bidding_strategy: { enum: [...BIDDING_STRATEGY_TYPES], description: 'The strategy type the campaign uses.' },
                target_cpa: { type: ['number', 'null'], description: 'Its current target CPA, if it has one.' },
                target_roas_pct: { type: ['number', 'null'], description: 'Its current target ROAS in percent, if it has one.' },
                expected_field: {
                  enum: ['target_cpa', 'target_roas_pct', null],
                  description: 'The field this campaign takes; null when it takes neither (no target on its strategy).',
                },
              },
            },
          },
        ],
      },
      Campaign: {
        type: 'object',
        additionalProperties: false,
        required: ['object', 'id', 'name', 'status', 'daily_budget', 'shared_budget', 'bidding_strategy'],
        properties: {
          object: { const: 'campaign' },
          id: { ...campaignIdSchema, description: 'Used as {campaignId} by the target endpoint.' },
          name: { type: 'string' },
          status: { enum: [...CAMPAIGN_STATUSES] },
          daily_budget: { type: 'number', minimum: 0, description: 'In account currency units (12.5 = 12.50): the campaign’s own budget, or the shared budget’s.' },
          shared_budget: nullable({
            ...closed({ id: { type: 'string', minLength: 1 }, campaign_ids: { type: 'array', minItems: 1, items: campaignIdSchema } }),
            description:
              'A budget shared by several campaigns (Google Ads’ shared budgets; sandbox budgets never are): changing it moves every campaign on it, so the policy never auto-applies it. Null for a budget of the campaign’s own.',
          }),
          bidding_strategy: ref('BiddingStrategy'),
        },
      },
      BiddingStrategy: {
        type: 'object',
        additionalProperties: false,
        required: ['type', 'target_cpa', 'target_roas_pct', 'portfolio'],
        properties: {
          type: { enum: [...BIDDING_STRATEGY_TYPES] },
          target_cpa: { type: ['number', 'null'], exclusiveMinimum: 0, description: 'Set for `maximize_conversions` with a target CPA.' },
          target_roas_pct: {
            type: ['number', 'null'],
            exclusiveMinimum: 0,
            description: 'Percent (150 = 1.5x); set for `maximize_conversion_value` with a target ROAS.',
          },
          portfolio: nullable({
            ...closed({ id: { type: 'string', minLength: 1 }, name: { type: 'string' }, campaign_ids: { type: 'array', minItems: 1, items: campaignIdSchema } }),
            description: 'A shared (portfolio) strategy: changing its target moves every campaign on it.',
          }),
        },
        allOf: [
          {
            description: 'Only maximize_conversions has a target CPA, only maximize_conversion_value a target ROAS.',
            if: { required: ['type'], properties: { type: { const: 'maximize_conversions' } } },
            then: { properties: { target_roas_pct: { type: 'null' } } },
            else: { properties: { target_cpa: { type: 'null' } } },
          },
          {
            if: { required: ['type'], properties: { type: { const: 'maximize_conversion_value' } } },
            then: { properties: { target_cpa: { type: 'null' } } },
            else: { properties: { target_roas_pct: { type: 'null' } } },
          },
        ],
      },
      CampaignList: {
        type: 'object',
        additionalProperties: false,
        required: ['object', 'data'],
        properties: { object: { const: 'list' }, data: { type: 'array', items: ref('Campaign') } },
      },
      TargetAction: {
        type: 'object',
        additionalProperties: false,
        required: ['object', ...Object.keys(actionProperties), 'status', 'project_id', 'campaign_id'],
        description: 'The specification’s Action, with `status` (at proposal, the disposition), the account and the campaign.',
        properties: {
          object: { const: 'action' },
          ...actionProperties,
          kind: { enum: ACTION_KINDS.filter((kind) => kind === 'set_target_cpa' || kind === 'set_target_roas') },
          status: { enum: [...DISPOSITIONS], description: 'Equal to `disposition`; later changes are in the approvals list.' },
          project_id: { type: 'string', minLength: 1 },
          campaign_id: campaignIdSchema,
        },
        allOf: DISPOSITIONS.map((disposition) => ({
          if: { required: ['disposition'], properties: { disposition: { const: disposition } } },
          then: { properties: { status: { const: disposition } } },
        })),
      },
      Approval: {
        type: 'object',
        additionalProperties: false,
        required: [
          'id',
          'object',
          'kind',
          'summary',
          'reason',
          'params',
          'risk_tier',
          'disposition',
          'policy_reasons',
          'approvals_url',
          'status',
          'status_reason',
          'run_id',
          'project_id',
          'created_at',
          'updated_at',
          'version',
        ],
        description:
          'An action as the approvals view shows it: the specification’s Action plus its lifecycle. `status`: queued → approved → ' +
          'applying → applied; auto_applied → applying → applied; approved/auto_applied/applying → returned (back in the queue); ' +
          'queued/returned → rejected; blocked never moves.',
        properties: {
          ...actionProperties,
          object: { const: 'action' },
          reason: { type: 'string', description: 'Why it was proposed.' },
          params: { type: 'object', description: 'The change, by `kind`.' },
          status: { enum: [...ACTION_STATUSES] },
          status_reason: { type: ['string', 'null'], description: 'Why it last changed status (return or rejection reason, platform error).' },
          run_id: { ...nullable(uuid), description: 'The run that proposed it; null when proposed through the target endpoint.' },
          project_id: { type: 'string', minLength: 1 },
          created_at: dateTime,
          updated_at: dateTime,
          version: {
            type: 'string',
            minLength: 1,
            description:
              'Opaque; changes whenever the action does (edited, approved, applied, returned to the queue, rejected). Send it back as ' +
              '`expected_version` when approving or rejecting to decide only on this version (409 `action-changed` otherwise).',
          },
          edited: {
            description:
              'Null unless an approver edited the action before approving it (approve with an `edit`). Then `summary`, `params`, ' +
              '`risk_tier` and `policy_reasons` above are the edited version (what is applied), and `original` is the version as proposed.',
            anyOf: [
              { type: 'null' },
              {
                type: 'object',
                additionalProperties: false,
                required: ['at', 'by', 'original'],
                properties: {
                  at: dateTime,
                  by: {
                    type: 'object',
                    additionalProperties: false,
                    required: ['kind', 'id'],
                    description: 'Who edited it: for an API key, its id.',
                    properties: { kind: { type: 'string' }, id: { type: 'string' } },
                  },
                  original: {
                    type: 'object',
                    additionalProperties: false,
                    required: ['summary', 'params', 'risk_tier', 'policy_reasons'],
                    properties: {
                      summary: { type: 'string' },
                      params: { type: 'object' },
                      risk_tier: { enum: [...RISK_TIERS] },
                      policy_reasons: { type: 'array', items: { type: 'string' } },
                    },
                  },
                },
              },
            ],
          },
        },
        allOf: [
          ...ACTION_KINDS.map((kind) => ({
            if: { required: ['kind'], properties: { kind: { const: kind } } },
            then: { properties: { params: ACTION_PARAMS[kind] } },
          })),
          {
            description: 'A blocked action stays blocked, and only a blocked one is.',
            if: { required: ['disposition'], properties: { disposition: { const: 'blocked' } } },
            then: { properties: { status: { const: 'blocked' } } },
            else: { properties: { status: { not: { const: 'blocked' } } } },
          },
        ],
      },
      ApprovalList: pagedList('Approval', 'Pass as `cursor` for the next page; null on the last page.'),
      KillSwitch: {
        type: 'object',
        additionalProperties: false,
        required: ['object', 'workspace_id', 'engaged', 'reason', 'since'],
        properties: {
          object: { const: 'kill_switch' },
          workspace_id: { type: 'string', minLength: 1 },
          engaged: { type: 'boolean' },
          reason: { type: 'string', description: 'Reason given with the last engage or release; empty when none was.' },
          since: { ...nullableDateTime, description: 'When it was last engaged or released; null if never.' },
        },
        allOf: [{ if: { required: ['engaged'], properties: { engaged: { const: true } } }, then: { properties: { since: dateTime } } }],
      },
      HistoryEntry: {
        oneOf: [ref('HistoryEvent'), ref('HistoryCorruptEntry')],
        description: 'An event of the history, or a marker in place of a stored message that is not a trustworthy event.',
      },
      HistoryCorruptEntry: {
        type: 'object',
        additionalProperties: false,
        required: ['seq', 'subject', 'corrupt', 'code', 'error'],
        description: 'A stored message that does not parse, fails its schema, carries hostile text, does not match its subject or has no valid signature; its content is not shown.',
        properties: {
          seq: { type: 'integer', minimum: 1, description: 'Stream sequence of the message.' },
          subject: { type: 'string', description: 'The subject it was stored on.' },
          corrupt: { const: true },
          code: { enum: ['not-json', 'schema', 'unknown-type', 'subject-mismatch', 'bad-text', 'untrusted', 'chain-broken'], description: 'Why it is not believed, as a closed set.' },
          error: { type: 'string', description: 'Why it is not believed, in words (at most about 300 characters).' },
        },
      },
      HistoryEvent: {
        type: 'object',
        additionalProperties: false,
        required: ['seq', 'id', 'type', 'version', 'time', 'workspace_id', 'account_id', 'aggregate', 'actor', 'correlation_id', 'data', 'prev_hash', 'hash'],
        description:
          'An event envelope as stored (docs/events.md) plus its stream sequence. `data` is the schema of its `type` and `version` in ' +
          'the event catalogue.',
        properties: {
          seq: { type: 'integer', minimum: 1, description: 'Stream sequence; increasing through the history.' },
          id: uuid,
          type: { enum: EVENT_TYPES },
          version: { type: 'integer', minimum: 1 },
          time: dateTime,
          workspace_id: { type: 'string', minLength: 1 },
          account_id: { type: ['string', 'null'], minLength: 1 },
          aggregate: closed({ type: { enum: [...AGGREGATE_TYPES] }, id: { type: 'string', minLength: 1 } }),
          actor: closed({ kind: { enum: [...ACTOR_KINDS] }, id: { type: 'string', minLength: 1 } }),
          correlation_id: { type: 'string', minLength: 1, description: 'Run id or request id that caused the event.' },
          data: { type: 'object' },
          prev_hash: { type: 'string', pattern: '^[0-9a-f]{64}$' },
          hash: { type: 'string', pattern: '^[0-9a-f]{64}$' },
          key_id: { type: 'string', pattern: '^[0-9a-f]{16}$', description: 'Signing key id; absent on legacy events (docs/events.md, "Signatures").' },
          signature: { type: 'string', pattern: '^[A-Za-z0-9_-]{86}$', description: 'Ed25519 signature, base64url; absent on legacy events.' },
        },
        anyOf: EVENT_DEFINITIONS.map((definition) => ({
          required: ['type', 'version', 'aggregate', 'data'],
          properties: {
            type: { const: definition.type },
            version: { const: definition.version },
            aggregate: { type: 'object', properties: { type: { const: definition.aggregate } } },
            data: definition.data,
          },
        })),
      },
      HistoryList: pagedList('HistoryEntry', 'The last `seq` of this page, to pass as `cursor`; null on the last page.'),
      RunStreamMessage: {
        type: 'object',
        additionalProperties: false,
        required: ['id', 'event', 'data'],
        description: 'One Server-Sent Event of GET /api/v1/runs/{runId}/events, its `data` parsed from JSON.',
        properties: {
          id: { type: 'string', pattern: '^[1-9][0-9]*$', description: 'Stream sequence of the event; send it back as `Last-Event-ID`.' },
          event: { enum: [...RUN_STREAM_EVENTS] },
          data: { type: 'object' },
        },
        allOf: RUN_STREAM_EVENTS.map((event) => ({
          if: { required: ['event'], properties: { event: { const: event } } },
          then: { properties: { data: ref(streamDataSchemaName(event)) } },
        })),
      },
      ...Object.fromEntries(RUN_STREAM_EVENTS.map((event) => [streamDataSchemaName(event), RUN_STREAM_DATA[event]])),
      Health: {
        type: 'object',
        additionalProperties: false,
        required: ['status'],
        properties: { status: { const: 'ok' } },
      },
      Readiness: {
        type: 'object',
        additionalProperties: false,
        required: ['status'],
        properties: {
          status: { enum: ['ready', 'not_ready'] },
          checks: {
            type: 'object',
            additionalProperties: {
              type: 'object',
              additionalProperties: false,
              required: ['ok'],
              properties: { ok: { type: 'boolean' }, detail: { type: 'string' } },
            },
          },
        },
      },
    },
  },
} as const satisfies Omit<OpenApiDocument, 'paths'>;


export const OPENAPI_PATH = '/api/v1/openapi.json';

export interface OpenApiDeployment {
  readonly publicBaseUrl: string;
  readonly briefMaxLength?: number;
  readonly bodyLimitBytes?: number;
}

/** `GET /api/v1/openapi.json`: this document, generated for the deployment once at start. */
export const openApiDocumentRoute = defineRoute<OpenApiDeployment>()({
  method: 'get',
  path: OPENAPI_PATH,
  operationId: 'openApiDocument',
  tags: ['operations'],
  summary: 'This OpenAPI document',
  description: 'Generated from the service\'s route table: every path, parameter, limit and scope here is the one the routes enforce.',
  access: 'public',
  responses: {
    '200': {
      description: 'The OpenAPI 3.1 document, with `servers` set to the public base URL.',
      headers: { ...requestIdHeader, 'Cache-Control': { description: 'Short public caching.', schema: { type: 'string' } } },
      content: json({
        type: 'object',
        required: ['openapi', 'info', 'paths', 'components'],
        properties: { openapi: { type: 'string', pattern: '^3\\.1\\.' } },
      }),
    },
  },
  handler: (deployment) => {
    const body = JSON.stringify(openApiDocumentFor(deployment));
    return (ctx) => {
      ctx.set('Cache-Control', 'public, max-age=300');
      ctx.type = 'application/json';
      ctx.body = body;
    };
  },
});

/** The routes the document describes: the table, and the document itself. */
export const DOCUMENTED_ROUTES: readonly RouteDefinition<any>[] = [...ROUTE_TABLE, openApiDocumentRoute];

/**
 * The document of one deployment: generated from the route table with its limits (brief
 * length, body size), its public origin as the server.
 */
export function openApiDocumentFor(deployment: OpenApiDeployment): OpenApiDocument {
  const limits: RouteLimits = {
    briefMaxLength: deployment.briefMaxLength ?? DEFAULT_LIMITS.briefMaxLength,
    bodyLimitBytes: deployment.bodyLimitBytes ?? DEFAULT_LIMITS.bodyLimitBytes,
  };
  const base = structuredClone(documentWithoutPaths) as unknown as { components: Record<string, Record<string, unknown>> };
  const responses = Object.fromEntries(Object.entries(base.components.responses!).map(([name, r]) => [name, withRateLimitHeaders(r as Record<string, unknown>)]));
  return {
    ...base,
    servers: [{ url: deployment.publicBaseUrl }],
    paths: pathsOf(DOCUMENTED_ROUTES, limits),
    components: {
      ...base.components,
      parameters: { ...pathParameterComponentsOf(DOCUMENTED_ROUTES), ...base.components.parameters },
      responses,
      schemas: { ...base.components.schemas, ...requestSchemasOf(DOCUMENTED_ROUTES, limits) },
    },
  } as unknown as OpenApiDocument;
}

/** The document with the default limits, as the tests and tools read it without a deployment. */
export const openApiDocument: OpenApiDocument = {
  ...openApiDocumentFor({ publicBaseUrl: 'http://localhost:8080' }),
  servers: [{ url: 'http://localhost:8080', description: 'Replaced by PUBLIC_BASE_URL when served.' }],
} as OpenApiDocument;
