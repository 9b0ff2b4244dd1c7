import { CliError } from './output.ts';

/** A response the demo read: its status and its JSON body (null when it has none). */
export interface DemoResponse {
  readonly status: number;
  readonly body: any;
}

/**
 * The few HTTP calls `adsagent demo` makes to the running service, as any client would.
 * A service that cannot be reached is a CliError that says how to start it or where to point.
 */
export class DemoApi {
  readonly baseUrl: string;

  constructor(baseUrl: string) {
    this.baseUrl = baseUrl.replace(/\/+$/, '');
  }

  async call(method: 'GET' | 'POST' | 'DELETE', path: string, key: string | null, body?: unknown, headers: Record<string, string> = {}): Promise<DemoResponse> {
    const sent: Record<string, string> = { ...headers };
    if (key) sent.authorization = `Bearer ${key}`;
    if (body !== undefined) sent['content-type'] = 'application/json';
    let response: Response;
    try {
      response = await fetch(`${this.baseUrl}${path}`, {
        method,
        headers: sent,
        body: body === undefined ? undefined : JSON.stringify(body),
        signal: AbortSignal.timeout(30_000),
      });
    } catch (error) {
      const cause = (error as { cause?: { code?: string } }).cause?.code ?? (error instanceof Error ? error.message : String(error));
      throw new CliError(
        `cannot reach the service at ${this.baseUrl} (${cause}): start it with \`npm start\` in another terminal, ` +
          'or pass --url with the address it listens on (PUBLIC_BASE_URL is the default)',
      );
    }
    const text = await response.text();
    let parsed: unknown = null;
    try {
      parsed = text === '' ? null : JSON.parse(text);
    } catch {
      parsed = text;
    }
    return { status: response.status, body: parsed };
  }

  /** Calls and insists on one status; anything else is a CliError naming the request and the problem the service sent. */
  async expect(status: number, method: 'GET' | 'POST' | 'DELETE', path: string, key: string | null, body?: unknown, headers?: Record<string, string>): Promise<any> {
    const response = await this.call(method, path, key, body, headers);
    if (response.status !== status) {
      const problem = response.body && typeof response.body === 'object' ? `${response.body.title ?? ''}: ${response.body.detail ?? ''}` : String(response.body);
      throw new CliError(`${method} ${path} answered ${response.status}, expected ${status} (${problem}); check the service's log for this request`);
    }
    return response.body;
  }
}
