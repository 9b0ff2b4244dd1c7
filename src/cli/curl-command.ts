/** One HTTP request the demo prints as a ready-to-paste curl, with the status it answers. */
export interface HttpExample {
  /** Short name, e.g. `poll_run`; also the key in `--json` output. */
  readonly name: string;
  /** One line for the reader: what the request does and what to look at in its answer. */
  readonly description: string;
  readonly method: 'GET' | 'POST' | 'DELETE';
  readonly url: string;
  readonly headers: Readonly<Record<string, string>>;
  /** A JSON body, sent as application/json. */
  readonly body?: unknown;
  /** The status the request answers right after the demo, which the demo test checks. */
  readonly expectStatus: number;
  /** A Server-Sent Events stream: curl must not buffer it (-N). */
  readonly stream?: boolean;
}

/**
 * The curl command line of an example, quoted for POSIX shells (keys and JSON may hold
 * characters a shell would read).
 *
 * @example
 * curlCommand({ name: 'accounts', description: '', method: 'GET', url: 'http://localhost:8080/api/v1/accounts',
 *   headers: { Authorization: 'Bearer ak_1' }, expectStatus: 200 })
 * // => "curl -si -H 'Authorization: Bearer ak_1' http://localhost:8080/api/v1/accounts"
 */
export function curlCommand(example: HttpExample): string {
  const args = ['curl', example.stream ? '-siN' : '-si'];
  if (example.method !== 'GET') args.push('-X', example.method);
  for (const [name, value] of Object.entries(example.headers)) args.push('-H', `${name}: ${value}`);
  if (example.body !== undefined) args.push('-H', 'Content-Type: application/json', '-d', JSON.stringify(example.body));
  args.push(example.url);
  return args.map(shellWord).join(' ');
}

/** Characters a POSIX shell reads literally outside quotes (URLs and flags stay readable). */
const PLAIN_WORD = /^[A-Za-z0-9_\-.,:/@=+%]+$/;

/** One argument for a POSIX shell: as is when plain, else in single quotes (a ' inside written as '\''). */
function shellWord(word: string): string {
  if (PLAIN_WORD.test(word)) return word;
  return `'${word.replaceAll("'", `'\\''`)}'`;
}
