import { expect } from 'chai';
import { spawn, type ChildProcess } from 'node:child_process';
import { connect } from 'node:net';
import { sql } from 'kysely';
import { v7 as uuidv7 } from 'uuid';
import { requestFingerprint } from '../../src/http/idempotency/idempotency-store.ts';
import { streams } from '../../src/event-store/subjects.ts';
import { serviceEnv } from '../support/cli.ts';
import { seededRandom } from '../support/seeded-random.ts';
import { startTestService, type TestService, type TestTenant } from '../support/test-service.ts';
import { API_TEST_ROLES, call, expectProblem, freshAccount, runIdsOf } from './support/api-call.ts';
import { assertMatchesOpenApi, openApiValidator } from './support/openapi-response-validator.ts';
import { campaignsByStrategy, targetPath } from '../safe-apply/helpers.ts';
import { accountDecider } from '../../commands/account/account-decider.ts';

/**
 * Seeded race test of `Idempotency-Key` on POST /api/v1/runs, as a client sees it, over two
 * HTTP processes on the same stream and schema (this test's in-process service with the
 * projectors, and a spawned `ROLES=http` process). docs/api.md, "Idempotency-Key":
 *
 * - scoped to the API key; a retry with the same body replays 202 + `Idempotent-Replayed: true`
 *   with the same run id; the same value with another body: 422 `idempotency-key-reused`;
 *   while the first request is processed: 409 `idempotent-request-in-progress` + Retry-After (1–10);
 * - only a 202 is remembered (409 `run-in-progress` leaves the key unused);
 * - 1 to 255 visible ASCII, empty header = 400 `invalid-idempotency-key`, leading/trailing
 *   spaces are not part of the value; one run per account at a time (409 `run-in-progress`).
 *
 * Every request of a burst is checked against the OpenAPI document (fetch) or the Problem
 * schema (raw socket), and every run count against the account's history in the event log.
 *
 * IDEMPOTENCY_RACE_SEED=<n> replays another seed (timing still varies from run to run);
 * IDEMPOTENCY_RACE_VERBOSE=1 prints every answer of each key.
 */

const SEED = Number(process.env.IDEMPOTENCY_RACE_SEED ?? 0x1d3_6a7e);
/** No answer within this is a hang. */
const HANG_MS = 15_000;
const PATH = '/api/v1/runs';
const VERBOSE = process.env.IDEMPOTENCY_RACE_VERBOSE !== undefined;

interface Via {
  readonly name: 'A' | 'B';
  readonly url: string;
}

interface Answer {
  readonly via: string;
  readonly label: string;
  readonly status: number;
  readonly headers: Headers;
  readonly body: any;
  readonly text: string;
}

const replayed = (a: Answer): boolean => a.headers.get('idempotent-replayed') === 'true';
const slugOf = (a: Answer): string => (typeof a.body?.type === 'string' ? a.body.type.split('/').pop() : '');
const describeAnswer = (a: Answer): string =>
  `${a.label} via ${a.via}: ${a.status}${replayed(a) ? ' (replayed)' : ''} ${a.status >= 300 ? slugOf(a) || a.text.slice(0, 200) : a.body?.id}`;
const summary = (answers: readonly Answer[]): string => answers.map(describeAnswer).join('\n');

describe(`POST /api/v1/runs Idempotency-Key races over two HTTP processes (seed ${SEED})`, function () {
  this.timeout(60_000);
  let svc: TestService;
  let t1: TestTenant;
  let t2: TestTenant;
  let child: ChildProcess | undefined;
  let A: Via;
  let B: Via;
  const rand = seededRandom(SEED);
  const int = (min: number, max: number): number => min + Math.floor(rand() * (max - min + 1));
  const pick = <T>(xs: readonly T[]): T => xs[Math.floor(rand() * xs.length)]!;
  const shuffle = <T>(xs: readonly T[]): T[] => {
    const out = [...xs];
    for (let i = out.length - 1; i > 0; i--) {
      const j = Math.floor(rand() * (i + 1));
      [out[i], out[j]] = [out[j]!, out[i]!];
    }
    return out;
  };
  let counter = 0;
  const newKey = (): string => `race-${SEED.toString(36)}-${Math.floor(rand() * 2 ** 32).toString(36)}-${++counter}`;
  const via = (): Via => (rand() < 0.5 ? A : B);

  before(async function () {
    this.timeout(60_000);
    console.log(`      idempotency-race seed: ${SEED} (IDEMPOTENCY_RACE_SEED=${SEED} to replay)`);
    svc = await startTestService('idem-race', { ROLES: API_TEST_ROLES });
    [t1, t2] = await Promise.all([svc.tenant('race-one'), svc.tenant('race-two')]);
    A = { name: 'A', url: svc.baseUrl };
    const spawned = spawn(process.execPath, ['src/main.ts'], {
      env: { ...process.env, ...serviceEnv(svc.config), LOG_LEVEL: 'info', ROLES: 'http', HOST: '127.0.0.1', PORT: '0', SHUTDOWN_GRACE_MS: '1000' },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    child = spawned;
    const url = await new Promise<string>((resolve, reject) => {
      let stderr = '';
      let stdout = '';
      let listening = '';
      const check = () => {
        if (listening && stdout.includes('"msg":"service started"')) resolve(listening);
      };
      spawned.stderr!.on('data', (chunk: Buffer) => {
        stderr = (stderr + chunk.toString()).slice(-4000);
        listening ||= /listening on (http:\/\/[^\s]+)/.exec(stderr)?.[1] ?? '';
        check();
      });
      spawned.stdout!.on('data', (chunk: Buffer) => {
        stdout = (stdout + chunk.toString()).slice(-4000);
        check();
      });
      spawned.once('exit', (code, signal) => reject(new Error(`HTTP process B exited (${code ?? signal}) before it started: ${stderr.trim()}`)));
      setTimeout(() => reject(new Error('HTTP process B did not start within 40 s')), 40_000).unref();
    });
    B = { name: 'B', url };
    // B knows both tenants' keys (it loads them at start) and serves.
    const ready = await fetch(`${B.url}/readyz`);
    expect(ready.status).to.equal(200);
  });

  after(async () => {
    if (child && child.exitCode === null && child.signalCode === null) {
      const exited = new Promise((resolve) => child!.once('exit', resolve));
      child.kill('SIGTERM');
      const timer = setTimeout(() => child!.kill('SIGKILL'), 5000);
      await exited;
      clearTimeout(timer);
    }
    await svc?.stop();
  });

  /** POST /api/v1/runs through fetch; `body` is sent as given when a string (spelling variants). */
  async function post(target: Via, key: string, body: string | object, idem: string | null, label: string, delayMs = 0, giveUp?: AbortSignal, path = PATH): Promise<Answer> {
    if (delayMs > 0) await new Promise((resolve) => setTimeout(resolve, delayMs));
    const headers: Record<string, string> = { authorization: `Bearer ${key}`, 'content-type': 'application/json' };
    if (idem !== null) headers['idempotency-key'] = idem;
    let response: Response;
    try {
      response = await fetch(`${target.url}${path}`, {
        method: 'POST',
        headers,
        body: typeof body === 'string' ? body : JSON.stringify(body),
        signal: giveUp ? AbortSignal.any([giveUp, AbortSignal.timeout(HANG_MS)]) : AbortSignal.timeout(HANG_MS),
      });
    } catch (error) {
      if (giveUp?.aborted) return { via: target.name, label, status: -1, headers: new Headers(), body: undefined, text: 'the client gave up' };
      return { via: target.name, label, status: 0, headers: new Headers(), body: undefined, text: `no answer: ${(error as Error).message}` };
    }
    let text: string;
    try {
      text = await response.text();
    } catch (error) {
      if (giveUp?.aborted) return { via: target.name, label, status: -1, headers: new Headers(), body: undefined, text: 'the client gave up' };
      return { via: target.name, label, status: 0, headers: new Headers(), body: undefined, text: `no body: ${(error as Error).message}` };
    }
    const parsed = text === '' ? undefined : /[/+]json\b/.test(response.headers.get('content-type') ?? '') ? JSON.parse(text) : text;
    assertMatchesOpenApi('POST', path === PATH ? PATH : '/api/v1/accounts/{projectId}/campaigns/{campaignId}/target', response, parsed);
    return { via: target.name, label, status: response.status, headers: response.headers, body: parsed, text };
  }

  /**
   * POST /api/v1/runs written byte by byte on a socket: what fetch refuses to send (NUL,
   * non-ASCII, a repeated header line). `extra` are whole header lines without CRLF.
   */
  function rawPost(target: Via, key: string, body: string, extra: readonly Buffer[], label: string): Promise<Answer> {
    const { hostname, port } = new URL(target.url);
    const head = Buffer.from(
      `POST ${PATH} HTTP/1.1\r\nHost: ${hostname}:${port}\r\nAuthorization: Bearer ${key}\r\nContent-Type: application/json\r\n` +
        `Content-Length: ${Buffer.byteLength(body)}\r\nConnection: close\r\n`,
      'latin1',
    );
    const request = Buffer.concat([head, ...extra.flatMap((line) => [line, Buffer.from('\r\n')]), Buffer.from('\r\n'), Buffer.from(body)]);
    return new Promise<Answer>((resolve) => {
      const chunks: Buffer[] = [];
      const socket = connect(Number(port), hostname);
      const finish = (note?: string) => {
        clearTimeout(timer);
        const raw = Buffer.concat(chunks).toString('latin1');
        const end = raw.indexOf('\r\n\r\n');
        if (end === -1) {
          resolve({ via: target.name, label, status: 0, headers: new Headers(), body: undefined, text: note ?? `no answer: ${JSON.stringify(raw.slice(0, 200))}` });
          return;
        }
        const [statusLine, ...lines] = raw.slice(0, end).split('\r\n');
        const headers = new Headers();
        for (const line of lines) {
          const colon = line.indexOf(':');
          headers.append(line.slice(0, colon).trim(), line.slice(colon + 1).trim());
        }
        const text = Buffer.from(raw.slice(end + 4), 'latin1').toString('utf8');
        let parsed: any = text;
        try {
          parsed = JSON.parse(text);
        } catch {
          /* kept as text */
        }
        resolve({ via: target.name, label, status: Number(statusLine!.split(' ')[1]), headers, body: parsed, text });
      };
      const timer = setTimeout(() => {
        socket.destroy();
        finish('no answer (hang)');
      }, HANG_MS);
      socket.on('data', (chunk: Buffer) => chunks.push(chunk));
      socket.on('error', () => undefined);
      socket.on('close', () => finish());
      socket.write(request);
    });
  }

  /** Run ids of every RunQueued in the account's history (the event log, not a read model). */
  async function runQueuedOn(workspaceId: string, accountId: string): Promise<string[]> {
    const { store, subjects } = svc.service.infrastructure;
    const subject = subjects.forAggregate(streams.account(workspaceId, accountId));
    const ids: string[] = [];
    for await (const { subject: at, event } of store.readFiltered(subjects.all, 1)) {
      if (at === subject && event.type === 'RunQueued') ids.push(String((event.data as { run_id?: unknown }).run_id));
    }
    return ids;
  }

  /** Nothing answered 5xx, nothing hung: every answer is one of the documented kinds. */
  function expectNoServerErrorOrHang(answers: readonly Answer[]): void {
    const bad = answers.filter((a) => a.status === 0 || a.status >= 500);
    expect(bad.map(describeAnswer), `5xx or hang (seed ${SEED}):\n${summary(answers)}`).to.deep.equal([]);
  }

  /**
   * The answers one Idempotency-Key gets when its first request succeeds: exactly one fresh
   * 202, every other one a replay of that 202 (same body, same Location) or 409
   * idempotent-request-in-progress with Retry-After 1 to 10. Returns the run id.
   */
  function expectOneRunForKey(answers: readonly Answer[], context: string): string {
    if (VERBOSE) console.log(`      ${context}:\n${summary(answers).replace(/^/gm, '        ')}`);
    const fresh = answers.filter((a) => a.status === 202 && !replayed(a));
    expect(fresh.length, `${context}: exactly one fresh 202 (seed ${SEED}):\n${summary(answers)}`).to.equal(1);
    const first = fresh[0]!;
    expect(first.body.status).to.equal('queued');
    for (const a of answers) {
      if (a === first) continue;
      if (a.status === 202) {
        expect(replayed(a), `${context}: ${describeAnswer(a)}`).to.equal(true);
        expect(a.body, `${context}: a replay answers the first 202's body`).to.deep.equal(first.body);
        expect(a.headers.get('location')).to.equal(first.headers.get('location'));
      } else {
        expect(a.status, `${context}: ${describeAnswer(a)}\n${summary(answers)}`).to.equal(409);
        expectProblem(a, 409, 'idempotent-request-in-progress');
        const retryAfter = Number(a.headers.get('retry-after'));
        expect(retryAfter, `${context}: Retry-After of ${describeAnswer(a)}`).to.be.within(1, 10);
        expect(Number.isInteger(retryAfter)).to.equal(true);
      }
    }
    const ids = new Set(answers.filter((a) => a.status === 202).map((a) => a.body.id));
    expect([...ids], context).to.deep.equal([first.body.id]);
    return first.body.id as string;
  }

  /** Both processes answer the run (read-your-writes), queued, never 404. */
  async function expectPollable(runId: string, key: string, status = 'queued'): Promise<void> {
    for (const target of [A, B]) {
      const polled = await fetch(`${target.url}${PATH}/${runId}`, { headers: { authorization: `Bearer ${key}` }, signal: AbortSignal.timeout(HANG_MS) });
      const body = (await polled.json()) as { id: string; status: string };
      expect(polled.status, `GET via ${target.name}`).to.equal(200);
      expect(body.id).to.equal(runId);
      expect(body.status).to.equal(status);
    }
  }

  /** The same request in other spellings: key order, whitespace, a spelled-out default, JSON escapes. */
  function spellings(brief: string, projectId: string): string[] {
    const escaped = JSON.stringify(brief).replace(/[a-z]/, (c) => `\\u${c.charCodeAt(0).toString(16).padStart(4, '0')}`);
    return [
      JSON.stringify({ brief, project_id: projectId }),
      JSON.stringify({ project_id: projectId, brief }),
      JSON.stringify({ brief, project_id: projectId, auto_apply: false }),
      `{\n  "project_id" : ${JSON.stringify(projectId)},\t"auto_apply":false ,\r\n "brief":${escaped} }`,
      `  {"brief":${escaped},"project_id":${JSON.stringify(projectId)}}  `,
      // Every character beyond ASCII as a \u escape (an emoji as its surrogate pair).
      JSON.stringify({ project_id: projectId, brief }).replace(/[\u007f-\uffff]/g, (c) => `\\u${c.charCodeAt(0).toString(16).padStart(4, '0')}`),
    ];
  }

  it('a burst with one Idempotency-Key and one request (in several spellings) over both processes queues exactly one run', async () => {
    for (let round = 0; round < 3; round++) {
      const account = await freshAccount(svc, t1.workspaceId, `burst ${round}`);
      const idem = newKey();
      const brief = `Find wasted spend (réduire le gaspillage 🔥), burst ${round}.`;
      const bodies = spellings(brief, account);
      const n = int(20, 50);
      const answers = await Promise.all(
        Array.from({ length: n }, (_, i) => post(via(), t1.keys.write, pick(bodies), idem, `#${i}`, int(0, 3))),
      );
      expectNoServerErrorOrHang(answers);
      const runId = expectOneRunForKey(answers, `round ${round} (${n} requests)`);
      expect(await runQueuedOn(t1.workspaceId, account), 'RunQueued events in the account history').to.deep.equal([runId]);
      expect(await runIdsOf(svc, account)).to.deep.equal([runId]);
      await expectPollable(runId, t1.keys.write);

      // Settled: a retry through either process is a replay, of the same run.
      for (const target of [A, B]) {
        const later = await post(target, t1.keys.write, pick(bodies), idem, `later via ${target.name}`);
        expect(later.status, describeAnswer(later)).to.equal(202);
        expect(replayed(later)).to.equal(true);
        expect(later.body.id).to.equal(runId);
      }
      expect(await runQueuedOn(t1.workspaceId, account)).to.deep.equal([runId]);
    }
  });

  it('the same key with different bodies at once: one run, the other bodies 422 idempotency-key-reused, never a second run', async () => {
    for (let round = 0; round < 2; round++) {
      const [x, y] = await Promise.all([freshAccount(svc, t1.workspaceId, `x ${round}`), freshAccount(svc, t1.workspaceId, `y ${round}`)]);
      const idem = newKey();
      const brief = `Audit the search terms, round ${round}.`;
      /** Request classes: each one meaning, in any spelling. */
      const classes: Record<string, string[]> = {
        original: spellings(brief, x),
        otherBrief: [JSON.stringify({ brief: `${brief} And the keywords.`, project_id: x })],
        otherAccount: spellings(brief, y),
        autoApply: [JSON.stringify({ brief, project_id: x, auto_apply: true })],
      };
      const names = Object.keys(classes);
      const n = int(20, 50);
      const plan = Array.from({ length: n }, (_, i) => ({ i, cls: i < names.length ? names[i]! : pick(names) }));
      const answers = await Promise.all(
        shuffle(plan).map(({ i, cls }) => post(via(), t1.keys.write, pick(classes[cls]!), idem, `#${i} ${cls}`, int(0, 3)).then((a) => ({ a, cls }))),
      );
      const all = answers.map(({ a }) => a);
      expectNoServerErrorOrHang(all);
      const fresh = answers.filter(({ a }) => a.status === 202 && !replayed(a));
      expect(fresh.length, `exactly one fresh 202 (seed ${SEED}):\n${summary(all)}`).to.equal(1);
      const winner = fresh[0]!.cls;
      const runId = expectOneRunForKey(answers.filter(({ cls }) => cls === winner).map(({ a }) => a), `class ${winner}`);
      for (const { a } of answers.filter(({ cls }) => cls !== winner)) {
        expect(a.status, `${describeAnswer(a)} (winner ${winner})`).to.equal(422);
        expectProblem(a, 422, 'idempotency-key-reused');
      }
      const queued = [...(await runQueuedOn(t1.workspaceId, x)), ...(await runQueuedOn(t1.workspaceId, y))];
      expect(queued, `RunQueued on both accounts (winner ${winner})`).to.deep.equal([runId]);
      await expectPollable(runId, t1.keys.write);
    }
  });

  it('the same key value under different API keys and workspaces at once: one run per API key, no cross-talk', async () => {
    const idem = newKey();
    const brief = 'Shared key value, separate callers.';
    const [x1, x2, x3, y1] = await Promise.all([
      freshAccount(svc, t1.workspaceId, 'scoped write'),
      freshAccount(svc, t1.workspaceId, 'scoped admin'),
      freshAccount(svc, t1.workspaceId, 'scoped read'),
      freshAccount(svc, t2.workspaceId, 'scoped other workspace'),
    ]);
    const callers = [
      { name: 't1.write', key: t1.keys.write, ws: t1.workspaceId, account: x1 },
      { name: 't1.admin', key: t1.keys.admin, ws: t1.workspaceId, account: x2 },
      { name: 't1.read', key: t1.keys.read, ws: t1.workspaceId, account: x3 },
      { name: 't2.write', key: t2.keys.write, ws: t2.workspaceId, account: y1 },
    ];
    // t2.admin names t1.write's account (same key value, same body as t1.write): another
    // workspace's account is not found, and it must never be handed t1.write's run.
    const intruder = { name: 't2.admin', key: t2.keys.admin, body: JSON.stringify({ brief, project_id: x1 }) };
    const n = int(30, 50);
    const plan = Array.from({ length: n }, (_, i) => (i < callers.length + 1 ? i : int(0, callers.length)));
    const answers = await Promise.all(
      shuffle(plan).map((c, i) => {
        const caller = callers[c];
        return caller
          ? post(via(), caller.key, pick(spellings(brief, caller.account)), idem, `#${i} ${caller.name}`, int(0, 3)).then((a) => ({ a, c }))
          : post(via(), intruder.key, intruder.body, idem, `#${i} ${intruder.name}`, int(0, 3)).then((a) => ({ a, c }));
      }),
    );
    expectNoServerErrorOrHang(answers.map(({ a }) => a));
    const runIds: string[] = [];
    for (const [c, caller] of callers.entries()) {
      const mine = answers.filter((x) => x.c === c).map(({ a }) => a);
      const runId = expectOneRunForKey(mine, caller.name);
      runIds.push(runId);
      expect(await runQueuedOn(caller.ws, caller.account), `${caller.name}'s account history`).to.deep.equal([runId]);
      await expectPollable(runId, caller.key);
    }
    expect(new Set(runIds).size, 'each API key has a run of its own').to.equal(callers.length);
    const intruded = answers.filter((x) => x.c === callers.length).map(({ a }) => a);
    expect(intruded.length).to.be.greaterThan(0);
    for (const a of intruded) {
      // Its own claim fails (404) and is released; a concurrent duplicate may see it held.
      if (a.status === 409) expectProblem(a, 409, 'idempotent-request-in-progress');
      else expectProblem(a, 404, 'account-not-found');
    }
    expect(intruded.filter((a) => a.status === 404).length, summary(intruded)).to.be.greaterThan(0);
    // t2.admin queued nothing anywhere: t1.write's account still has its one run.
    expect(await runQueuedOn(t1.workspaceId, x1)).to.deep.equal([runIds[0]]);
    expect(await runQueuedOn(t2.workspaceId, x1)).to.deep.equal([]);
  });

  it('hostile Idempotency-Key values at once answer only what docs/api.md says, and the valid ones (spaces dropped) share one run', async () => {
    const account = await freshAccount(svc, t1.workspaceId, 'hostile keys');
    const idem = newKey();
    const body = JSON.stringify({ brief: 'Hostile keys.', project_id: account });
    const key = t1.keys.write;
    const line = (value: string | Buffer): Buffer => Buffer.concat([Buffer.from('Idempotency-Key: '), typeof value === 'string' ? Buffer.from(value, 'latin1') : value]);
    type Probe = { label: string; send: (target: Via, i: number) => Promise<Answer>; expect: 'same-run' | [number, string] };
    const probes: Probe[] = [
      { label: 'only spaces', send: (t, i) => rawPost(t, key, body, [line('   ')], `#${i} only spaces`), expect: [400, 'invalid-idempotency-key'] },
      { label: 'empty', send: (t, i) => post(t, key, body, '', `#${i} empty`), expect: [400, 'invalid-idempotency-key'] },
      { label: '10,000 chars', send: (t, i) => post(t, key, body, 'k'.repeat(10_000), `#${i} 10k`), expect: [400, 'invalid-idempotency-key'] },
      { label: '256 chars', send: (t, i) => post(t, key, body, `${idem}${'k'.repeat(256 - idem.length)}`, `#${i} 256`), expect: [400, 'invalid-idempotency-key'] },
      { label: 'inner space', send: (t, i) => post(t, key, body, `${idem} x`, `#${i} inner space`), expect: [400, 'invalid-idempotency-key'] },
      { label: 'inner tab', send: (t, i) => post(t, key, body, `${idem}\tx`, `#${i} inner tab`), expect: [400, 'invalid-idempotency-key'] },
      // NUL, CR and DEL are not allowed in an HTTP field value at all: node's parser refuses the
      // request before any route, as 400 malformed-request ("not valid HTTP/1.1").
      { label: 'NUL', send: (t, i) => rawPost(t, key, body, [line(Buffer.concat([Buffer.from(idem), Buffer.from([0]), Buffer.from('x')]))], `#${i} NUL`), expect: [400, 'malformed-request'] },
      { label: 'non-ASCII (UTF-8)', send: (t, i) => rawPost(t, key, body, [line(Buffer.from(`${idem}-ключ-🔑`, 'utf8'))], `#${i} non-ASCII`), expect: [400, 'invalid-idempotency-key'] },
      { label: 'non-ASCII (latin1 é)', send: (t, i) => rawPost(t, key, body, [line(Buffer.from(`${idem}é`, 'latin1'))], `#${i} latin1`), expect: [400, 'invalid-idempotency-key'] },
      { label: 'repeated header, same value', send: (t, i) => rawPost(t, key, body, [line(idem), line(idem)], `#${i} repeated`), expect: [400, 'invalid-idempotency-key'] },
      { label: 'repeated header, one empty', send: (t, i) => rawPost(t, key, body, [line(idem), line('')], `#${i} repeated+empty`), expect: [400, 'invalid-idempotency-key'] },
      { label: 'DEL', send: (t, i) => rawPost(t, key, body, [line(`${idem}\x7fx`)], `#${i} DEL`), expect: [400, 'malformed-request'] },
      { label: 'bare CR', send: (t, i) => rawPost(t, key, body, [line(`${idem}\rx`)], `#${i} CR`), expect: [400, 'malformed-request'] },
      { label: 'obs-fold continuation', send: (t, i) => rawPost(t, key, body, [line(idem), Buffer.from(' x')], `#${i} obs-fold`), expect: [400, 'malformed-request'] },
      { label: 'repeated header, other case', send: (t, i) => rawPost(t, key, body, [line(idem), Buffer.from(`IDEMPOTENCY-KEY: ${idem}`)], `#${i} repeated case`), expect: [400, 'invalid-idempotency-key'] },
      { label: 'over 16 KiB', send: (t, i) => rawPost(t, key, body, [line('k'.repeat(17_000))], `#${i} 17k`), expect: [431, 'headers-too-large'] },
      { label: 'leading spaces', send: (t, i) => rawPost(t, key, body, [line(`   ${idem}`)], `#${i} leading`), expect: 'same-run' },
      { label: 'trailing spaces', send: (t, i) => rawPost(t, key, body, [line(`${idem}  `)], `#${i} trailing`), expect: 'same-run' },
      { label: 'tabs around', send: (t, i) => rawPost(t, key, body, [line(`\t${idem} \t`)], `#${i} tabs`), expect: 'same-run' },
      { label: 'spaces around (fetch)', send: (t, i) => post(t, key, body, ` ${idem} `, `#${i} fetch-trim`), expect: 'same-run' },
      { label: 'plain', send: (t, i) => post(t, key, body, idem, `#${i} plain`), expect: 'same-run' },
    ];
    const n = int(Math.max(probes.length, 30), 50);
    const plan = shuffle(Array.from({ length: n }, (_, i) => (i < probes.length ? probes[i]! : pick(probes))));
    const answers = await Promise.all(plan.map(async (probe, i) => ({ probe, a: await probe.send(via(), i) })));
    expectNoServerErrorOrHang(answers.map(({ a }) => a));
    for (const { probe, a } of answers) {
      if (probe.expect === 'same-run') continue;
      const [status, slug] = probe.expect;
      expect(a.status, `${probe.label}: ${describeAnswer(a)}`).to.equal(status);
      if (a.headers.get('content-type')?.startsWith('application/problem+json')) openApiValidator().assertComponent('Problem', a.body, probe.label);
      expect(slugOf(a), `${probe.label}: ${describeAnswer(a)}`).to.equal(slug);
      expect(a.body.status).to.equal(status);
      if (probe.label === 'empty' || probe.label === 'only spaces') expect(a.body.detail).to.include('empty');
    }
    const valid = answers.filter(({ probe }) => probe.expect === 'same-run').map(({ a }) => a);
    // Raw answers have no OpenAPI check of their own: the same checks as a fetched one.
    for (const a of valid) {
      if (a.status === 409) expect(a.headers.get('content-type')).to.match(/^application\/problem\+json/);
    }
    const runId = expectOneRunForKey(valid, 'valid keys, spaces dropped');
    expect(await runQueuedOn(t1.workspaceId, account), 'RunQueued events in the account history').to.deep.equal([runId]);
    expect(await runIdsOf(svc, account)).to.deep.equal([runId]);
    await expectPollable(runId, key);
  });

  it('on a busy account, distinct keys all get 409 run-in-progress; on an idle one exactly one key wins, and refused keys stay unused', async () => {
    // (1) A run is already active: every distinct key is refused, nothing is queued.
    const busy = await freshAccount(svc, t1.workspaceId, 'busy');
    const blocker = await call(svc, 'POST', PATH, { key: t1.keys.write, body: { brief: 'Blocker.', project_id: busy } });
    expect(blocker.status).to.equal(202);
    const n1 = int(20, 50);
    const refused = await Promise.all(
      Array.from({ length: n1 }, (_, i) => post(via(), pick([t1.keys.write, t1.keys.admin, t1.keys.read]), { brief: `Behind the blocker ${i}.`, project_id: busy }, newKey(), `#${i}`, int(0, 3))),
    );
    expectNoServerErrorOrHang(refused);
    for (const a of refused) {
      expectProblem(a, 409, 'run-in-progress');
      expect(a.body.active_run_id, describeAnswer(a)).to.equal(blocker.body.id);
    }
    expect(await runQueuedOn(t1.workspaceId, busy)).to.deep.equal([blocker.body.id]);

    // (2) An idle account, a burst of K distinct keys, each sent several times.
    const idle = await freshAccount(svc, t1.workspaceId, 'idle');
    const k = int(5, 12);
    const keys = Array.from({ length: k }, (_, i) => ({ idem: newKey(), body: { brief: `Contender ${i}.`, project_id: idle } }));
    const n2 = int(Math.max(20, k), 50);
    const plan = shuffle(Array.from({ length: n2 }, (_, i) => (i < k ? i : int(0, k - 1))));
    const answers = await Promise.all(plan.map((c, i) => post(via(), t1.keys.write, keys[c]!.body, keys[c]!.idem, `#${i} key ${c}`, int(0, 3)).then((a) => ({ a, c }))));
    const all = answers.map(({ a }) => a);
    expectNoServerErrorOrHang(all);
    const accepted = answers.filter(({ a }) => a.status === 202 && !replayed(a));
    expect(accepted.length, `exactly one fresh 202 (seed ${SEED}):\n${summary(all)}`).to.equal(1);
    const winner = accepted[0]!.c;
    const runId = expectOneRunForKey(answers.filter(({ c }) => c === winner).map(({ a }) => a), `winning key ${winner}`);
    const losers = answers.filter(({ c }) => c !== winner);
    for (const { a } of losers) {
      expect(a.status, `${describeAnswer(a)}\n${summary(all)}`).to.equal(409);
      if (slugOf(a) === 'idempotent-request-in-progress') {
        expectProblem(a, 409, 'idempotent-request-in-progress');
      } else {
        expectProblem(a, 409, 'run-in-progress');
        expect(a.body.active_run_id, describeAnswer(a)).to.equal(runId);
      }
    }
    const losingKeys = [...new Set(losers.map(({ c }) => c))];
    expect(losingKeys.length).to.equal(k - 1);
    for (const c of losingKeys) {
      // Each losing key reached the account at least once (the claim holder is refused with run-in-progress).
      const mine = losers.filter((x) => x.c === c).map(({ a }) => a);
      expect(mine.filter((a) => slugOf(a) === 'run-in-progress').length, `key ${c}:\n${summary(mine)}`).to.be.greaterThan(0);
    }
    expect(await runQueuedOn(t1.workspaceId, idle), 'one RunQueued on the idle account').to.deep.equal([runId]);

    // (3) Only a 202 is remembered: once the winner is canceled, the first refused key to retry starts a
    //     fresh run (not a replay), the next refused keys are refused again, and the winner still replays.
    const canceled = await fetch(`${pick([A, B]).url}${PATH}/${runId}`, { method: 'DELETE', headers: { authorization: `Bearer ${t1.keys.write}` } });
    expect(canceled.status).to.equal(200);
    const retryOrder = shuffle(losingKeys);
    const second = await post(via(), t1.keys.write, keys[retryOrder[0]!]!.body, keys[retryOrder[0]!]!.idem, `retry key ${retryOrder[0]}`);
    expect(second.status, describeAnswer(second)).to.equal(202);
    expect(replayed(second)).to.equal(false);
    expect(second.body.id).to.not.equal(runId);
    for (const c of retryOrder.slice(1)) {
      const again = await post(via(), t1.keys.write, keys[c]!.body, keys[c]!.idem, `retry key ${c}`);
      expectProblem(again, 409, 'run-in-progress');
      expect(again.body.active_run_id).to.equal(second.body.id);
    }
    const winnerAgain = await post(via(), t1.keys.write, keys[winner]!.body, keys[winner]!.idem, 'winner again');
    expect(winnerAgain.status).to.equal(202);
    expect(replayed(winnerAgain)).to.equal(true);
    expect(winnerAgain.body.id).to.equal(runId);
    expect(await runQueuedOn(t1.workspaceId, idle)).to.deep.equal([runId, second.body.id]);
  });

  it('the same key retried in a burst on a busy account is refused each time and stays unused for the retry after', async () => {
    const account = await freshAccount(svc, t1.workspaceId, 'busy same key');
    const blocker = await call(svc, 'POST', PATH, { key: t1.keys.admin, body: { brief: 'Blocker.', project_id: account } });
    expect(blocker.status).to.equal(202);
    const idem = newKey();
    const bodies = spellings('Queued behind the blocker, same key.', account);
    const n = int(20, 50);
    const answers = await Promise.all(Array.from({ length: n }, (_, i) => post(via(), t1.keys.write, pick(bodies), idem, `#${i}`, int(0, 3))));
    expectNoServerErrorOrHang(answers);
    for (const a of answers) {
      expect(a.status, `${describeAnswer(a)}\n${summary(answers)}`).to.equal(409);
      if (slugOf(a) === 'run-in-progress') expect(a.body.active_run_id).to.equal(blocker.body.id);
      else expectProblem(a, 409, 'idempotent-request-in-progress');
    }
    expect(answers.filter((a) => slugOf(a) === 'run-in-progress').length).to.be.greaterThan(0);
    expect(await runQueuedOn(t1.workspaceId, account)).to.deep.equal([blocker.body.id]);

    const canceled = await fetch(`${pick([A, B]).url}${PATH}/${blocker.body.id}`, { method: 'DELETE', headers: { authorization: `Bearer ${t1.keys.admin}` } });
    expect(canceled.status).to.equal(200);
    // A second burst on the now idle account with the same key: one fresh run (not a replay of a refusal).
    const after = await Promise.all(Array.from({ length: int(20, 50) }, (_, i) => post(via(), t1.keys.write, pick(bodies), idem, `after #${i}`, int(0, 3))));
    expectNoServerErrorOrHang(after);
    const runId = expectOneRunForKey(after, 'after the blocker was canceled');
    expect(await runQueuedOn(t1.workspaceId, account)).to.deep.equal([blocker.body.id, runId]);
  });
  it('valid keys made of every kind of visible ASCII (quotes, %, _, \\, commas, 255 chars) at once: one run per key, none mixed up', async () => {
    const values = [
      `';DROP/**/TABLE/**/idempotency_records;--${newKey()}`,
      '%',
      '_',
      '\\',
      '"q"',
      `a,b-${newKey()}`,
      '!',
      `{{x}}$1-${newKey()}`,
      '~'.repeat(255),
      uuidv7(),
    ];
    const targets = await Promise.all(values.map(async (value, v) => ({ value, account: await freshAccount(svc, t2.workspaceId, `ascii ${v}`) })));
    const n = int(30, 50);
    const plan = shuffle(Array.from({ length: n }, (_, i) => (i < values.length ? i : int(0, values.length - 1))));
    const answers = await Promise.all(
      plan.map(async (v, i) => {
        const { value, account } = targets[v]!;
        const body = JSON.stringify({ brief: `Visible ASCII key ${v}.`, project_id: account });
        // Spaces around a value, even one of 255 characters, are not part of it.
        const a = rand() < 0.3
          ? await rawPost(via(), t2.keys.admin, body, [Buffer.from(`Idempotency-Key:  ${value} \t`, 'latin1')], `#${i} key ${v} (padded)`)
          : await post(via(), t2.keys.admin, body, value, `#${i} key ${v}`, int(0, 3));
        return { a, v };
      }),
    );
    expectNoServerErrorOrHang(answers.map(({ a }) => a));
    const ids: string[] = [];
    for (const [v, { account }] of targets.entries()) {
      const runId = expectOneRunForKey(answers.filter((x) => x.v === v).map(({ a }) => a), `key ${JSON.stringify(values[v]!.slice(0, 40))}`);
      ids.push(runId);
      expect(await runQueuedOn(t2.workspaceId, account), `history of the account of key ${v}`).to.deep.equal([runId]);
    }
    expect(new Set(ids).size).to.equal(values.length);
  });

  it('a key past its 24-hour retention, reused by a burst, starts exactly one new run (never the old answer, never two)', async () => {
    const db = svc.service.infrastructure.database.db;
    const scenarios = await Promise.all(
      (['completed', 'processing'] as const).map(async (state) => {
        const account = await freshAccount(svc, t1.workspaceId, `expired ${state}`);
        const brief = `Retention ${state}.`;
        const oldRunId = uuidv7();
        const idem = newKey();
        // Left 25 hours ago: by the same request (completed) or by another body whose process died (processing).
        await db
          .insertInto('idempotency_records')
          .values({
            key_id: t1.keyIds.write,
            idempotency_key: idem,
            request_hash: requestFingerprint(state === 'completed' ? { auto_apply: false, brief, project_id: account } : { auto_apply: false, brief: 'Another brief.', project_id: account }),
            run_id: oldRunId,
            state,
            response_status: state === 'completed' ? 202 : null,
            response_body: state === 'completed' ? JSON.stringify({ id: oldRunId, object: 'run', status: 'queued', poll_url: `http://api.test/api/v1/runs/${oldRunId}` }) : null,
            created_at: sql`now() - interval '25 hours'` as any,
            locked_until: sql`now() - interval '25 hours'` as any,
          })
          .execute();
        return { state, account, brief, oldRunId, idem };
      }),
    );
    const plan = shuffle(scenarios.flatMap((scenario) => Array.from({ length: int(10, 25) }, () => scenario)));
    const answers = await Promise.all(plan.map((sc, i) => post(via(), t1.keys.write, pick(spellings(sc.brief, sc.account)), sc.idem, `#${i} ${sc.state}`, int(0, 3)).then((a) => ({ a, sc }))));
    expectNoServerErrorOrHang(answers.map(({ a }) => a));
    for (const sc of scenarios) {
      const runId = expectOneRunForKey(answers.filter((x) => x.sc === sc).map(({ a }) => a), `expired ${sc.state} record`);
      expect(runId, 'a new run, not the forgotten one').to.not.equal(sc.oldRunId);
      expect(await runQueuedOn(t1.workspaceId, sc.account)).to.deep.equal([runId]);
    }
  });

  it('clients that give up mid-burst: whatever was answered names one run, and a later retry replays it', async () => {
    for (let round = 0; round < 2; round++) {
      const account = await freshAccount(svc, t1.workspaceId, `give up ${round}`);
      const idem = newKey();
      const bodies = spellings(`Clients giving up, round ${round}.`, account);
      const n = int(20, 50);
      const answers = await Promise.all(
        Array.from({ length: n }, (_, i) => {
          const controller = new AbortController();
          if (rand() < 0.5) setTimeout(() => controller.abort(), int(0, 15));
          return post(via(), t1.keys.write, pick(bodies), idem, `#${i}`, int(0, 3), controller.signal);
        }),
      );
      const answered = answers.filter((a) => a.status !== -1);
      expectNoServerErrorOrHang(answered);
      const fresh = answered.filter((a) => a.status === 202 && !replayed(a));
      expect(fresh.length, `at most one fresh 202:\n${summary(answered)}`).to.be.at.most(1);
      for (const a of answered.filter((x) => x.status !== 202)) expectProblem(a, 409, 'idempotent-request-in-progress');
      const seen = new Set(answered.filter((a) => a.status === 202).map((a) => a.body.id));
      expect(seen.size, summary(answered)).to.be.at.most(1);

      // Retry as a client would (after Retry-After, 1 s is fine per the docs) until it is not in progress.
      let retry: Answer;
      const deadline = Date.now() + 12_000;
      for (;;) {
        retry = await post(via(), t1.keys.write, pick(bodies), idem, 'retry');
        if (retry.status !== 409 || Date.now() > deadline) break;
        expectProblem(retry, 409, 'idempotent-request-in-progress');
        await new Promise((resolve) => setTimeout(resolve, 200));
      }
      expect(retry.status, describeAnswer(retry)).to.equal(202);
      if (seen.size === 1) {
        expect(replayed(retry)).to.equal(true);
        expect(retry.body.id).to.equal([...seen][0]);
      }
      expect(await runQueuedOn(t1.workspaceId, account), `one run (${answers.length - answered.length} clients gave up)`).to.deep.equal([retry.body.id]);
      await expectPollable(retry.body.id, t1.keys.write);
    }
  });

  it('one key value on POST /runs and on the campaign target endpoint at once: one operation wins, the other answers 422', async () => {
    const account = t2.accounts.sandbox;
    const { cpa } = await campaignsByStrategy(svc, t2.keys.write, account);
    const idem = newKey();
    const runBody = JSON.stringify({ brief: 'Runs or targets.', project_id: account });
    const targetBody = { target_cpa: Math.round((cpa.bidding_strategy.target_cpa! * 1.05) * 100) / 100, reason: 'idempotency race' };
    const n = int(20, 40);
    const plan = Array.from({ length: n }, (_, i) => (i < 2 ? (i === 0 ? 'run' : 'target') : pick(['run', 'target'] as const)));
    const answers = await Promise.all(
      shuffle(plan).map((op, i) =>
        (op === 'run'
          ? post(via(), t2.keys.write, runBody, idem, `#${i} run`, int(0, 3))
          : post(via(), t2.keys.write, targetBody, idem, `#${i} target`, int(0, 3), undefined, targetPath(account, cpa.id))
        ).then((a) => ({ a, op })),
      ),
    );
    const all = answers.map(({ a }) => a);
    expectNoServerErrorOrHang(all);
    const fresh = answers.filter(({ a }) => (a.status === 202 || a.status === 200) && !replayed(a));
    expect(fresh.length, `exactly one fresh answer (seed ${SEED}):\n${summary(all)}`).to.equal(1);
    const winner = fresh[0]!.op;
    const mine = answers.filter(({ op }) => op === winner).map(({ a }) => a);
    const other = answers.filter(({ op }) => op !== winner).map(({ a }) => a);
    for (const a of other) expectProblem(a, 422, 'idempotency-key-reused');
    const { store, subjects } = svc.service.infrastructure;
    let queued = 0;
    let proposed = 0;
    for await (const { event } of store.readFiltered(subjects.filter(t2.workspaceId, account), 1)) {
      if (event.type === 'RunQueued' && (event.data as { brief?: string }).brief === 'Runs or targets.') queued++;
      if (event.type === 'ActionProposed' && JSON.stringify(event.data).includes('idempotency race')) proposed++;
    }
    if (winner === 'run') {
      expectOneRunForKey(mine, 'POST /runs won');
      expect({ queued, proposed }).to.deep.equal({ queued: 1, proposed: 0 });
    } else {
      const first = mine.find((a) => a.status === 200 && !replayed(a))!;
      for (const a of mine) {
        if (a.status === 200) expect(a.body.id).to.equal(first.body.id);
        else expectProblem(a, 409, 'idempotent-request-in-progress');
      }
      expect({ queued, proposed }).to.deep.equal({ queued: 0, proposed: 1 });
    }
  });
  it('retrying clients racing to take over a claim whose process died (before, after queueing; lease ending mid-burst) all end with the claimed run, queued once', async () => {
    const db = svc.service.infrastructure.database.db;
    const kinds = ['died before queueing', 'died after queueing', 'lease ends mid-burst', 'died after queueing, run canceled since'] as const;
    const scenarios = await Promise.all(
      kinds.map(async (kind) => {
        const account = await freshAccount(svc, t1.workspaceId, kind);
        const brief = `Take over: ${kind}.`;
        const claimedRunId = uuidv7();
        const idem = newKey();
        const meta = { actor: { kind: 'api_key' as const, id: t1.keyIds.write }, correlationId: claimedRunId };
        if (kind.startsWith('died after queueing')) {
          await svc.service.infrastructure.commands.handle(accountDecider, {
            type: 'StartRun', workspaceId: t1.workspaceId, accountId: account, runId: claimedRunId, brief,
            autoApply: false, keyId: t1.keyIds.write, scope: 'write', meta,
          });
        }
        if (kind === 'died after queueing, run canceled since') {
          await svc.service.infrastructure.commands.handle(accountDecider, { type: 'CancelRun', workspaceId: t1.workspaceId, accountId: account, runId: claimedRunId, knownStatus: 'queued', meta });
        }
        await db
          .insertInto('idempotency_records')
          .values({
            key_id: t1.keyIds.write,
            idempotency_key: idem,
            request_hash: requestFingerprint({ auto_apply: false, brief, project_id: account }),
            run_id: claimedRunId,
            state: 'processing',
            response_status: null,
            response_body: null,
            locked_until: (kind === 'lease ends mid-burst' ? sql`now() + interval '400 milliseconds'` : sql`now() - interval '1 minute'`) as any,
          })
          .execute();
        return { kind, account, brief, claimedRunId, idem };
      }),
    );
    // Each client retries 409 idempotent-request-in-progress (sooner than Retry-After: "usually done sooner") until it gets an answer.
    const client = async (sc: (typeof scenarios)[number], i: number): Promise<Answer[]> => {
      const seen: Answer[] = [];
      const deadline = Date.now() + 8000;
      await new Promise((resolve) => setTimeout(resolve, int(0, 600)));
      for (;;) {
        const a = await post(via(), t1.keys.write, pick(spellings(sc.brief, sc.account)), sc.idem, `#${i} ${sc.kind} try ${seen.length + 1}`);
        seen.push(a);
        if (a.status !== 409 || slugOf(a) !== 'idempotent-request-in-progress' || Date.now() > deadline) return seen;
        await new Promise((resolve) => setTimeout(resolve, int(50, 250)));
      }
    };
    const plan = shuffle(scenarios.flatMap((sc) => Array.from({ length: int(6, 12) }, () => sc)));
    const results = await Promise.all(plan.map(async (sc, i) => ({ sc, tries: await client(sc, i) })));
    expectNoServerErrorOrHang(results.flatMap(({ tries }) => tries));
    for (const sc of scenarios) {
      const mine = results.filter((r) => r.sc === sc);
      const every = mine.flatMap(({ tries }) => tries);
      for (const a of every) {
        if (a.status === 202) expect(a.body.id, `${sc.kind}: ${describeAnswer(a)}`).to.equal(sc.claimedRunId);
        else expectProblem(a, 409, 'idempotent-request-in-progress');
      }
      const finals = mine.map(({ tries }) => tries.at(-1)!);
      expect(finals.map((a) => a.status), `${sc.kind}: every client ends with 202 (seed ${SEED}):\n${summary(every)}`).to.deep.equal(finals.map(() => 202));
      expect(every.filter((a) => a.status === 202 && !replayed(a)).length, `${sc.kind}: one request took over and answered:\n${summary(every)}`).to.equal(1);
      expect(await runQueuedOn(t1.workspaceId, sc.account), `${sc.kind}: RunQueued in the account history`).to.deep.equal([sc.claimedRunId]);
      await expectPollable(sc.claimedRunId, t1.keys.write, sc.kind === 'died after queueing, run canceled since' ? 'canceled' : 'queued');
    }
  });
});
