/**
 * Every problem type the API answers with, once: the error mapping takes status and title
 * from here, `GET /problems/<slug>` serves the page, and docs/api.md lists the same slugs
 * (test/api/problem-pages.test.ts checks it).
 *
 * `example` holds the members a client sees besides type, title, status, instance and request_id.
 */
export interface ProblemTypeEntry {
  readonly title: string;
  readonly status: number;
  /** When a client meets it, in one sentence. */
  readonly when: string;
  /** What to do about it, in one sentence. */
  readonly fix: string;
  readonly example: Readonly<Record<string, unknown>>;
}

export const PROBLEM_CATALOGUE = {
  'validation-error': {
    title: 'The request is invalid',
    status: 422,
    when: 'A body, query parameter or path parameter breaks the endpoint\'s schema: a missing field, an unknown field or query parameter, a value of the wrong type or out of range.',
    fix: 'Read `errors`: each entry names the field (`pointer`, a JSON pointer into the body or `/<name>` for a query parameter) and says what to send instead.',
    example: { detail: '/brief: must contain at least one non-space character', errors: [{ pointer: '/brief', message: 'brief: must contain at least one non-space character' }] },
  },
  'malformed-json': {
    title: 'Request body is not valid JSON',
    status: 400,
    when: 'The body is empty or is not parseable JSON.',
    fix: 'Send one JSON document, encoded in UTF-8.',
    example: { detail: 'Unexpected token } in JSON at position 12' },
  },
  'payload-too-large': {
    title: 'Request body is too large',
    status: 413,
    when: 'The body is longer than BODY_LIMIT_BYTES.',
    fix: 'Send a smaller body; `limit_bytes` says the limit.',
    example: { detail: 'The body exceeds the limit of 65536 bytes.', limit_bytes: 65536 },
  },
  'unsupported-media-type': {
    title: 'Content-Type must be application/json',
    status: 415,
    when: 'A request with a body has no JSON media type: neither `application/json` nor a `application/<name>+json` type, or a `charset` other than UTF-8.',
    fix: 'Send `Content-Type: application/json`.',
    example: { detail: "Received Content-Type 'text/plain'." },
  },
  'invalid-idempotency-key': {
    title: 'Idempotency-Key is invalid',
    status: 400,
    when: 'The Idempotency-Key header is present but empty, longer than 255 characters, or holds a character that is not visible ASCII (`!` to `~`; a space is refused).',
    fix: 'Send 1 to 255 visible ASCII characters (a UUID is a good key), or leave the header out.',
    example: { detail: 'Idempotency-Key must be 1 to 255 visible ASCII characters (! to ~, no space); it was empty.' },
  },
  'idempotency-key-reused': {
    title: 'Idempotency-Key was used with a different request',
    status: 422,
    when: 'A request reuses an Idempotency-Key whose first request had a different meaning (another body, not just another spelling of the same one).',
    fix: 'Use a new key for a new request.',
    example: { detail: 'This Idempotency-Key was first used with another request body; use a new key for a new request.' },
  },
  'idempotent-request-in-progress': {
    title: 'A request with this Idempotency-Key is still being processed',
    status: 409,
    when: 'The first request with this key has not finished yet.',
    fix: 'Retry after the Retry-After header\'s seconds.',
    example: { detail: 'Retry after the first request has finished.' },
  },
  unauthorized: {
    title: 'Missing or invalid API key',
    status: 401,
    when: 'The Authorization header is missing, is not `Bearer <key>`, or names a key that does not exist or was revoked.',
    fix: 'Send `Authorization: Bearer <key>` with a live key (`adsagent key create`).',
    example: { detail: 'Missing bearer token.' },
  },
  'insufficient-scope': {
    title: 'The API key lacks the required scope',
    status: 403,
    when: 'The key is valid but its scope (read < write < admin) is below what the operation needs.',
    fix: 'Use a key with `required_scope` or higher.',
    example: { detail: 'This operation needs a key with admin scope or higher; this key has write scope.', required_scope: 'admin', key_scope: 'write' },
  },
  'rate-limited': {
    title: 'Too many requests',
    status: 429,
    when: 'The API key (or, without a valid key, the client address) sent requests faster than its rate.',
    fix: 'Wait Retry-After seconds; the RateLimit headers say how much is left.',
    example: { detail: 'This API key is over its request rate; retry after 1 s.', policy: 'api-key' },
  },
  'quota-exceeded': {
    title: 'Workspace quota exceeded',
    status: 429,
    when: 'The workspace used up its runs per hour or model tokens per day.',
    fix: 'Wait until `resets_at` (Retry-After says how long).',
    example: { detail: 'The workspace has used 20 of its 20 runs started in the last hour; new runs are accepted again at 2026-01-01T13:00:00.000Z.', quota: 'runs_per_hour', limit: 20, used: 20, resets_at: '2026-01-01T13:00:00.000Z' },
  },
  'too-many-streams': {
    title: 'Too many open event streams',
    status: 429,
    when: 'The API key already holds SSE_MAX_STREAMS_PER_KEY open live event streams on this server.',
    fix: 'Close a stream, or poll GET /api/v1/runs/{runId}.',
    example: { detail: 'This API key already holds 4 open event streams on this server; close one, or poll GET /api/v1/runs/{runId}.', limit: 4 },
  },
  'service-unavailable': {
    title: 'Service temporarily unavailable',
    status: 503,
    when: 'The event log or the database cannot be reached right now, or too many writers raced for the same resource.',
    fix: 'Retry after the Retry-After header\'s seconds.',
    example: { detail: 'The event log is not reachable right now; retry shortly.' },
  },
  internal: {
    title: 'Internal error',
    status: 500,
    when: 'Something unexpected failed on our side.',
    fix: 'Retry later; if it persists, report the `request_id`.',
    example: { detail: 'Unexpected fault; quote request id 0190a6c2-0000-7000-8000-000000000000.' },
  },
  'not-found': {
    title: 'Not found',
    status: 404,
    when: 'No endpoint exists at this method and path.',
    fix: 'Check the path against the OpenAPI document at /openapi.json.',
    example: { detail: 'No resource at GET /api/v1/nothing.' },
  },
  'method-not-allowed': {
    title: 'Method not allowed',
    status: 405,
    when: 'The path exists but not with this method.',
    fix: 'Use one of the methods in the Allow header.',
    example: { detail: 'DELETE is not allowed here; allowed: GET, HEAD.' },
  },
  'headers-too-large': {
    title: 'Request headers are too large',
    status: 431,
    when: 'The request headers exceed the server\'s limit.',
    fix: 'Send fewer or shorter headers.',
    example: {},
  },
  'uri-too-long': {
    title: 'Request URI is too long',
    status: 414,
    when: 'The request line is longer than the server accepts.',
    fix: 'Shorten the URL; filters belong in a few short query parameters.',
    example: {},
  },
  'malformed-request': {
    title: 'The request is not valid HTTP/1.1',
    status: 400,
    when: 'Node\'s HTTP parser refused the request before it reached the API.',
    fix: 'Send a well-formed HTTP/1.1 request.',
    example: {},
  },
  'workspace-not-found': {
    title: 'Workspace not found',
    status: 404,
    when: 'The workspace does not exist.',
    fix: 'Check the workspace id (`adsagent workspace list`).',
    example: { detail: 'No workspace 0190a6c2-0000-7000-8000-000000000000.' },
  },
  'account-not-found': {
    title: 'Account not found',
    status: 404,
    when: 'No account with this id (`project_id` in request bodies) exists in the key\'s workspace.',
    fix: 'Use an id from GET /api/v1/accounts.',
    example: { detail: 'No account 0190a6c2-0000-7000-8000-000000000000 in this workspace.' },
  },
  'key-not-found': {
    title: 'API key not found',
    status: 404,
    when: 'The API key id does not exist.',
    fix: 'Check the key id (`adsagent key list`).',
    example: { detail: 'No API key 0190a6c2-0000-7000-8000-000000000000.' },
  },
  'already-exists': {
    title: 'Already exists',
    status: 409,
    when: 'The thing to create exists already.',
    fix: 'Use the existing one, or create it under another id.',
    example: { detail: 'Workspace 0190a6c2-0000-7000-8000-000000000000 already exists.' },
  },
  'pause-in-the-past': {
    title: 'The pause would end in the past',
    status: 422,
    when: 'An operator asked to pause run starts until a time that has already passed (`adsagent workspace pause-runs`).',
    fix: 'Give a duration (--for SECONDS) or a time in the future.',
    example: { detail: 'A pause of run starts must end in the future; 2026-01-01T00:00:00.000Z has passed.' },
  },
  'run-not-found': {
    title: 'Run not found',
    status: 404,
    when: 'No run with this id exists in the key\'s workspace.',
    fix: 'Use the id (or poll_url) POST /api/v1/runs returned.',
    example: { detail: 'No run 0190a6c2-0000-7000-8000-000000000000 in this workspace.' },
  },
  'run-in-progress': {
    title: 'Another run is in progress for this account',
    status: 409,
    when: 'The account already has a queued or running run; one run per account at a time.',
    fix: 'Wait for `active_run_id` to finish (poll it or follow its live events), then start again.',
    example: { detail: 'Run 0190a6c2-0000-7000-8000-000000000001 is running on account 0190a6c2-0000-7000-8000-000000000000; one run per account at a time.', active_run_id: '0190a6c2-0000-7000-8000-000000000001' },
  },
  'run-not-cancelable': {
    title: 'A running run cannot be canceled',
    status: 409,
    when: 'The run has already started; the agent cannot be interrupted.',
    fix: 'Let it finish; reject the actions it proposes that you do not want.',
    example: { detail: 'Run 0190a6c2-0000-7000-8000-000000000001 is running; the agent cannot be interrupted, and anything it proposes stays in the approval queue.', run_status: 'running' },
  },
  'run-already-finished': {
    title: 'The run has already finished',
    status: 409,
    when: 'The run is succeeded, failed or canceled; only a queued run can be canceled.',
    fix: 'Nothing to do: the run is over.',
    example: { detail: 'Run 0190a6c2-0000-7000-8000-000000000001 is succeeded; only a queued run can be canceled.', run_status: 'succeeded' },
  },
  'action-not-found': {
    title: 'Action not found',
    status: 404,
    when: 'No action with this id exists in this account.',
    fix: 'Use an id from GET /api/v1/accounts/{accountId}/approvals.',
    example: { detail: 'No action 0190a6c2-0000-7000-8000-000000000002 in this account.' },
  },
  'action-not-in-queue': {
    title: 'The action is not waiting for approval',
    status: 409,
    when: 'The action was already approved, rejected, applied or expired, by someone else or by another request of yours (another decision, note or edit).',
    fix: 'Read the action\'s current status; only a queued (or returned) action can be edited, approved or rejected. The very request that decided it, sent again after a 503, answers 200.',
    example: { detail: 'Action 0190a6c2-0000-7000-8000-000000000002 is applied; only a queued (or returned) action can be edited, approved or rejected.', action_status: 'applied' },
  },
  'action-changed': {
    title: 'The action changed since the version you decided on',
    status: 409,
    when: 'An approve or reject named the action\'s `version` as `expected_version`, and the action has changed since (edited, or approved and returned to the queue): it is not the version the client saw.',
    fix: 'Read the action again (GET /api/v1/accounts/{accountId}/approvals), review it as it is now, and decide again with its new `version` as `expected_version`.',
    example: { detail: 'Action 0190a6c2-0000-7000-8000-000000000002 changed since version v1-q5C0Ej3Yc0Hy2ZqkQ9m1Vg (it is now version v1-0bWm1xRYc7sQ3JZbC4e1tA, returned); nothing was decided. Read the action again (the approvals list), review it as it is now, and decide again with its new `version` as `expected_version`.', expected_version: 'v1-q5C0Ej3Yc0Hy2ZqkQ9m1Vg', action_version: 'v1-0bWm1xRYc7sQ3JZbC4e1tA', action_status: 'returned' },
  },
  'distinct-approver-required': {
    title: 'Another key must approve this action',
    status: 403,
    when: 'The workspace requires a distinct approver and this key proposed the action (or started its run).',
    fix: 'Approve with another API key of the workspace.',
    example: { detail: 'The workspace requires a distinct approver: API key 0190a6c2-0000-7000-8000-000000000003 proposed action 0190a6c2-0000-7000-8000-000000000002 (or started the run that proposed it) and cannot approve it.', proposer_key_id: '0190a6c2-0000-7000-8000-000000000003' },
  },
  'campaign-not-found': {
    title: 'Campaign not found',
    status: 404,
    when: 'No campaign with this id exists in the account.',
    fix: 'Use a campaign id from GET /api/v1/accounts/{accountId}/campaigns.',
    example: { detail: 'No campaign 123 in this account.' },
  },
  'keyword-not-found': {
    title: 'Keyword not found',
    status: 404,
    when: 'A change names a keyword the account does not have.',
    fix: 'Use keyword ids the account reports.',
    example: { detail: 'No keyword 42 in this account.', keyword_ids: ['42'] },
  },
  'strategy-mismatch': {
    title: "The target does not match the campaign's bidding strategy",
    status: 409,
    when: 'The target sent (target_cpa or target_roas_pct) is not the one the campaign\'s bidding strategy uses.',
    fix: 'Send `expected_field` instead; changing the strategy type is not supported in v1.',
    example: { detail: 'Campaign 123 uses TARGET_CPA with a target CPA; send target_cpa, not target_roas_pct. Changing the strategy type is not supported in v1.', campaign_id: '123', bidding_strategy: 'TARGET_CPA', target_cpa: 12.5, target_roas_pct: null, expected_field: 'target_cpa' },
  },
  'change-not-applicable': {
    title: 'The change does not apply to its target',
    status: 422,
    when: 'The change cannot apply to its target as it is (a target CPA on a manual-CPC campaign, a budget of 0, ...).',
    fix: 'Change what the target supports.',
    example: { detail: 'Campaign 123 does not bid on a target CPA.' },
  },
  'invalid-date-range': {
    title: 'Invalid date range',
    status: 400,
    when: 'A date range is reversed or outside what the platform keeps.',
    fix: 'Send a start date on or before the end date, within the retention window.',
    example: { detail: 'start_date is after end_date.' },
  },
  'account-not-connected': {
    title: 'The account has no connected advertising-platform account',
    status: 409,
    when: 'The account has no usable advertising-platform grant (never connected, revoked, or unreadable).',
    fix: 'Reconnect it: `adsagent account reconnect <account id> --refresh-token-file PATH`.',
    example: { detail: 'Account 0190a6c2-0000-7000-8000-000000000000 is not connected to an advertising platform; connect it first.' },
  },
  'platform-unavailable': {
    title: 'The advertising platform is unavailable',
    status: 503,
    when: 'The advertising platform failed on its side.',
    fix: 'Retry after the Retry-After header\'s seconds.',
    example: { detail: 'Google Ads: the service is currently unavailable.' },
  },
  'platform-rate-limited': {
    title: 'Google Ads rate limit reached',
    status: 503,
    when: 'The account\'s Google Ads quota is spent for longer than a request can wait.',
    fix: 'Retry after the Retry-After header\'s seconds.',
    example: { detail: 'Google Ads: Too many requests (retry after 30 s)' },
  },
  'platform-answer-invalid': {
    title: 'Google Ads answered a value the service cannot use',
    status: 502,
    when: 'Google Ads answered a count or amount that is not a finite, non-negative number within range (for example "NaN" conversions or a negative cost); the service computes nothing from it.',
    fix: 'Retry later; if it persists, the account data on Google Ads is at fault: `detail` names the field and the value.',
    example: { detail: 'Google Ads answered metrics.conversions = "NaN", which is not a count or amount the service can use; nothing was computed from it.' },
  },
  'platform-request-refused': {
    title: 'Google Ads refused the request',
    status: 502,
    when: 'Google Ads refused a call the service made on your behalf (your own request was fine).',
    fix: 'Read `platform_errors`; change what Google objects to.',
    example: { detail: 'Google Ads: Resource was not found. (mutateError.RESOURCE_NOT_FOUND)', platform_errors: [{ error_code: 'mutateError.RESOURCE_NOT_FOUND', message: 'Resource was not found.' }] },
  },
  'invalid-customer-id': {
    title: 'Invalid Google Ads customer id',
    status: 400,
    when: 'A Google Ads customer id is not ten digits.',
    fix: 'Send ten digits, with or without dashes (123-456-7890).',
    example: { detail: '--customer-id must be a Google Ads customer id: ten digits, with or without dashes (123-456-7890)' },
  },
  'oauth-grant-refused': {
    title: 'Google refused the refresh token',
    status: 400,
    when: 'Google\'s token endpoint refused the refresh token or the OAuth client.',
    fix: 'Create a new refresh token for the configured OAuth client.',
    example: { detail: 'invalid_grant: Token has been expired or revoked.' },
  },
  'oauth-client-not-configured': {
    title: 'Google Ads OAuth client not configured',
    status: 503,
    when: 'The service has no Google Ads OAuth client configured.',
    fix: 'An operator sets GOOGLE_ADS_CLIENT_ID and GOOGLE_ADS_CLIENT_SECRET.',
    example: { detail: 'GOOGLE_ADS_CLIENT_ID and GOOGLE_ADS_CLIENT_SECRET must be set to use Google Ads accounts' },
  },
} as const satisfies Readonly<Record<string, ProblemTypeEntry>>;

export type ProblemSlug = keyof typeof PROBLEM_CATALOGUE;

export const PROBLEM_SLUGS = Object.keys(PROBLEM_CATALOGUE) as readonly ProblemSlug[];

export function isProblemSlug(slug: string): slug is ProblemSlug {
  return Object.hasOwn(PROBLEM_CATALOGUE, slug);
}
