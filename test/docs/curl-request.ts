import { parse } from 'shell-quote';

/** A curl command line, read back the way a POSIX shell and curl read it. */
export interface CurlRequest {
  readonly method: string;
  readonly url: string;
  readonly headers: Record<string, string>;
  readonly body: string | undefined;
}

/**
 * Reads the curl options the docs and the demo use (-s -i -N -X -H -d and the URL), with
 * shell quoting, line continuations and `$NAME` variables resolved from `variables`. Any
 * other option, an unknown variable or a shell operator is an error, so an example that
 * uses something this reader does not understand fails the test instead of being skipped.
 *
 * @example
 * parseCurl(`curl -s -H "Authorization: Bearer $API_KEY" http://x/api/v1/accounts`, { API_KEY: 'ak_1' })
 * // => { method: 'GET', url: 'http://x/api/v1/accounts', headers: { authorization: 'Bearer ak_1' }, body: undefined }
 */
export function parseCurl(command: string, variables: Readonly<Record<string, string>> = {}): CurlRequest {
  const joined = command.replace(/\\\r?\n/g, ' ').trim();
  const words = parse(joined, (name: string) => {
    const value = variables[name];
    if (value === undefined) throw new Error(`unknown variable $${name} in: ${joined}`);
    return value;
  });
  const strings = words.map((word) => {
    if (typeof word !== 'string') throw new Error(`shell operator ${JSON.stringify(word)} in: ${joined}`);
    return word;
  });
  const [program, ...args] = strings;
  if (program !== 'curl') throw new Error(`not a curl command: ${joined}`);
  let method: string | undefined;
  let url: string | undefined;
  let body: string | undefined;
  const headers: Record<string, string> = {};
  for (let i = 0; i < args.length; i++) {
    const arg = args[i]!;
    if (/^-[siNS]+$/.test(arg)) continue;
    if (arg === '-X') method = args[++i];
    else if (arg === '-H') {
      const header = args[++i] ?? '';
      const colon = header.indexOf(':');
      if (colon < 1) throw new Error(`bad header '${header}' in: ${joined}`);
      headers[header.slice(0, colon).trim().toLowerCase()] = header.slice(colon + 1).trim();
    } else if (arg === '-d' || arg === '--data') body = args[++i];
    else if (!arg.startsWith('-') && url === undefined) url = arg;
    else throw new Error(`curl argument '${arg}' not understood in: ${joined}`);
  }
  if (url === undefined) throw new Error(`no URL in: ${joined}`);
  // curl's own defaults: -d makes a POST (and sends a form content type unless told otherwise).
  if (body !== undefined) headers['content-type'] ??= 'application/x-www-form-urlencoded';
  return { method: method ?? (body === undefined ? 'GET' : 'POST'), url, headers, body };
}

/** What a request answered: its status, and its body unless it is an event stream (closed once its status is known). */
export async function sendCurl(request: CurlRequest): Promise<{ status: number; body: string | null }> {
  const controller = new AbortController();
  const response = await fetch(request.url, { method: request.method, headers: request.headers, body: request.body, signal: controller.signal });
  if ((response.headers.get('content-type') ?? '').startsWith('text/event-stream')) {
    controller.abort();
    return { status: response.status, body: null };
  }
  return { status: response.status, body: await response.text() };
}
