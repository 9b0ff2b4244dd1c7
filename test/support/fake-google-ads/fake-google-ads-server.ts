import { randomBytes } from 'node:crypto';
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { seedFakeAccount, type FakeAccount, type FakeChangeEvent } from './fake-account.ts';
import { runQuery } from './fake-query.ts';
import { GaqlError } from './gaql.ts';
import { requestId, rpcError } from './fake-failure.ts';
import { applyMutate, type MutateService } from './fake-mutate.ts';

export { googleAdsFailure, rpcError, type FailureError } from './fake-failure.ts';

/**
 * A local stand-in for the Google Ads REST API and Google's OAuth token endpoint, speaking
 * their wire formats: `POST /{version}/customers/{id}/googleAds:search` with GAQL,
 * `:searchStream`, the per-service `:mutate` endpoints with validateOnly / partialFailure,
 * errors as google.rpc.Status with a GoogleAdsFailure detail, 429 with
 * quotaErrorDetails.retryDelay, and `POST /token` for refresh-token grants. Tests seed it,
 * script failures, and read back every request the adapter made.
 */
export const FAKE_CLIENT_ID = 'fake-client.apps.googleusercontent.com';
export const FAKE_CLIENT_SECRET = 'fake-client-secret';
export const FAKE_DEVELOPER_TOKEN = 'fake-developer-token';

export interface RecordedRequest {
  readonly method: string;
  readonly path: string;
  readonly headers: Readonly<Record<string, string | string[] | undefined>>;
  readonly body: unknown;
  readonly status: number;
  /** Time the fake itself spent answering (handling, not network), in ms. */
  readonly handlingMs: number;
}

/** A failure played instead of the next matching API call. */
export type ScriptedFailure =
  /** A 429 RESOURCE_EXHAUSTED; without retryDelay the quotaErrorDetails carry none (Google does not always say). */
  | { readonly kind: 'quota'; readonly retryDelay?: string }
  /** A 5xx; with `afterApplying`, a mutate is applied first and only its answer is lost (a gateway timing out on the backend). */
  | { readonly kind: 'server'; readonly status: 500 | 502 | 503 | 504; readonly afterApplying?: boolean }
  | { readonly kind: 'unauthenticated' }
  /**
   * databaseError.CONCURRENT_MODIFICATION: another request changed the same resource at once and
   * this one was aborted, nothing applied ("Retry the request"). Google sends it as 409 ABORTED,
   * at times as 400 INVALID_ARGUMENT.
   */
  | { readonly kind: 'concurrent'; readonly status?: 409 | 400 }
  /** A 400 with a GoogleAdsFailure carrying this code (e.g. { queryError: 'PROHIBITED_...' }) and message. */
  | { readonly kind: 'refused'; readonly errorCode: Record<string, string>; readonly message: string };

export interface FakeGoogleAdsOptions {
  readonly version?: string;
  /** Manager account the customer must be reached through (login-customer-id). */
  readonly managerId?: string;
  readonly accessTokenLifetimeSeconds?: number;
  /** Rows per search page (the real API has 10,000). */
  readonly pageSize?: number;
  readonly now?: () => Date;
}

export class FakeGoogleAds {
  readonly accounts = new Map<string, FakeAccount>();
  readonly requests: RecordedRequest[] = [];
  readonly validRefreshTokens = new Set<string>();
  /** Access token -> refresh token it came from and when it expires. */
  private readonly accessTokens = new Map<string, { refreshToken: string; expiresAt: number }>();
  /** Every access token the token endpoint ever issued, revoked and expired ones included (secret-leak checks). */
  readonly issuedAccessTokens: string[] = [];
  private readonly failures: { match: RegExp; failure: ScriptedFailure; when?: (body: Record<string, unknown>) => boolean }[] = [];
  private server: Server | undefined;
  tokenExchanges = 0;
  /** Above this a target CPA is refused (rangeError TOO_HIGH), in micros. */
  maxTargetCpaMicros: number | null = null;
  /** Update operations on these resource names are refused (as an operation error, so partialFailure applies the rest). */
  readonly refusedResources = new Map<string, { errorCode: Record<string, string>; message: string }>();
  /** Called with each mutate's service and body right before the fake handles it (another client acting at that moment). */
  beforeMutate: ((service: MutateService, body: Record<string, unknown>) => void) | null = null;
  /** Extra latency of every API answer, in ms (benchmarks). */
  latencyMs = 0;
  readonly version: string;
  private readonly options: FakeGoogleAdsOptions;

  constructor(options: FakeGoogleAdsOptions = {}) {
    this.options = options;
    this.version = options.version ?? 'v26';
  }

  get baseUrl(): string {
    const address = this.server?.address() as AddressInfo | null;
    if (!address) throw new Error('fake Google Ads is not listening');
    return `http://127.0.0.1:${address.port}`;
  }

  get tokenUrl(): string {
    return `${this.baseUrl}/token`;
  }

  /** The service's environment for this fake. */
  env(): Record<string, string> {
    return {
      GOOGLE_ADS_API_BASE_URL: this.baseUrl,
      GOOGLE_ADS_API_VERSION: this.version,
      GOOGLE_OAUTH_TOKEN_URL: this.tokenUrl,
      GOOGLE_ADS_CLIENT_ID: FAKE_CLIENT_ID,
      GOOGLE_ADS_CLIENT_SECRET: FAKE_CLIENT_SECRET,
      GOOGLE_ADS_DEVELOPER_TOKEN: FAKE_DEVELOPER_TOKEN,
    };
  }

  seed(customerId = '1234567890'): FakeAccount {
    const account = seedFakeAccount(customerId, this.now());
    this.accounts.set(customerId, account);
    return account;
  }

  /** A refresh token the token endpoint accepts (a long random one, easy to grep for). */
  issueRefreshToken(): string {
    const token = `1//fake-refresh-${randomBytes(24).toString('hex')}`;
    this.validRefreshTokens.add(token);
    return token;
  }

  revokeRefreshToken(token: string): void {
    this.validRefreshTokens.delete(token);
    for (const [access, grant] of this.accessTokens) if (grant.refreshToken === token) this.accessTokens.delete(access);
  }

  /** Every access token stops working now, as when they expire. */
  expireAccessTokens(): void {
    for (const grant of this.accessTokens.values()) grant.expiresAt = 0;
  }

  /** Plays `failure` instead of the next `times` calls whose path matches (and whose body `when` accepts). */
  failNext(pathPattern: RegExp, failure: ScriptedFailure, times = 1, when?: (body: Record<string, unknown>) => boolean): void {
    for (let i = 0; i < times; i++) this.failures.push({ match: pathPattern, failure, when });
  }

  /** A change made outside the service (the web UI), as change_event reports it. */
  recordOutsideChange(customerId: string, event: Omit<FakeChangeEvent, 'changeDateTime'> & { changeDateTime?: string }): void {
    this.accounts.get(customerId)!.changeEvents.push({ ...event, changeDateTime: event.changeDateTime ?? changeDateTime(this.now()) });
  }

  apiRequests(): RecordedRequest[] {
    return this.requests.filter((r) => r.path !== '/token');
  }

  mutates(service?: MutateService): RecordedRequest[] {
    return this.requests.filter((r) => r.path.endsWith(':mutate') && (service === undefined || r.path.endsWith(`/${service}:mutate`)));
  }

  async start(): Promise<this> {
    this.server = createServer((req, res) => void this.handle(req, res));
    await new Promise<void>((resolve) => this.server!.listen(0, '127.0.0.1', resolve));
    return this;
  }

  async stop(): Promise<void> {
    this.server?.closeAllConnections();
    await new Promise<void>((resolve) => (this.server ? this.server.close(() => resolve()) : resolve()));
  }

  private now(): Date {
    return this.options.now?.() ?? new Date();
  }

  private async handle(req: IncomingMessage, res: ServerResponse): Promise<void> {
    const chunks: Buffer[] = [];
    for await (const chunk of req) chunks.push(chunk as Buffer);
    const raw = Buffer.concat(chunks).toString('utf8');
    const path = (req.url ?? '/').split('?')[0]!;
    const started = performance.now();
    let body: unknown = raw;
    let status = 200;
    let answer: unknown;
    try {
      if (path === '/token') {
        const form = new URLSearchParams(raw);
        body = Object.fromEntries(form);
        [status, answer] = this.token(form);
      } else {
        body = raw ? JSON.parse(raw) : {};
        [status, answer] = this.api(req, path, body as Record<string, unknown>);
      }
    } catch (error) {
      [status, answer] = error instanceof SyntaxError ? [400, rpcError(400, 'INVALID_ARGUMENT', 'Invalid JSON payload received.', this.version)] : [500, rpcError(500, 'INTERNAL', String(error), this.version)];
    }
    const handlingMs = performance.now() - started;
    this.requests.push({ method: req.method ?? '', path, headers: { ...req.headers }, body, status, handlingMs });
    if (this.latencyMs > 0 && path !== '/token') await new Promise((r) => setTimeout(r, this.latencyMs));
    res.writeHead(status, { 'content-type': 'application/json; charset=UTF-8' });
    res.end(JSON.stringify(answer));
  }

  private token(form: URLSearchParams): [number, unknown] {
    this.tokenExchanges++;
    if (form.get('grant_type') !== 'refresh_token') return [400, { error: 'unsupported_grant_type', error_description: 'Invalid grant_type' }];
    if (form.get('client_id') !== FAKE_CLIENT_ID || form.get('client_secret') !== FAKE_CLIENT_SECRET) {
      return [401, { error: 'invalid_client', error_description: 'The OAuth client was not found.' }];
    }
    const refreshToken = form.get('refresh_token') ?? '';
    if (!this.validRefreshTokens.has(refreshToken)) return [400, { error: 'invalid_grant', error_description: 'Token has been expired or revoked.' }];
    const lifetime = this.options.accessTokenLifetimeSeconds ?? 3599;
    const access = `ya29.fake-${randomBytes(16).toString('hex')}`;
    this.accessTokens.set(access, { refreshToken, expiresAt: Date.now() + lifetime * 1000 });
    this.issuedAccessTokens.push(access);
    return [200, { access_token: access, expires_in: lifetime, scope: 'https://www.googleapis.com/auth/adwords', token_type: 'Bearer' }];
  }

  private api(req: IncomingMessage, path: string, body: Record<string, unknown>): [number, unknown] {
    const v = this.version;
    const match = /^\/(v\d+)\/customers\/(\d+)\/(googleAds:search|googleAds:searchStream|[A-Za-z]+:mutate)$/.exec(path);
    if (!match || req.method !== 'POST') return [404, rpcError(404, 'NOT_FOUND', `The requested URL ${path} was not found on this server.`, v)];
    if (match[1] !== v) return [404, rpcError(404, 'NOT_FOUND', `Version ${match[1]} is not served; use ${v}.`, v)];
    const scripted = this.failures.findIndex((f) => f.match.test(path) && (f.when?.(body) ?? true));
    let lostAnswer: 500 | 502 | 503 | 504 | null = null;
    if (scripted >= 0 && this.failures[scripted]!.failure.kind === 'server' && (this.failures[scripted]!.failure as { afterApplying?: boolean }).afterApplying) {
      lostAnswer = (this.failures.splice(scripted, 1)[0]!.failure as { status: 500 | 502 | 503 | 504 }).status;
    } else if (scripted >= 0) {
      const { failure } = this.failures.splice(scripted, 1)[0]!;
      if (failure.kind === 'quota') {
        return [
          429,
          rpcError(429, 'RESOURCE_EXHAUSTED', 'Resource has been exhausted (e.g. check quota).', v, [
            {
              errorCode: { quotaError: 'RESOURCE_EXHAUSTED' },
              message: failure.retryDelay ? `Too many requests. Retry in ${failure.retryDelay}.` : 'Too many requests.',
              details: {
                quotaErrorDetails: { rateScope: 'ACCOUNT', rateName: 'Requests per service per method', ...(failure.retryDelay ? { retryDelay: failure.retryDelay } : {}) },
              },
            },
          ]),
        ];
      }
      if (failure.kind === 'refused') {
        return [400, rpcError(400, 'INVALID_ARGUMENT', 'Request contains an invalid argument.', v, [{ errorCode: failure.errorCode, message: failure.message }])];
      }
      if (failure.kind === 'concurrent') {
        const status = failure.status ?? 409;
        return [
          status,
          rpcError(status, status === 409 ? 'ABORTED' : 'INVALID_ARGUMENT', 'Multiple requests were attempting to modify the same resource at once.', v, [
            { errorCode: { databaseError: 'CONCURRENT_MODIFICATION' }, message: 'Multiple requests were attempting to modify the same resource at once. Retry the request.' },
          ]),
        ];
      }
      if (failure.kind === 'server') return [failure.status, rpcError(failure.status, 'UNAVAILABLE', 'The service is currently unavailable.', v)];
      return unauthenticated(v);
    }
    const auth = /^Bearer (.+)$/.exec(String(req.headers.authorization ?? ''));
    const grant = auth ? this.accessTokens.get(auth[1]!) : undefined;
    if (!grant || grant.expiresAt <= Date.now() || !this.validRefreshTokens.has(grant.refreshToken)) return unauthenticated(v);
    if (req.headers['developer-token'] !== FAKE_DEVELOPER_TOKEN) {
      return [401, rpcError(401, 'UNAUTHENTICATED', 'Request is missing required authentication credential.', v, [{ errorCode: { authenticationError: 'DEVELOPER_TOKEN_NOT_APPROVED' }, message: 'The developer token is not approved.' }])];
    }
    const customerId = match[2]!;
    const account = this.accounts.get(customerId);
    const manager = this.options.managerId;
    if (!account || (manager !== undefined && req.headers['login-customer-id'] !== manager)) {
      return [
        403,
        rpcError(403, 'PERMISSION_DENIED', "The caller does not have permission", v, [
          { errorCode: { authorizationError: 'USER_PERMISSION_DENIED' }, message: "User doesn't have permission to access customer. Note: If you're accessing a client customer, the manager's customer id must be set in the 'login-customer-id' header." },
        ]),
      ];
    }
    const endpoint = match[3]!;
    if (lostAnswer !== null && endpoint.startsWith('googleAds:search')) return [lostAnswer, rpcError(lostAnswer, 'UNAVAILABLE', 'The service is currently unavailable.', v)];
    if (endpoint.startsWith('googleAds:search')) {
      try {
        const { results, fieldMask } = runQuery(account, String(body.query ?? ''), changeDateTime(this.now()));
        if (endpoint === 'googleAds:searchStream') return [200, [{ results, fieldMask, requestId: requestId() }]];
        const pageSize = this.options.pageSize ?? 10_000;
        const offset = body.pageToken ? Number(Buffer.from(String(body.pageToken), 'base64url').toString()) : 0;
        const page = results.slice(offset, offset + pageSize);
        const next = offset + pageSize < results.length ? Buffer.from(String(offset + pageSize)).toString('base64url') : undefined;
        return [200, { results: page, fieldMask, requestId: requestId(), ...(next ? { nextPageToken: next } : {}) }];
      } catch (error) {
        if (!(error instanceof GaqlError)) throw error;
        return [400, rpcError(400, 'INVALID_ARGUMENT', 'Request contains an invalid argument.', v, [{ errorCode: { [error.family]: error.code }, message: error.message }])];
      }
    }
    const service = endpoint.slice(0, -':mutate'.length) as MutateService;
    this.beforeMutate?.(service, body);
    const outcome = applyMutate(this, account, service, body);
    if (lostAnswer !== null) return [lostAnswer, rpcError(lostAnswer, 'UNAVAILABLE', 'The service is currently unavailable.', v)];
    if (outcome.kind === 'refused') {
      return [400, rpcError(400, 'INVALID_ARGUMENT', 'Request contains an invalid argument.', v, outcome.errors)];
    }
    return [200, outcome.response];
  }

  /** Stamp for change_event rows the fake writes for its own mutations. */
  stamp(): string {
    return changeDateTime(this.now());
  }
}

/** "yyyy-MM-dd HH:mm:ss.SSSSSS", as change_event.change_date_time reads. */
function changeDateTime(date: Date): string {
  return `${date.toISOString().replace('T', ' ').slice(0, 23)}000`;
}

function unauthenticated(version: string): [number, unknown] {
  return [
    401,
    rpcError(
      401,
      'UNAUTHENTICATED',
      'Request had invalid authentication credentials. Expected OAuth 2 access token, login cookie or other valid authentication credential.',
      version,
      [{ errorCode: { authenticationError: 'OAUTH_TOKEN_INVALID' }, message: 'Oauth token is invalid.' }],
    ),
  ];
}
