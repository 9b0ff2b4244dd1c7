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

export const PROBLEM_MEDIA_TYPE = 'application/problem+json';
const JSON_MEDIA_TYPE = 'application/json';

/** Defaults of BRIEF_MAX_LENGTH and BODY_LIMIT_BYTES; `openApiDocumentFor` puts a deployment's values in. */
const DEFAULT_BRIEF_MAX_LENGTH = 8000;
const DEFAULT_BODY_LIMIT_BYTES = 65536;

const ref = (name: string) => ({ $ref: `#/components/schemas/${name}` }) as const;
const responseRef = (name: string) => ({ $ref: `#/components/responses/${name}` }) as const;
const headerRef = (name: string) => ({ $ref: `#/components/headers/${name}` }) as const;
const json = (schema: JsonSchema) => ({ [JSON_MEDIA_TYPE]: { schema } });
const problem = (schemaName = 'Problem') => ({ [PROBLEM_MEDIA_TYPE]: { schema: ref(schemaName) } });

const uuid = { type: 'string', format: 'uuid' } as const;
const dateTime = { type: 'string', format: 'date-time' } as const;
const nullableDateTime = { type: ['string', 'null'], format: 'date-time' } as const;

const requestIdHeader = { 'X-Request-Id': headerRef('XRequestId') } as const;
const unauthenticated = { security: [] } as const;
const parameterRef = (name: string) => ({ $ref: `#/components/parameters/${name}` }) as const;
const nullable = (schema: JsonSchema) => ({ oneOf: [{ type: 'null' }, schema] }) as const;
/** A closed object: every listed member required unless named in `optional`. */
const closed = (properties: { readonly [name: string]: JsonSchema }, optional: readonly string[] = []) => ({
  type: 'object',
  additionalProperties: false,
  required: Object.keys(properties).filter((name) => !optional.includes(name)),
  properties,
});

/** Campaign statuses of the platform port; ads-platform.ts has them only as a type, so completeness is checked here. */
const CAMPAIGN_STATUSES = ['enabled', 'paused', 'removed'] as const satisfies readonly Campaign['status'][];
const campaignStatusesComplete: [Exclude<Campaign['status'], (typeof CAMPAIGN_STATUSES)[number]>] extends [never] ? true : never = true;
void campaignStatusesComplete;

/** Page sizes of approvals-routes.ts and history-routes.ts. */
const APPROVALS_PAGE = { default: 50, max: 200 } as const;
const HISTORY_PAGE = { default: 100, max: 500 } as const;
/** Body limits of the approve / reject / target / kill-switch validators. */
const TEXT_MAX_LENGTH = 2000;

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
  approvals_url: { type: 'string', format: 'uri' },
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

const baseDocument = {
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
  paths: {
    '/api/v1/runs': {
      post: {
        operationId: 'createRun',
        tags: ['runs'],
        summary: 'Start a run',
        description:
          'Queues a run of the brief on the account and answers at once with 202 and the poll URL. One run per account at a time: ' +
          'a second one while a run is queued or running answers 409 `run-in-progress`. Read-scoped keys may start runs; such a run ' +
          'has its write tools removed and always ends with `actions: []`. With `Idempotency-Key` (scoped to the API key, kept 24 hours) ' +
          'a retry replays the original 202 with `Idempotent-Replayed: true`; the same key with another body answers 422, and a retry ' +
          'while the first request is still processing answers 409 `idempotent-request-in-progress` with `Retry-After`.',
        parameters: [{ $ref: '#/components/parameters/IdempotencyKey' }, { $ref: '#/components/parameters/XRequestId' }],
        requestBody: {
          required: true,
          description: `Unknown members are refused (422). The body is at most BODY_LIMIT_BYTES (${DEFAULT_BODY_LIMIT_BYTES} by default; 413 beyond).`,
          content: json(ref('CreateRunRequest')),
        },
        responses: {
          '202': {
            description: 'Run queued (or, with `Idempotent-Replayed: true`, the replay of the original response).',
            headers: {
              ...requestIdHeader,
              Location: headerRef('Location'),
              'Idempotent-Replayed': headerRef('IdempotentReplayed'),
            },
            content: json(ref('RunCreated')),
          },
          '400': responseRef('BadRequest'),
          '401': responseRef('Unauthorized'),
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
          '413': responseRef('PayloadTooLarge'),
          '415': responseRef('UnsupportedMediaType'),
          '422': {
            description:
              'The body breaks the schema (`validation-error`, with `errors[]`), or the Idempotency-Key was first used with another body ' +
              '(`idempotency-key-reused`).',
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
          '500': responseRef('InternalError'),
          '503': responseRef('ServiceUnavailable'),
        },
      },
    },
    '/api/v1/runs/{runId}': {
      get: {
        operationId: 'getRun',
        tags: ['runs'],
        summary: 'Poll a run',
        description:
          'While the run is `queued` or `running` the response carries `Retry-After: 15` and `Cache-Control: no-store`; pollers ' +
          'should honour it and stop once the status is terminal. A terminal run never changes: its response has an `ETag`, ' +
          '`Cache-Control: private, max-age=…` and no `Retry-After`, and `If-None-Match` with that ETag answers 304. ' +
          'A run of another workspace is indistinguishable from a missing one (404).',
        parameters: [{ $ref: '#/components/parameters/RunId' }, { $ref: '#/components/parameters/IfNoneMatch' }, { $ref: '#/components/parameters/XRequestId' }],
        responses: {
          '200': {
            description: 'The run.',
            headers: {
              ...requestIdHeader,
              'Retry-After': {
                description: 'Seconds to wait before polling again; present only while the run is `queued` or `running`.',
                schema: { type: 'string', const: '15' },
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
          '401': responseRef('Unauthorized'),
          '404': responseRef('RunNotFound'),
          '500': responseRef('InternalError'),
        },
      },
      delete: {
        operationId: 'cancelRun',
        tags: ['runs'],
        summary: 'Cancel a queued run',
        description:
          'A queued run becomes `canceled` and the response is the canceled run. Idempotent: DELETE of a run that is already ' +
          '`canceled` answers 200 with the run again. A running run cannot be interrupted (409 `run-not-cancelable`; it stays ' +
          '`running`); a run that succeeded or failed answers 409 `run-already-finished`. Both 409s carry `run_status`.',
        parameters: [{ $ref: '#/components/parameters/RunId' }, { $ref: '#/components/parameters/XRequestId' }],
        responses: {
          '200': {
            description: 'The canceled run.',
            headers: requestIdHeader,
            content: json({ allOf: [ref('Run'), { type: 'object', properties: { status: { const: 'canceled' } } }] }),
          },
          '401': responseRef('Unauthorized'),
          '404': responseRef('RunNotFound'),
          '409': {
            description: 'The run is running (`run-not-cancelable`) or already succeeded/failed (`run-already-finished`).',
            headers: requestIdHeader,
            content: problem('RunNotCancelableProblem'),
          },
          '500': responseRef('InternalError'),
          '503': responseRef('ServiceUnavailable'),
        },
      },
    },
    '/api/v1/accounts': {
      get: {
        operationId: 'listAccounts',
        tags: ['accounts'],
        summary: 'List the accounts of the key’s workspace',
        description: 'The `id` of an account is the `project_id` of POST /api/v1/runs. Only the key’s own workspace is ever listed.',
        parameters: [{ $ref: '#/components/parameters/XRequestId' }],
        responses: {
          '200': { description: 'The accounts, oldest first.', headers: requestIdHeader, content: json(ref('AccountList')) },
          '401': responseRef('Unauthorized'),
          '500': responseRef('InternalError'),
        },
      },
    },
    '/api/v1/runs/{runId}/events': {
      get: {
        operationId: 'streamRunEvents',
        tags: ['runs'],
        summary: 'Follow a run as Server-Sent Events',
        description:
          'The run’s milestones as Server-Sent Events, for clients that would rather not poll. Event names: ' +
          `${RUN_STREAM_EVENTS.map((name) => `\`${name}\``).join(', ')}. The stream opens with \`retry: 3000\`, then sends, in order, ` +
          '`queued`, `started`, one `tool_called` per tool call, one `action_proposed` per action, and exactly one terminal event ' +
          '(`succeeded`, `failed` or `canceled`), after which the server closes the stream. Each event’s `id` is its stream sequence and its `data` is JSON ' +
          '(schemas `RunStream…Data`; `data.seq` repeats the `id`); comments (`: keep-alive`) are sent every 15 s. A reconnect with ' +
          '`Last-Event-ID` (or `?last_event_id=`, for clients that cannot set headers) resumes exactly after that event; a reconnect ' +
          'after the terminal event answers 204, which tells EventSource to stop. A run of another workspace is indistinguishable ' +
          'from a missing one (404). Bounds: one key holds at most `SSE_MAX_STREAMS_PER_KEY` open streams per server process (429 ' +
          '`too-many-streams` with `Retry-After` beyond); the server ends a stream after `SSE_MAX_LIFETIME_MS` with a comment and ' +
          '`retry: 500`, and the client resumes with `Last-Event-ID`; a stream whose key is revoked ends within `SSE_KEY_RECHECK_MS` ' +
          '(a reconnect then answers 401). A stored message that is not a trustworthy event is skipped with a comment and an `id:` line.',
        parameters: [
          parameterRef('RunId'),
          parameterRef('LastEventId'),
          parameterRef('LastEventIdQuery'),
          parameterRef('XRequestId'),
        ],
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
          '429': responseRef('TooManyStreams'),
          '401': responseRef('Unauthorized'),
          '404': responseRef('RunNotFound'),
          '500': responseRef('InternalError'),
        },
      },
    },
    '/api/v1/accounts/{projectId}/campaigns': {
      get: {
        operationId: 'listCampaigns',
        tags: ['campaigns'],
        summary: 'List the campaigns of an account',
        description:
          'Read from the account’s advertising platform: status, daily budget and bidding strategy (type, target CPA, target ROAS ' +
          'percent, portfolio). Money is in account currency units.',
        parameters: [parameterRef('ProjectId'), parameterRef('XRequestId')],
        responses: {
          '200': { description: 'The campaigns, by name.', headers: requestIdHeader, content: json(ref('CampaignList')) },
          '401': responseRef('Unauthorized'),
          '404': responseRef('AccountNotFound'),
          '409': responseRef('AccountNotConnected'),
          '500': responseRef('InternalError'),
          '502': responseRef('PlatformRefused'),
          '503': responseRef('PlatformUnavailable'),
        },
      },
    },
    '/api/v1/accounts/{projectId}/campaigns/{campaignId}/target': {
      post: {
        operationId: 'setCampaignTarget',
        tags: ['campaigns'],
        summary: 'Propose a new target CPA or ROAS for a campaign',
        'x-required-scope': 'write',
        description:
          'Proposes a change of the target on the bidding strategy the campaign already uses; the proposal goes through the same ' +
          'safe-apply policy and auto-apply gates as the agent’s, and the response is the resulting action. `target_cpa` needs ' +
          '`maximize_conversions` with a target CPA, `target_roas_pct` needs `maximize_conversion_value` with a target ROAS; anything ' +
          'else is refused with 409 `strategy-mismatch` (changing the strategy type is not supported). A campaign on a portfolio ' +
          'strategy is flagged for review (the change moves every campaign on the portfolio) and never auto-applied. ' +
          '`Idempotency-Key` works exactly as on POST /api/v1/runs: a retry replays the first 200 with `Idempotent-Replayed: true` ' +
          '(the same action, never a second proposal), another body under the same key answers 422 `idempotency-key-reused`, and a ' +
          'retry while the first request runs answers 409 `idempotent-request-in-progress`.',
        parameters: [parameterRef('ProjectId'), parameterRef('CampaignId'), { $ref: '#/components/parameters/IdempotencyKey' }, parameterRef('XRequestId')],
        requestBody: {
          required: true,
          description: 'Exactly one of `target_cpa` and `target_roas_pct` (both or neither: 422). Unknown members are refused (422).',
          content: json(ref('SetTargetRequest')),
        },
        responses: {
          '200': {
            description: 'The proposed action (or, with `Idempotent-Replayed: true`, the replay of the first answer).',
            headers: { ...requestIdHeader, 'Idempotent-Replayed': headerRef('IdempotentReplayed') },
            content: json(ref('TargetAction')),
          },
          '400': responseRef('BadRequest'),
          '401': responseRef('Unauthorized'),
          '403': responseRef('Forbidden'),
          '404': {
            description: 'No such account (`account-not-found`) or no such campaign in it, or a removed one (`campaign-not-found`).',
            headers: requestIdHeader,
            content: problem(),
          },
          '409': {
            description:
              'The target does not fit the campaign’s bidding strategy (`strategy-mismatch`, naming the strategy and the field it takes), ' +
              'or the account has no connected advertising platform (`account-not-connected`), or a request with the same ' +
              'Idempotency-Key is still being processed (`idempotent-request-in-progress`, with `Retry-After`).',
            headers: { ...requestIdHeader, 'Retry-After': headerRef('RetryAfterOptional') },
            content: problem('TargetConflictProblem'),
          },
          '413': responseRef('PayloadTooLarge'),
          '415': responseRef('UnsupportedMediaType'),
          '422': {
            description:
              'The body breaks the schema (`validation-error`, with `errors[]`), or the Idempotency-Key was first used with another ' +
              'request (`idempotency-key-reused`).',
            headers: requestIdHeader,
            content: problem(),
          },
          '500': responseRef('InternalError'),
          '502': responseRef('PlatformRefused'),
          '503': responseRef('ServiceUnavailable'),
        },
      },
    },
    '/api/v1/accounts/{projectId}/approvals': {
      get: {
        operationId: 'listApprovals',
        tags: ['approvals'],
        summary: 'List the actions of an account with their status',
        description:
          'Every action proposed on the account (by runs or the target endpoint), oldest first, with where it stands now. Paginated: ' +
          'pass `next_cursor` as `cursor` for the next page; it is null on the last page.',
        parameters: [
          parameterRef('ProjectId'),
          parameterRef('ApprovalStatus'),
          parameterRef('RunIdFilter'),
          parameterRef('ApprovalsLimit'),
          parameterRef('Cursor'),
          parameterRef('XRequestId'),
        ],
        responses: {
          '200': { description: 'One page of actions.', headers: requestIdHeader, content: json(ref('ApprovalList')) },
          '401': responseRef('Unauthorized'),
          '404': responseRef('AccountNotFound'),
          '422': responseRef('InvalidQuery'),
          '500': responseRef('InternalError'),
        },
      },
    },
    '/api/v1/accounts/{projectId}/approvals/{actionId}/approve': {
      post: {
        operationId: 'approveAction',
        tags: ['approvals'],
        summary: 'Approve a queued action',
        'x-required-scope': 'write',
        description:
          'Only an action that is `queued` or `returned` can be approved; the apply worker then applies it. Anything else answers 409 ' +
          '`action-not-in-queue` (of two concurrent approvals, one wins). The response is the action as the approvals list shows it. ' +
          'When the workspace requires a distinct approver (`adsagent workspace set WS --require-distinct-approver on`), the key that ' +
          'proposed the action, or started the run that proposed it, answers 403 `distinct-approver-required`.',
        parameters: [parameterRef('ProjectId'), parameterRef('ActionId'), parameterRef('XRequestId')],
        requestBody: { required: false, description: 'Optional; no body means `{}`.', content: json(ref('ApproveRequest')) },
        responses: {
          '200': { description: 'The approved action.', headers: requestIdHeader, content: json(ref('Approval')) },
          '400': responseRef('MalformedJson'),
          '401': responseRef('Unauthorized'),
          '403': responseRef('ApproveForbidden'),
          '404': responseRef('ActionNotFound'),
          '409': responseRef('ActionNotInQueue'),
          '413': responseRef('PayloadTooLarge'),
          '415': responseRef('UnsupportedMediaType'),
          '422': responseRef('ValidationFailed'),
          '500': responseRef('InternalError'),
          '503': responseRef('ServiceUnavailable'),
        },
      },
    },
    '/api/v1/accounts/{projectId}/approvals/{actionId}/reject': {
      post: {
        operationId: 'rejectAction',
        tags: ['approvals'],
        summary: 'Reject a queued action',
        'x-required-scope': 'write',
        description: 'Same rules as approve: only from `queued` or `returned`, otherwise 409 `action-not-in-queue`. A reason is required.',
        parameters: [parameterRef('ProjectId'), parameterRef('ActionId'), parameterRef('XRequestId')],
        requestBody: { required: true, content: json(ref('RejectRequest')) },
        responses: {
          '200': { description: 'The rejected action.', headers: requestIdHeader, content: json(ref('Approval')) },
          '400': responseRef('MalformedJson'),
          '401': responseRef('Unauthorized'),
          '403': responseRef('Forbidden'),
          '404': responseRef('ActionNotFound'),
          '409': responseRef('ActionNotInQueue'),
          '413': responseRef('PayloadTooLarge'),
          '415': responseRef('UnsupportedMediaType'),
          '422': responseRef('ValidationFailed'),
          '500': responseRef('InternalError'),
          '503': responseRef('ServiceUnavailable'),
        },
      },
    },
    '/api/v1/accounts/{projectId}/history': {
      get: {
        operationId: 'listHistory',
        tags: ['history'],
        summary: 'Read the event history of an account',
        description:
          'Every event of the account, read from the event log itself in stream order: the event envelope (docs/events.md) plus its ' +
          'stream sequence `seq`; `ToolCalled` events carry the tool’s full output. `next_cursor` is the `seq` to pass as `cursor` for ' +
          'the next page (null on the last); `run_id` keeps the events correlated with one run and reads only that run’s own subjects ' +
          '(its account subject while it was live, its run subject, its actions’ and the account’s quota subjects). Each request reads at ' +
          'most `HISTORY_SCAN_BUDGET` events and answers at most `HISTORY_MAX_PAGE_BYTES` of JSON (a single larger event still comes alone): ' +
          'a page cut short by either is shorter than `limit` and still carries `next_cursor`, so only a null `next_cursor` means the end. ' +
          'A stored message that is not a trustworthy event (not JSON, fails its schema, unknown type or version, envelope not matching its ' +
          'subject) is listed in its place as `{seq, subject, corrupt: true, code, error}`, never a 500.',
        parameters: [
          parameterRef('ProjectId'),
          parameterRef('HistoryCursor'),
          parameterRef('HistoryLimit'),
          parameterRef('RunIdFilter'),
          parameterRef('XRequestId'),
        ],
        responses: {
          '200': { description: 'One page of events.', headers: requestIdHeader, content: json(ref('HistoryList')) },
          '401': responseRef('Unauthorized'),
          '404': responseRef('AccountNotFound'),
          '422': responseRef('InvalidQuery'),
          '500': responseRef('InternalError'),
        },
      },
    },
    '/api/v1/workspace/kill-switch': {
      get: {
        operationId: 'getKillSwitch',
        tags: ['workspace'],
        summary: 'Read the workspace kill switch',
        description: 'Any scope may read it: it explains why actions are queued instead of auto-applied.',
        parameters: [parameterRef('XRequestId')],
        responses: {
          '200': { description: 'The kill switch of the key’s workspace.', headers: requestIdHeader, content: json(ref('KillSwitch')) },
          '401': responseRef('Unauthorized'),
          '500': responseRef('InternalError'),
        },
      },
    },
    '/api/v1/workspace/kill-switch/engage': {
      post: {
        operationId: 'engageKillSwitch',
        tags: ['workspace'],
        summary: 'Engage the workspace kill switch',
        'x-required-scope': 'admin',
        description:
          'Engaged, no new action is auto-applied (they are queued, with the reason) and the apply worker sends auto-applied actions ' +
          'that are not live yet back to the queue; actions a person approved are still applied. Engaging an engaged switch changes nothing.',
        parameters: [parameterRef('XRequestId')],
        requestBody: { required: false, description: 'Optional; no body means `{}`.', content: json(ref('KillSwitchRequest')) },
        responses: {
          '200': {
            description: 'The kill switch, engaged.',
            headers: requestIdHeader,
            content: json({ allOf: [ref('KillSwitch'), { type: 'object', properties: { engaged: { const: true } } }] }),
          },
          '400': responseRef('MalformedJson'),
          '401': responseRef('Unauthorized'),
          '403': responseRef('Forbidden'),
          '413': responseRef('PayloadTooLarge'),
          '415': responseRef('UnsupportedMediaType'),
          '422': responseRef('ValidationFailed'),
          '500': responseRef('InternalError'),
          '503': responseRef('ServiceUnavailable'),
        },
      },
    },
    '/api/v1/workspace/kill-switch/release': {
      post: {
        operationId: 'releaseKillSwitch',
        tags: ['workspace'],
        summary: 'Release the workspace kill switch',
        'x-required-scope': 'admin',
        description: 'Auto-apply works again for new proposals. Releasing a released switch changes nothing.',
        parameters: [parameterRef('XRequestId')],
        requestBody: { required: false, description: 'Optional; no body means `{}`.', content: json(ref('KillSwitchRequest')) },
        responses: {
          '200': {
            description: 'The kill switch, released.',
            headers: requestIdHeader,
            content: json({ allOf: [ref('KillSwitch'), { type: 'object', properties: { engaged: { const: false } } }] }),
          },
          '400': responseRef('MalformedJson'),
          '401': responseRef('Unauthorized'),
          '403': responseRef('Forbidden'),
          '413': responseRef('PayloadTooLarge'),
          '415': responseRef('UnsupportedMediaType'),
          '422': responseRef('ValidationFailed'),
          '500': responseRef('InternalError'),
          '503': responseRef('ServiceUnavailable'),
        },
      },
    },
    '/healthz': {
      get: {
        operationId: 'liveness',
        tags: ['operations'],
        summary: 'Liveness probe',
        ...unauthenticated,
        responses: {
          '200': {
            description: 'The process serves requests.',
            headers: { ...requestIdHeader, 'Cache-Control': headerRef('NoStore') },
            content: json(ref('Health')),
          },
        },
      },
    },
    '/readyz': {
      get: {
        operationId: 'readiness',
        tags: ['operations'],
        summary: 'Readiness probe',
        description:
          'Ready when NATS, PostgreSQL and every projector are fine. Not a problem document: probes read the status, operators the checks. ' +
          'The per-check `checks` are shown only to a request from loopback or with an admin key (they name internals); everyone else ' +
          'gets `status` alone. Probes without credentials are never rate limited. Events parked in the projection quarantine ' +
          'are named in the `projections` detail and do not make the service unready.',
        ...unauthenticated,
        responses: {
          '200': {
            description: 'Every check passed.',
            headers: { ...requestIdHeader, 'Cache-Control': headerRef('NoStore') },
            content: json({ allOf: [ref('Readiness'), { type: 'object', properties: { status: { const: 'ready' } } }] }),
          },
          '503': {
            description: 'At least one check failed or timed out.',
            headers: { ...requestIdHeader, 'Cache-Control': headerRef('NoStore') },
            content: json({ allOf: [ref('Readiness'), { type: 'object', properties: { status: { const: 'not_ready' } } }] }),
          },
        },
      },
    },
    '/metrics': {
      get: {
        operationId: 'metrics',
        tags: ['operations'],
        summary: 'Prometheus metrics',
        description:
          'The Prometheus text exposition format: requests by route template, runs by outcome, apply results, projector checkpoints, ' +
          'lag and stalls, and process metrics. Unauthenticated like the probes: it holds no tenant data; expose it only on the internal network.',
        ...unauthenticated,
        responses: {
          '200': {
            description: 'The current metrics.',
            headers: requestIdHeader,
            content: { 'text/plain': { schema: { type: 'string', minLength: 1, description: 'Prometheus text format 0.0.4.' } } },
          },
        },
      },
    },
    '/api/v1/openapi.json': {
      get: {
        operationId: 'openApiDocument',
        tags: ['operations'],
        summary: 'This OpenAPI document',
        ...unauthenticated,
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
      },
    },
    '/api/v1/event-signing-keys': {
      get: {
        operationId: 'listEventSigningKeys',
        tags: ['operations'],
        summary: 'Public keys that sign the event log',
        description:
          'The Ed25519 public keys whose signatures readers believe: the current signing key and every retired one still trusted. ' +
          'No authentication: public keys are public, and an auditor verifying the log (docs/events.md, "Signatures") may hold no API key.',
        ...unauthenticated,
        responses: {
          '200': {
            description: 'The keys, current first.',
            headers: { ...requestIdHeader, 'Cache-Control': { description: 'Short public caching.', schema: { type: 'string' } } },
            content: json({
              type: 'object',
              additionalProperties: false,
              required: ['object', 'data'],
              properties: {
                object: { const: 'list' },
                data: {
                  type: 'array',
                  minItems: 1,
                  items: {
                    type: 'object',
                    additionalProperties: false,
                    required: ['key_id', 'algorithm', 'status', 'activated_at', 'public_key_pem', 'public_key_jwk'],
                    properties: {
                      key_id: { type: 'string', pattern: '^[0-9a-f]{16}$', description: 'First 16 hex characters of SHA-256 over the raw 32-byte public key; the `key_id` of the events it signs.' },
                      algorithm: { const: 'Ed25519' },
                      status: { enum: ['current', 'retired'] },
                      activated_at: { type: ['string', 'null'], format: 'date-time', description: 'When the key first signed on this stream; null when not recorded.' },
                      public_key_pem: { type: 'string', pattern: '^-----BEGIN PUBLIC KEY-----', description: 'SPKI PEM.' },
                      public_key_jwk: {
                        type: 'object',
                        additionalProperties: false,
                        required: ['kty', 'crv', 'x', 'kid', 'use', 'alg'],
                        description: 'RFC 8037 OKP JSON Web Key.',
                        properties: {
                          kty: { const: 'OKP' },
                          crv: { const: 'Ed25519' },
                          x: { type: 'string', pattern: '^[A-Za-z0-9_-]{43}$' },
                          kid: { type: 'string' },
                          use: { const: 'sig' },
                          alg: { const: 'EdDSA' },
                        },
                      },
                    },
                  },
                },
              },
            }),
          },
        },
      },
    },
  },
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
      RunId: {
        name: 'runId',
        in: 'path',
        required: true,
        description: 'The run id. Anything that is not a run of the key’s workspace (including a non-UUID) answers 404.',
        schema: { type: 'string' },
      },
      IdempotencyKey: {
        name: 'Idempotency-Key',
        in: 'header',
        required: false,
        description: 'Makes a POST retry-safe: 1 to 255 printable ASCII characters, scoped to the API key, remembered 24 hours. Invalid values answer 400.',
        schema: { type: 'string', minLength: 1, maxLength: 255, pattern: '^[\\x21-\\x7e]+$' },
      },
      ProjectId: {
        name: 'projectId',
        in: 'path',
        required: true,
        description: 'The account (an `id` from GET /api/v1/accounts). Anything that is not an account of the key’s workspace answers 404.',
        schema: { type: 'string' },
      },
      CampaignId: {
        name: 'campaignId',
        in: 'path',
        required: true,
        description: 'A campaign `id` from GET /api/v1/accounts/{projectId}/campaigns; anything else (or a removed campaign) answers 404.',
        schema: { type: 'string' },
      },
      ActionId: {
        name: 'actionId',
        in: 'path',
        required: true,
        description: 'An action `id` (from a run’s `result.actions`, the target endpoint or the approvals list); anything else answers 404.',
        schema: { type: 'string' },
      },
      LastEventId: {
        name: 'Last-Event-ID',
        in: 'header',
        required: false,
        description: 'The `id` of the last event received; the stream resumes after it. Sent by EventSource on reconnect. Other values are ignored.',
        schema: { type: 'string', pattern: '^[0-9]+$' },
      },
      LastEventIdQuery: {
        name: 'last_event_id',
        in: 'query',
        required: false,
        description: 'Same as `Last-Event-ID`, for clients that cannot set headers; the header wins when both are sent.',
        schema: { type: 'string', pattern: '^[0-9]+$' },
      },
      ApprovalStatus: {
        name: 'status',
        in: 'query',
        required: false,
        description: 'Only actions with this status.',
        schema: { enum: [...ACTION_STATUSES] },
      },
      RunIdFilter: {
        name: 'run_id',
        in: 'query',
        required: false,
        description: 'Only what belongs to this run (a run id; anything else answers 422).',
        schema: uuid,
      },
      ApprovalsLimit: {
        name: 'limit',
        in: 'query',
        required: false,
        description: `Page size, 1 to ${APPROVALS_PAGE.max}.`,
        schema: { type: 'integer', minimum: 1, maximum: APPROVALS_PAGE.max, default: APPROVALS_PAGE.default },
      },
      Cursor: {
        name: 'cursor',
        in: 'query',
        required: false,
        description: 'The `next_cursor` of the previous page.',
        schema: cursorString,
      },
      HistoryLimit: {
        name: 'limit',
        in: 'query',
        required: false,
        description: `Page size, 1 to ${HISTORY_PAGE.max}.`,
        schema: { type: 'integer', minimum: 1, maximum: HISTORY_PAGE.max, default: HISTORY_PAGE.default },
      },
      HistoryCursor: {
        name: 'cursor',
        in: 'query',
        required: false,
        description: 'The `next_cursor` of the previous page: events after this stream sequence.',
        schema: { ...cursorString, default: '0' },
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
        description: 'The body breaks the schema (`validation-error`, with `errors[]`: a JSON pointer into the body per violation).',
        headers: requestIdHeader,
        content: problem(),
      },
      InvalidQuery: {
        description:
          'A query parameter is invalid, or its name or value holds U+0000, a C0 control other than tab/newline/carriage return, or an unpaired surrogate (`validation-error`, with `errors[]`: pointer `/<parameter name>` per violation).',
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
      ActionNotInQueue: {
        description: 'The action is not `queued` or `returned` (`action-not-in-queue`, with `action_status`).',
        headers: requestIdHeader,
        content: problem('ActionNotInQueueProblem'),
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
        description: 'Temporarily unable to decide (e.g. persistent write contention); retry after `Retry-After` seconds.',
        headers: { ...requestIdHeader, 'Retry-After': headerRef('RetryAfter') },
        content: problem(),
      },
      PlatformRefused: {
        description:
          'The advertising platform refused a call the service made for this request (`platform-request-refused`): `detail` quotes the platform\'s message and error code, `platform_errors` lists each `{error_code, message}`.',
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
      CreateRunRequest: {
        type: 'object',
        additionalProperties: false,
        required: ['brief', 'project_id'],
        properties: {
          brief: {
            type: 'string',
            minLength: 1,
            maxLength: DEFAULT_BRIEF_MAX_LENGTH,
            pattern: '\\S',
            description: 'Plain-English task for the agent; must contain a non-space character; at most BRIEF_MAX_LENGTH characters.',
          },
          project_id: { type: 'string', minLength: 1, maxLength: 200, description: 'The account the run works on (an `id` from GET /api/v1/accounts).' },
          auto_apply: { type: 'boolean', default: false, description: 'Lets the safe-apply policy apply bounded, low-risk changes.' },
        },
      },
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
          duration_ms: { type: ['integer', 'null'], minimum: 0, description: 'Null until the run has finished (and for a run canceled or failed before it started).' },
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
        required: ['object', 'id', 'name', 'status', 'daily_budget', 'bidding_strategy'],
        properties: {
          object: { const: 'campaign' },
          id: { ...campaignIdSchema, description: 'Used as {campaignId} by the target endpoint.' },
          name: { type: 'string' },
          status: { enum: [...CAMPAIGN_STATUSES] },
          daily_budget: { type: 'number', minimum: 0, description: 'In account currency units (12.5 = 12.50).' },
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
      SetTargetRequest: {
        type: 'object',
        additionalProperties: false,
        required: ['reason'],
        oneOf: [{ required: ['target_cpa'] }, { required: ['target_roas_pct'] }],
        properties: {
          target_cpa: { type: 'number', exclusiveMinimum: 0, maximum: 1_000_000, description: 'New target CPA (rounded to cents).' },
          target_roas_pct: { type: 'number', exclusiveMinimum: 0, maximum: 100_000, description: 'New target ROAS in percent (rounded to 0.1).' },
          reason: { type: 'string', minLength: 1, maxLength: TEXT_MAX_LENGTH, pattern: '\\S', description: 'Why; shown to approvers.' },
          auto_apply: { type: 'boolean', default: false, description: 'Lets the safe-apply policy apply it if it is safe.' },
        },
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
      ApproveRequest: {
        type: 'object',
        additionalProperties: false,
        properties: { note: { type: 'string', maxLength: TEXT_MAX_LENGTH } },
      },
      RejectRequest: {
        type: 'object',
        additionalProperties: false,
        required: ['reason'],
        properties: { reason: { type: 'string', minLength: 1, maxLength: TEXT_MAX_LENGTH, pattern: '\\S' } },
      },
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
      KillSwitchRequest: {
        type: 'object',
        additionalProperties: false,
        properties: { reason: { type: 'string', maxLength: TEXT_MAX_LENGTH } },
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
          code: { enum: ['not-json', 'schema', 'unknown-type', 'subject-mismatch', 'bad-text', 'untrusted'], description: 'Why it is not believed, as a closed set.' },
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
} as const satisfies OpenApiDocument;

const RESPONSE_METHODS = ['get', 'put', 'post', 'delete', 'patch'];

/**
 * Answers every operation can give whatever its route, added in one pass so none is
 * forgotten and nothing is written thirty times:
 * - 429 `rate-limited` (the probes only when called with credentials), and the RateLimit
 *   headers on every response;
 * - 422 on every /api/ operation without one of its own: every /api/ route refuses a query
 *   parameter holding U+0000, a C0 control or an unpaired surrogate (src/http/hostile-text-guard.ts).
 */
function withCrossCuttingResponses<T>(base: T): T {
  const document = structuredClone(base) as unknown as {
    paths: Record<string, Record<string, { responses: Record<string, { headers?: Record<string, unknown>; $ref?: string }> }>>;
    components: { headers: Record<string, unknown>; responses: Record<string, { headers?: Record<string, unknown> }> };
  };
  const rateLimitHeaders = { RateLimit: headerRef('RateLimit'), 'RateLimit-Policy': headerRef('RateLimitPolicy') };
  for (const [path, item] of Object.entries(document.paths)) {
    for (const [method, operation] of Object.entries(item)) {
      if (!RESPONSE_METHODS.includes(method)) continue;
      if (path.startsWith('/api/')) operation.responses['422'] ??= responseRef('InvalidQuery');
      operation.responses['429'] ??= responseRef('RateLimited');
      for (const response of Object.values(operation.responses)) {
        if (response.$ref === undefined) response.headers = { ...response.headers, ...rateLimitHeaders };
      }
    }
  }
  for (const response of Object.values(document.components.responses)) response.headers = { ...response.headers, ...rateLimitHeaders };
  return document as unknown as T;
}

export const openApiDocument = withCrossCuttingResponses(baseDocument);

export interface OpenApiDeployment {
  readonly publicBaseUrl: string;
  readonly briefMaxLength?: number;
  readonly bodyLimitBytes?: number;
}

/** The document of one deployment: its public origin as the server, its brief limit in the request schema. */
export function openApiDocumentFor(deployment: OpenApiDeployment): OpenApiDocument {
  const document = structuredClone(openApiDocument) as unknown as {
    servers: { url: string }[];
    paths: { '/api/v1/runs': { post: { requestBody: { description: string } } } };
    components: { schemas: { CreateRunRequest: { properties: { brief: { maxLength: number } } } } };
  };
  document.servers = [{ url: deployment.publicBaseUrl }];
  document.components.schemas.CreateRunRequest.properties.brief.maxLength = deployment.briefMaxLength ?? DEFAULT_BRIEF_MAX_LENGTH;
  const bodyLimit = deployment.bodyLimitBytes ?? DEFAULT_BODY_LIMIT_BYTES;
  document.paths['/api/v1/runs'].post.requestBody.description = `Unknown members are refused (422). The body is at most ${bodyLimit} bytes (413 beyond).`;
  return document as unknown as OpenApiDocument;
}
