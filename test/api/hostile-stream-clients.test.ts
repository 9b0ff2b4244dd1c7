import { expect } from 'chai';
import net from 'node:net';
import v8 from 'node:v8';
import vm from 'node:vm';
import { issueKey, pauseRunStarts } from '../../src/operator/operator-commands.ts';
import { seededRandom } from '../support/seeded-random.ts';
import { startAgentWorker } from '../support/agent-worker.ts';
import { RulesModel } from '../../src/agent/model/rules/rules-model.ts';
import type { ModelClient, ModelRequest, ModelTurn } from '../../src/agent/model/model-port.ts';
import type { AgentWorker } from '../../src/workers/agent-worker.ts';
import { startRun, waitForTerminalRun } from '../support/runs.ts';
import { startTestService, type TestService, type TestTenant } from '../support/test-service.ts';

/**
 * Hostile clients on raw sockets against the long-lived and paged reads (docs/api.md, "Live run
 * events", "History", "Rate limits"), while well-behaved clients keep checking their answers:
 * SSE clients that never read, that drop mid-event, that reconnect in a tight loop with odd
 * Last-Event-IDs, that hold the per-key limit and vanish without a FIN; slowloris requests;
 * hostile history queries; pipelined GETs. Seeded: HOSTILE_SEED=<n> replays a run.
 */

const SEED = Number(process.env.HOSTILE_SEED ?? 704_262_216);
const MAX_STREAMS = 5; // SSE_MAX_STREAMS_PER_KEY, the documented default
const LIFETIME_MS = 2500; // SSE_MAX_LIFETIME_MS, short so a vanished client's stream ends in the test
const SCAN_BUDGET = 40;
const PAGE_BYTES = 65_536;
const CHAOS_MS = Number(process.env.HOSTILE_CHAOS_MS ?? 4_000);
const HEALTH_BOUND_MS = 1500;
const HEAP_GROWTH_BOUND = 256 * 1024 * 1024;
const RETAINED_HEAP_BOUND = 48 * 1024 * 1024;
const TERMINAL = new Set(['succeeded', 'failed', 'canceled']);

// ---------------------------------------------------------------------------------------------
// A raw HTTP/1.1 response parser: Content-Length, chunked, or until close; several per socket.
// ---------------------------------------------------------------------------------------------

interface RawResponse {
  status: number;
  headers: Record<string, string>;
  body: Buffer[];
  ended: boolean;
}

class ResponseParser {
  private buffer: Buffer = Buffer.alloc(0);
  private mode: 'head' | 'length' | 'chunk-size' | 'chunk-data' | 'chunk-crlf' | 'trailer' | 'close' = 'head';
  private remaining = 0;
  current: RawResponse | null = null;
  readonly responses: RawResponse[] = [];
  onHead: (response: RawResponse) => void = () => undefined;
  onData: (response: RawResponse, chunk: Buffer) => void = () => undefined;
  onEnd: (response: RawResponse) => void = () => undefined;
  error: string | null = null;

  feed(chunk: Buffer): void {
    this.buffer = this.buffer.length === 0 ? chunk : Buffer.concat([this.buffer, chunk]);
    for (;;) {
      if (this.error) return;
      if (this.mode === 'head') {
        const end = this.buffer.indexOf('\r\n\r\n');
        if (end === -1) return;
        const lines = this.buffer.subarray(0, end).toString('latin1').split('\r\n');
        this.buffer = this.buffer.subarray(end + 4);
        const match = /^HTTP\/1\.[01] (\d{3})/.exec(lines[0]!);
        if (!match) {
          this.error = `bad status line ${JSON.stringify(lines[0])}`;
          return;
        }
        const headers: Record<string, string> = {};
        for (const line of lines.slice(1)) {
          const colon = line.indexOf(':');
          headers[line.slice(0, colon).trim().toLowerCase()] = line.slice(colon + 1).trim();
        }
        const response: RawResponse = { status: Number(match[1]), headers, body: [], ended: false };
        this.current = response;
        this.responses.push(response);
        this.onHead(response);
        if (response.status === 204 || response.status === 304 || (response.status >= 100 && response.status < 200)) this.finish();
        else if (/chunked/i.test(headers['transfer-encoding'] ?? '')) this.mode = 'chunk-size';
        else if (headers['content-length'] !== undefined) {
          this.remaining = Number(headers['content-length']);
          this.mode = 'length';
          if (this.remaining === 0) this.finish();
        } else this.mode = 'close';
        continue;
      }
      if (this.mode === 'length' || this.mode === 'chunk-data') {
        if (this.buffer.length === 0) return;
        const take = Math.min(this.remaining, this.buffer.length);
        this.data(this.buffer.subarray(0, take));
        this.buffer = this.buffer.subarray(take);
        this.remaining -= take;
        if (this.remaining > 0) return;
        if (this.mode === 'length') this.finish();
        else this.mode = 'chunk-crlf';
        continue;
      }
      if (this.mode === 'chunk-crlf') {
        if (this.buffer.length < 2) return;
        this.buffer = this.buffer.subarray(2);
        this.mode = 'chunk-size';
        continue;
      }
      if (this.mode === 'chunk-size') {
        const end = this.buffer.indexOf('\r\n');
        if (end === -1) return;
        const size = parseInt(this.buffer.subarray(0, end).toString('latin1'), 16);
        this.buffer = this.buffer.subarray(end + 2);
        if (Number.isNaN(size)) {
          this.error = 'bad chunk size';
          return;
        }
        if (size === 0) this.mode = 'trailer';
        else {
          this.remaining = size;
          this.mode = 'chunk-data';
        }
        continue;
      }
      if (this.mode === 'trailer') {
        const end = this.buffer.indexOf('\r\n');
        if (end === -1) return;
        this.buffer = this.buffer.subarray(end + 2);
        if (end === 0) this.finish();
        continue;
      }
      if (this.mode === 'close') {
        if (this.buffer.length > 0) this.data(this.buffer);
        this.buffer = Buffer.alloc(0);
        return;
      }
    }
  }

  closed(): void {
    if (this.mode === 'close' && this.current) this.finish();
  }

  private data(chunk: Buffer): void {
    this.current!.body.push(Buffer.from(chunk));
    this.onData(this.current!, chunk);
  }

  private finish(): void {
    const response = this.current!;
    response.ended = true;
    this.mode = 'head';
    this.current = null;
    this.onEnd(response);
  }
}

v8.setFlagsFromString('--expose-gc');
const collectGarbage = vm.runInNewContext('gc') as () => void;

const sleep = (ms: number) => new Promise<void>((resolve) => setTimeout(resolve, ms));

/** The SSE blocks of a text, complete ones only (an event is dispatched at its blank line). */
function sseBlocks(text: string): { blocks: { id?: string; event?: string; data?: string; comments: string[] }[]; rest: string } {
  const parts = text.split('\n\n');
  const rest = parts.pop()!;
  const blocks = parts.map((part) => {
    const block: { id?: string; event?: string; data?: string; comments: string[] } = { comments: [] };
    for (const line of part.split('\n')) {
      if (line.startsWith(':')) block.comments.push(line.slice(1).trim());
      else if (line.startsWith('id: ')) block.id = line.slice(4);
      else if (line.startsWith('event: ')) block.event = line.slice(7);
      else if (line.startsWith('data: ')) block.data = (block.data === undefined ? '' : `${block.data}\n`) + line.slice(6);
    }
    return block;
  });
  return { blocks, rest };
}

/** The rules agent, thinking for a while before each turn: runs last seconds, so streams see them live. */
class SlowRulesModel implements ModelClient {
  private readonly inner = new RulesModel();
  readonly identity = this.inner.identity;
  private readonly delay: () => number;

  constructor(delay: () => number) {
    this.delay = delay;
  }

  async generate(request: ModelRequest): Promise<ModelTurn> {
    await sleep(this.delay());
    return this.inner.generate(request);
  }
}

interface SeenEvent {
  id: number;
  event: string;
}

describe(`hostile stream and history clients (seed ${SEED})`, function () {
  this.timeout(120_000);
  let svc: TestService;
  let port: number;
  let good: TestTenant;
  let hostile: TestTenant;
  let worker: AgentWorker | undefined;
  const random = seededRandom(SEED);
  const pick = <T>(items: readonly T[]): T => items[Math.floor(random() * items.length)]!;
  const between = (low: number, high: number) => low + Math.floor(random() * (high - low + 1));

  /** Every failed expectation seen by a background client: the test fails with all of them. */
  const failures: string[] = [];
  const fail = (message: string) => {
    if (failures.length < 200) failures.push(message);
  };
  /** Every status any client (hostile or not) was answered, by kind. */
  const statuses = new Map<string, Map<number, number>>();
  const countStatus = (kind: string, status: number) => {
    const byStatus = statuses.get(kind) ?? new Map<number, number>();
    byStatus.set(status, (byStatus.get(status) ?? 0) + 1);
    statuses.set(kind, byStatus);
    if (status >= 500) fail(`${kind}: answered ${status}`);
  };
  const sockets = new Set<net.Socket>();

  function connect(): net.Socket {
    const socket = net.connect(port, '127.0.0.1');
    sockets.add(socket);
    socket.on('close', () => sockets.delete(socket));
    socket.on('error', () => undefined);
    return socket;
  }

  const requestText = (path: string, headers: Record<string, string>) =>
    `GET ${path} HTTP/1.1\r\nHost: 127.0.0.1\r\n${Object.entries(headers)
      .map(([name, value]) => `${name}: ${value}\r\n`)
      .join('')}\r\n`;

  /** One GET on a fresh socket; the whole answer (or what came before `timeoutMs`). */
  async function rawGet(path: string, headers: Record<string, string>, timeoutMs = 10_000): Promise<RawResponse & { text: string }> {
    const socket = connect();
    const parser = new ResponseParser();
    const done = new Promise<RawResponse>((resolve, reject) => {
      parser.onEnd = resolve;
      socket.on('data', (chunk) => parser.feed(chunk));
      socket.on('close', () => {
        parser.closed();
        if (parser.responses[0]?.ended) resolve(parser.responses[0]);
        else reject(new Error(`connection closed before the answer to GET ${path} ended (${parser.error ?? 'no error'})`));
      });
      setTimeout(() => reject(new Error(`GET ${path}: no full answer in ${timeoutMs} ms`)), timeoutMs);
    });
    socket.write(requestText(path, { Connection: 'close', ...headers }));
    try {
      const response = await done;
      return { ...response, text: Buffer.concat(response.body).toString('utf8') };
    } finally {
      socket.destroy();
    }
  }

  const bearer = (key: string) => ({ Authorization: `Bearer ${key}` });
  const eventsPath = (runId: string) => `/api/v1/runs/${runId}/events`;

  // -------------------------------------------------------------------------------------------
  // Ground truth of a run, from the history endpoint (an independent read of the log).
  // -------------------------------------------------------------------------------------------

  const HISTORY_TO_SSE: Record<string, string> = {
    RunQueued: 'queued',
    RunStarted: 'started',
    ToolCalled: 'tool_called',
    ActionProposed: 'action_proposed',
    RunSucceeded: 'succeeded',
    RunFailed: 'failed',
    RunCanceled: 'canceled',
  };

  async function historyWalk(key: string, accountId: string, query: string, limits: () => number): Promise<{ entries: any[]; pages: number }> {
    const entries: any[] = [];
    let cursor: string | null = null;
    let pages = 0;
    do {
      const path = `/api/v1/accounts/${accountId}/history?limit=${limits()}${query}${cursor === null ? '' : `&cursor=${cursor}`}`;
      const response = await rawGet(path, bearer(key));
      countStatus('history walk', response.status);
      if (response.status !== 200) throw new Error(`history walk: ${response.status} ${response.text}`);
      const body = JSON.parse(response.text) as { data: any[]; next_cursor: string | null };
      entries.push(...body.data);
      if (body.next_cursor !== null && cursor !== null && Number(body.next_cursor) < Number(cursor)) fail(`history cursor went back: ${cursor} -> ${body.next_cursor}`);
      if (body.next_cursor !== null && body.next_cursor === cursor && body.data.length === 0) await sleep(100);
      cursor = body.next_cursor;
      if (++pages > 2000) throw new Error('history walk does not end');
    } while (cursor !== null);
    return { entries, pages };
  }

  const truths = new Map<string, Promise<SeenEvent[]>>();
  function runTruth(runId: string, accountId: string): Promise<SeenEvent[]> {
    if (!truths.has(runId)) truths.set(runId, readRunTruth(runId, accountId));
    return truths.get(runId)!;
  }
  async function readRunTruth(runId: string, accountId: string): Promise<SeenEvent[]> {
    const { entries } = await historyWalk(good.keys.read, accountId, `&run_id=${runId}`, () => 500);
    return entries
      .filter((e) => !e.corrupt && e.correlation_id === runId && HISTORY_TO_SSE[e.type] !== undefined)
      .filter((e) => !['RunQueued', 'RunStarted', 'ActionProposed', 'RunSucceeded', 'RunFailed', 'RunCanceled'].includes(e.type) || e.data.run_id === runId)
      .map((e) => ({ id: Number(e.seq), event: HISTORY_TO_SSE[e.type]! }));
  }

  // -------------------------------------------------------------------------------------------
  // A well-behaved SSE client: reads, sometimes drops (between events or mid-event), always
  // reconnects with the id of the last complete block it saw, as EventSource does.
  // -------------------------------------------------------------------------------------------

  let lifetimeEnds = 0;
  const runDurations: number[] = [];
  interface GoodSession {
    runId: string;
    accountId: string;
    seen: SeenEvent[];
    connections: number;
    ended: 'terminal' | '204' | 'gave-up';
  }

  async function goodSseSession(runId: string, accountId: string, key: string, label: string): Promise<GoodSession> {
    const session: GoodSession = { runId, accountId, seen: [], connections: 0, ended: 'gave-up' };
    let lastId: string | null = null;
    for (let attempt = 0; attempt < 80; attempt++) {
      session.connections++;
      // How this connection ends from the client's side: never (read to the end), after k events, or after n bytes (mid-event).
      const roll = random();
      const cutAfterEvents = roll < 0.3 ? between(1, 4) : Infinity;
      const cutAfterBytes = roll >= 0.3 && roll < 0.55 ? between(1, 600) : Infinity;
      const socket = connect();
      const parser = new ResponseParser();
      let text = '';
      let bodyBytes = 0;
      let eventsThisConnection = 0;
      let terminal = false;
      const outcome = await new Promise<{ status: number | null; how: string }>((resolve) => {
        let status: number | null = null;
        const finish = (how: string) => {
          socket.destroy();
          resolve({ status, how });
        };
        const timer = setTimeout(() => finish('timeout'), LIFETIME_MS + 8000);
        socket.on('close', () => {
          clearTimeout(timer);
          resolve({ status, how: 'closed' });
        });
        parser.onHead = (response) => {
          status = response.status;
          countStatus('good sse', response.status);
        };
        parser.onData = (_response, chunk) => {
          bodyBytes += chunk.length;
          text += chunk.toString('utf8');
          const { blocks, rest } = sseBlocks(text);
          text = rest;
          for (const block of blocks) {
            if (block.id !== undefined) lastId = block.id;
            if (block.comments.some((c) => c.startsWith('stream lifetime reached'))) lifetimeEnds++;
            if (block.event !== undefined) {
              const data = JSON.parse(block.data ?? 'null') as { seq?: number; run_id?: string };
              if (String(data?.seq) !== block.id) fail(`${label}: data.seq ${data?.seq} is not the id ${block.id}`);
              if (data?.run_id !== runId) fail(`${label}: an event of run ${data?.run_id} on the stream of ${runId}`);
              session.seen.push({ id: Number(block.id), event: block.event });
              eventsThisConnection++;
              if (TERMINAL.has(block.event)) terminal = true;
            }
          }
          if (eventsThisConnection >= cutAfterEvents || bodyBytes >= cutAfterBytes) finish('client cut');
        };
        parser.onEnd = () => {
          clearTimeout(timer);
          finish('server ended');
        };
        socket.on('data', (chunk) => parser.feed(chunk));
        const headers: Record<string, string> = bearer(key);
        if (lastId !== null) {
          // Half of the reconnects use the query parameter, for clients that cannot set headers.
          if (random() < 0.5) headers['Last-Event-ID'] = lastId;
          else {
            socket.write(requestText(`${eventsPath(runId)}?last_event_id=${lastId}`, headers));
            return;
          }
        }
        socket.write(requestText(eventsPath(runId), headers));
      });
      if (parser.error) fail(`${label}: ${parser.error}`);
      if (terminal) {
        session.ended = 'terminal';
        // EventSource reconnects when the server closes, also after the end: that reconnect must be a 204.
        await sleep(between(0, 50));
        const again = await rawGet(eventsPath(runId), { ...bearer(key), 'Last-Event-ID': lastId! }, LIFETIME_MS + 5000).catch((error: Error) => ({ status: -1, text: error.message }));
        countStatus('good sse after end', again.status);
        if (again.status !== 204) fail(`${label}: reconnect after the terminal event (Last-Event-ID ${lastId}) answered ${again.status} ${JSON.stringify(again.text.slice(0, 200))}`);
        return session;
      }
      if (outcome.status === 204) {
        session.ended = '204';
        return session;
      }
      if (outcome.status !== null && outcome.status !== 200) {
        fail(`${label}: a well-behaved stream answered ${outcome.status}`);
        await sleep(500);
      }
      if (outcome.how === 'timeout') fail(`${label}: a stream stayed silent past its lifetime`);
      await sleep(between(0, 250));
    }
    fail(`${label}: run ${runId} never reached its end in 80 connections`);
    return session;
  }

  // -------------------------------------------------------------------------------------------
  // A TCP proxy whose connections can vanish: the client side is gone, the server side stays
  // open and is never read again (what the server sees of a peer that dropped without a FIN).
  // -------------------------------------------------------------------------------------------

  const frozen: net.Socket[] = [];
  async function vanishingProxy(): Promise<{ port: number; connections: { client: net.Socket; upstream: net.Socket }[]; close: () => void }> {
    const connections: { client: net.Socket; upstream: net.Socket }[] = [];
    const server = net.createServer((client) => {
      const upstream = net.connect(port, '127.0.0.1');
      upstream.on('error', () => undefined);
      client.on('error', () => undefined);
      client.pipe(upstream);
      upstream.pipe(client);
      connections.push({ client, upstream });
    });
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    return { port: (server.address() as net.AddressInfo).port, connections, close: () => server.close() };
  }

  function vanish(connection: { client: net.Socket; upstream: net.Socket }): void {
    connection.upstream.unpipe(connection.client);
    connection.client.unpipe(connection.upstream);
    connection.upstream.pause();
    frozen.push(connection.upstream);
    connection.client.destroy();
  }

  // -------------------------------------------------------------------------------------------

  before(async function () {
    this.timeout(60_000);
    console.log(`      hostile-stream-clients seed: ${SEED} (HOSTILE_SEED=${SEED} to replay)`);
    svc = await startTestService('hostilestreams', {
      ROLES: 'http,projectors',
      SSE_MAX_STREAMS_PER_KEY: String(MAX_STREAMS),
      SSE_MAX_LIFETIME_MS: String(LIFETIME_MS),
      SSE_KEY_RECHECK_MS: '1000',
      HISTORY_SCAN_BUDGET: String(SCAN_BUDGET),
      HISTORY_MAX_PAGE_BYTES: String(PAGE_BYTES),
    });
    port = Number(new URL(svc.baseUrl).port);
    // Its own delays, not the shared seeded sequence: their timing varies anyway.
    worker = await startAgentWorker(svc, { model: new SlowRulesModel(() => 300 + Math.floor(Math.random() * 600)) });
    good = await svc.tenant('good');
    hostile = await svc.tenant('hostile');
  });

  after(async () => {
    for (const socket of [...sockets, ...frozen]) socket.destroy();
    await worker?.stop();
    await svc?.stop();
  });

  it('keeps answering well-behaved clients correctly while hostile clients attack streams and pages', async () => {
    const infra = svc.service.infrastructure;
    // Well-behaved keys: each SSE client uses its own, so none of them can reach the per-key limit.
    const goodKeys = await Promise.all([1, 2, 3, 4, 5, 6].map(async (n) => (await issueKey(infra, good.workspaceId, 'read', `good-${n}`)).value.key));
    // Hostile keys: one for the holders that vanish, one for RST droppers, one for the rest.
    const holderKey = (await issueKey(infra, hostile.workspaceId, 'read', 'holder')).value.key;
    const resetterKey = (await issueKey(infra, hostile.workspaceId, 'read', 'resetter')).value.key;
    const pipelineKey = (await issueKey(infra, hostile.workspaceId, 'read', 'pipeliner')).value.key;
    const hostileKey = hostile.keys.read;

    // Hostile workspace: two finished runs, then run starts paused and a run that stays queued.
    const hostileDone: string[] = [];
    for (const account of [hostile.accounts.sandbox, hostile.accounts.sandbox2]) {
      const runId = await startRun(svc, hostile.keys.write, account, 'Find wasted spend and propose negative keywords');
      await waitForTerminalRun(svc, hostile.keys.read, runId, 30_000);
      hostileDone.push(runId);
    }
    await pauseRunStarts(infra, hostile.workspaceId, 600, 'hold runs for the hostile streams');
    const heldRun = await startRun(svc, hostile.keys.write, hostile.accounts.sandbox, 'Summarise the account');
    const hostileSeqs = (await runTruth0(hostileDone[0]!, hostile.accounts.sandbox)).map((e) => e.id);

    async function runTruth0(runId: string, accountId: string) {
      const { entries } = await historyWalk(hostile.keys.read, accountId, `&run_id=${runId}`, () => 500);
      return entries.filter((e) => !e.corrupt).map((e) => ({ id: Number(e.seq), event: e.type as string }));
    }

    // ----- background: health probe, memory sampler --------------------------------------------
    let stop = false;
    const healthLatencies: number[] = [];
    const health = (async () => {
      while (!stop) {
        const started = Date.now();
        try {
          const response = await fetch(`${svc.baseUrl}/healthz`, { signal: AbortSignal.timeout(HEALTH_BOUND_MS * 3) });
          countStatus('healthz', response.status);
          await response.text();
          if (response.status !== 200) fail(`/healthz answered ${response.status}`);
        } catch (error) {
          fail(`/healthz: ${String(error)}`);
        }
        healthLatencies.push(Date.now() - started);
        await sleep(200);
      }
    })();
    const heapOf = async () => {
      const text = await (await fetch(`${svc.baseUrl}/metrics`)).text();
      const heap = /^nodejs_heap_size_used_bytes (\d+(?:\.\d+)?(?:e\+\d+)?)$/m.exec(text);
      const rss = /^process_resident_memory_bytes (\d+(?:\.\d+)?(?:e\+\d+)?)$/m.exec(text);
      return { heap: Number(heap?.[1] ?? process.memoryUsage().heapUsed), rss: Number(rss?.[1] ?? process.memoryUsage().rss) };
    };
    collectGarbage();
    const memoryAtStart = await heapOf();
    const memorySamples: { heap: number; rss: number }[] = [];
    const memory = (async () => {
      while (!stop) {
        memorySamples.push(await heapOf());
        await sleep(1000);
      }
    })();

    // ----- background: runs on the good tenant, one at a time per account ----------------------
    const goodRuns: { runId: string; accountId: string }[] = [];
    const producer = (async () => {
      const accounts = [good.accounts.sandbox, good.accounts.sandbox2, good.accounts.disconnected];
      let n = 0;
      while (!stop) {
        const accountId = accounts[n++ % accounts.length]!;
        try {
          const runId = await startRun(svc, good.keys.write, accountId, pick(['Find wasted spend and propose negative keywords', 'Summarise the account', 'Review budgets']));
          goodRuns.push({ runId, accountId });
          const run = await waitForTerminalRun(svc, good.keys.read, runId, 30_000);
          runDurations.push(run.duration_ms);
        } catch (error) {
          if (!/run-in-progress/.test(String(error))) fail(`run producer: ${String(error)}`);
        }
        await sleep(between(200, 900));
      }
    })();
    while (goodRuns.length < 2) await sleep(50);

    // ----- background: well-behaved SSE clients --------------------------------------------------
    const sessions: Promise<GoodSession>[] = [];
    const goodSse = goodKeys.map(async (key, index) => {
      while (!stop) {
        // Mostly the newest run (live), sometimes an older one (replay).
        // Mostly a run still under way (live), sometimes an older one (replay).
        const target = random() < 0.8 ? goodRuns.at(-1)! : pick(goodRuns);
        const session = goodSseSession(target.runId, target.accountId, key, `good sse ${index}`);
        sessions.push(session);
        await session;
        await sleep(between(100, 600));
      }
    });

    // ----- background: well-behaved history walkers -------------------------------------------
    const walks: Promise<{ accountId: string; query: string; seqs: number[] }>[] = [];
    const goodHistory = [0, 1].map(async () => {
      while (!stop) {
        const accountId = pick([good.accounts.sandbox, good.accounts.sandbox2]);
        const withRun = random() < 0.3 && goodRuns.length > 0;
        const query = withRun ? `&run_id=${pick(goodRuns).runId}` : '';
        const walk = historyWalk(good.keys.read, accountId, query, () => between(1, 60)).then(({ entries }) => ({ accountId, query, seqs: entries.map((e) => Number(e.seq)) }));
        walks.push(walk);
        try {
          await walk;
        } catch (error) {
          fail(`history walker: ${String(error)}`);
        }
      }
    });

    // ----- hostile: SSE clients that never read, drop mid-event, or reconnect in a tight loop ----
    const oddIds = () => [
      '9007199254740991',
      '9007199254740992',
      '99999999999999999999',
      String(between(1, 10) * 1_000_000),
      '-1',
      'abc',
      '1e3',
      '0x10',
      '0',
      ' 7 ',
      '7, 8',
      String(pick(hostileSeqs)),
      String(pick(hostileSeqs) + 1),
      '\u00ff\u00fe',
      'x'.repeat(between(100, 4000)),
    ];
    const hostileRunIds = () => [heldRun, ...hostileDone, '00000000-0000-7000-8000-000000000000', pick(goodRuns).runId, 'not-a-uuid'];

    const neverReaders = [0, 1, 2].map(async () => {
      while (!stop) {
        const socket = connect();
        socket.pause(); // never reads: what the server writes piles up in its buffers
        const useQuery = random() < 0.3;
        const id = pick(oddIds());
        const runId = pick(hostileRunIds());
        const path = useQuery ? `${eventsPath(runId)}?last_event_id=${encodeURIComponent(id)}` : eventsPath(runId);
        socket.write(requestText(path, useQuery ? bearer(hostileKey) : { ...bearer(hostileKey), 'Last-Event-ID': id }), 'latin1');
        await sleep(between(300, 3000));
        if (random() < 0.5) socket.resetAndDestroy();
        else socket.destroy();
      }
    });

    const midEventDroppers = [0, 1].map(async () => {
      while (!stop) {
        const socket = connect();
        const cut = between(1, 900);
        let got = 0;
        await new Promise<void>((resolve) => {
          socket.on('data', (chunk) => {
            got += chunk.length;
            const status = /^HTTP\/1\.1 (\d{3})/.exec(chunk.toString('latin1'));
            if (status) countStatus('hostile sse', Number(status[1]));
            if (got >= cut) {
              if (random() < 0.5) socket.resetAndDestroy();
              else socket.destroy();
            }
          });
          socket.on('close', () => resolve());
          setTimeout(() => {
            socket.destroy();
            resolve();
          }, 4000);
          socket.write(requestText(eventsPath(pick([heldRun, ...hostileDone])), bearer(hostileKey)));
        });
      }
    });

    const tightReconnectors = [0, 1].map(async () => {
      while (!stop) {
        const id = pick(oddIds());
        const socket = connect();
        await new Promise<void>((resolve) => {
          let head = '';
          socket.on('data', (chunk) => {
            head += chunk.toString('latin1');
            const status = /^HTTP\/1\.1 (\d{3})/.exec(head);
            if (status) {
              countStatus('hostile sse reconnect', Number(status[1]));
              socket.destroy();
            }
          });
          socket.on('close', () => resolve());
          setTimeout(() => {
            socket.destroy();
            resolve();
          }, 3000);
          socket.write(requestText(eventsPath(pick(hostileRunIds())), { ...bearer(hostileKey), 'Last-Event-ID': id }), 'latin1');
        });
      }
    });

    // ----- hostile: slowloris (headers byte by byte) ----------------------------------------------
    const slowloris = [0, 1].map(async () => {
      while (!stop) {
        const target = pick([
          { path: '/healthz', headers: {} as Record<string, string>, expect: 200 },
          { path: `/api/v1/accounts/${hostile.accounts.sandbox}/history?limit=5`, headers: bearer(hostileKey), expect: 200 },
          { path: eventsPath(hostileDone[0]!), headers: { ...bearer(hostileKey), 'Last-Event-ID': '9007199254740991' }, expect: 204 },
        ]);
        const bytes = Buffer.from(requestText(target.path, { Connection: 'close', ...target.headers }));
        const socket = connect();
        const parser = new ResponseParser();
        const answered = new Promise<RawResponse | null>((resolve) => {
          parser.onEnd = resolve;
          socket.on('data', (chunk) => parser.feed(chunk));
          socket.on('close', () => resolve(parser.responses[0] ?? null));
        });
        for (let i = 0; i < bytes.length && !stop && !socket.destroyed; i++) {
          socket.write(bytes.subarray(i, i + 1));
          await sleep(between(5, 40));
        }
        const response = await Promise.race([answered, sleep(5000).then(() => null)]);
        if (socket.destroyed && !response) {
          // The server may close a slow connection; that is not an error.
        } else if (!response) {
          if (!stop) fail(`slowloris ${target.path}: no answer 5 s after its last byte`);
        } else {
          countStatus('slowloris', response.status);
          if (response.status !== target.expect) fail(`slowloris ${target.path}: ${response.status}, expected ${target.expect}`);
        }
        socket.destroy();
      }
    });

    // ----- hostile: history queries ----------------------------------------------------------------
    const hostileQueries = () => {
      const head = pick(hostileSeqs);
      return [
        `cursor=${Number.MAX_SAFE_INTEGER}`,
        `cursor=${Number.MAX_SAFE_INTEGER + 1}`,
        'cursor=99999999999999999999',
        `cursor=${head * 1000}`,
        'cursor=-1',
        'cursor=1e3',
        'cursor=0x10',
        'cursor=',
        'cursor=1&cursor=2',
        'cursor=%00',
        'cursor=%2B7',
        'limit=0',
        'limit=501',
        'limit=-1',
        'limit=1.5',
        'limit=500&cursor=0',
        'limit=%20',
        `run_id=${heldRun}`,
        `run_id=${pick(goodRuns).runId}`,
        'run_id=00000000-0000-0000-0000-000000000000',
        'run_id=not-a-uuid',
        `run_id=${heldRun}&cursor=${Number.MAX_SAFE_INTEGER}`,
        'run_id=%ud800',
        'foo=bar',
        `cursor=${'9'.repeat(between(20, 4000))}`,
        `limit=1&cursor=${head}&run_id=${hostileDone[0]}`,
      ];
    };
    const hostileHistory = [0, 1].map(async () => {
      while (!stop) {
        const query = pick(hostileQueries());
        const account = pick([hostile.accounts.sandbox, hostile.accounts.disconnected, good.accounts.sandbox, 'nope']);
        try {
          const response = await rawGet(`/api/v1/accounts/${account}/history?${query}`, bearer(hostileKey));
          countStatus('hostile history', response.status);
          if (![200, 400, 404, 414, 422].includes(response.status)) fail(`hostile history ?${query}: ${response.status} ${response.text.slice(0, 200)}`);
          if (response.status === 200) {
            const body = JSON.parse(response.text) as { data: unknown[]; next_cursor: string | null };
            if (!Array.isArray(body.data)) fail(`hostile history ?${query}: no data array`);
          }
        } catch (error) {
          fail(`hostile history ?${query}: ${String(error)}`);
        }
      }
    });

    // ----- hostile: pipelined GETs --------------------------------------------------------------------
    const pipeliners = [0].map(async () => {
      while (!stop) {
        const requests = Array.from({ length: between(2, 12) }, () =>
          pick([
            { path: '/healthz', headers: {} as Record<string, string>, ok: [200] },
            { path: `/api/v1/runs/${hostileDone[0]}`, headers: bearer(pipelineKey), ok: [200] },
            { path: `/api/v1/accounts/${hostile.accounts.sandbox}/history?limit=${between(1, 20)}`, headers: bearer(pipelineKey), ok: [200] },
            { path: eventsPath(hostileDone[1]!), headers: bearer(pipelineKey), ok: [200, 429] }, // a full replay that ends
            { path: eventsPath(hostileDone[0]!), headers: { ...bearer(pipelineKey), 'Last-Event-ID': '9007199254740991' }, ok: [204] },
            { path: `/api/v1/accounts/${hostile.accounts.sandbox}/history?cursor=-1`, headers: bearer(pipelineKey), ok: [422] },
          ]),
        );
        const socket = connect();
        const parser = new ResponseParser();
        const ended: RawResponse[] = [];
        const done = new Promise<void>((resolve) => {
          parser.onEnd = (response) => {
            ended.push(response);
            if (ended.length === requests.length) resolve();
          };
          socket.on('data', (chunk) => parser.feed(chunk));
          socket.on('close', () => resolve());
          setTimeout(resolve, 8000);
        });
        socket.write(requests.map((r) => requestText(r.path, r.headers)).join(''));
        await done;
        socket.destroy();
        if (ended.length !== requests.length) fail(`pipelined ${requests.length} GETs, ${ended.length} answers: ${requests.map((r) => r.path).join(' | ')}`);
        ended.forEach((response, i) => {
          countStatus('pipelined', response.status);
          if (!requests[i]!.ok.includes(response.status)) fail(`pipelined #${i} ${requests[i]!.path}: ${response.status}, expected ${requests[i]!.ok}`);
        });
        await sleep(between(50, 300));
      }
    });

    // ----- hostile: holding the per-key limit, then dropping without FIN or with RST ------------------
    const proxy = await vanishingProxy();
    const slotRecovery: { how: string; ms: number }[] = [];
    async function openHeldStreamsVia(proxyPort: number | null, key: string, count: number): Promise<net.Socket[]> {
      const opened: net.Socket[] = [];
      for (let i = 0; i < count; i++) {
        const socket = net.connect(proxyPort ?? port, '127.0.0.1');
        socket.on('error', () => undefined);
        sockets.add(socket);
        const status = await new Promise<number>((resolve) => {
          let head = '';
          const onData = (chunk: Buffer) => {
            head += chunk.toString('latin1');
            const match = /^HTTP\/1\.1 (\d{3})/.exec(head);
            if (match) {
              socket.off('data', onData);
              resolve(Number(match[1]));
            }
          };
          socket.on('data', onData);
          setTimeout(() => resolve(0), 5000);
          socket.write(requestText(eventsPath(heldRun), bearer(key)));
        });
        countStatus('holder', status);
        if (status !== 200) fail(`holder stream ${i + 1}/${count}: ${status}`);
        opened.push(socket);
      }
      return opened;
    }
    /** Time until `key` can hold MAX_STREAMS streams again (each probe stream closed at once). */
    async function timeUntilSlotsFree(key: string, boundMs: number): Promise<number> {
      const started = Date.now();
      for (;;) {
        const probes: Response[] = [];
        let all = true;
        for (let i = 0; i < MAX_STREAMS; i++) {
          const response = await fetch(`${svc.baseUrl}${eventsPath(heldRun)}`, { headers: { authorization: `Bearer ${key}` } });
          countStatus('slot probe', response.status);
          if (response.status !== 200) {
            await response.text();
            all = false;
            break;
          }
          probes.push(response);
        }
        for (const probe of probes) await probe.body?.cancel();
        if (all) return Date.now() - started;
        if (Date.now() - started > boundMs) return Infinity;
        await sleep(100);
      }
    }
    const holders = (async () => {
      let round = 0;
      while (!stop) {
        round++;
        const how = round % 2 === 1 ? 'vanish' : pick(['rst', 'fin']);
        const key = how === 'vanish' ? holderKey : resetterKey;
        const before = proxy.connections.length;
        const held = await openHeldStreamsVia(how === 'vanish' ? proxy.port : null, key, MAX_STREAMS);
        const extra = await fetch(`${svc.baseUrl}${eventsPath(heldRun)}`, { headers: { authorization: `Bearer ${key}` } });
        countStatus('holder', extra.status);
        if (extra.status !== 429) fail(`holder: stream ${MAX_STREAMS + 1} of one key answered ${extra.status}, not 429`);
        await extra.text();
        await sleep(between(200, 1500));
        if (how === 'vanish') for (const connection of proxy.connections.slice(before)) vanish(connection);
        else for (const socket of held) how === 'rst' ? socket.resetAndDestroy() : socket.destroy();
        // A vanished peer is only noticed when the stream ends on its own (SSE_MAX_LIFETIME_MS);
        // a RST or FIN at once.
        const bound = how === 'vanish' ? LIFETIME_MS + 3000 : 2000;
        const ms = await timeUntilSlotsFree(key, bound);
        slotRecovery.push({ how, ms });
        if (ms > bound) fail(`holder (${how}): the key could not open ${MAX_STREAMS} streams again within ${bound} ms`);
        await sleep(between(100, 500));
      }
    })();

    await sleep(CHAOS_MS);
    stop = true;
    const hostileClients = [...neverReaders, ...midEventDroppers, ...tightReconnectors, ...slowloris, ...hostileHistory, ...pipeliners, holders];
    await Promise.all([health, memory, producer, ...goodSse, ...goodHistory, ...hostileClients]);
    proxy.close();

    // ----- after: the hostile clients are gone; every key gets its streams back -------------------
    for (const socket of [...sockets]) socket.destroy();
    for (const key of [hostileKey, holderKey, resetterKey, pipelineKey]) {
      const ms = await timeUntilSlotsFree(key, LIFETIME_MS + 3000);
      if (ms === Infinity) fail(`after the attack: a hostile key could not open ${MAX_STREAMS} streams again within ${LIFETIME_MS + 3000} ms`);
    }
    await sleep(500);
    collectGarbage();
    const memoryAtEnd = await heapOf();

    // ----- well-behaved SSE sessions: every event of the run, once, in order --------------------------
    const finished = await Promise.all(sessions);
    let checked = 0;
    for (const session of finished) {
      if (session.ended === 'gave-up') continue;
      const truth = await runTruth(session.runId, session.accountId);
      const seen = session.seen;
      if (JSON.stringify(seen) !== JSON.stringify(truth)) {
        fail(`good sse on run ${session.runId} (${session.connections} connections, ended ${session.ended}): saw ${JSON.stringify(seen)}, the log has ${JSON.stringify(truth)}`);
      }
      checked++;
    }

    // ----- well-behaved history walks: no repeat, no skip ---------------------------------------------
    let walksChecked = 0;
    const references = new Map<string, Promise<number[]>>();
    for (const walk of await Promise.allSettled(walks)) {
      if (walk.status !== 'fulfilled') continue;
      const { accountId, query, seqs } = walk.value;
      for (let i = 1; i < seqs.length; i++) if (seqs[i]! <= seqs[i - 1]!) fail(`history walk ${accountId}${query}: seq ${seqs[i]} after ${seqs[i - 1]}`);
      const referenceKey = `${accountId}${query}`;
      if (!references.has(referenceKey)) references.set(referenceKey, historyWalk(good.keys.read, accountId, query, () => 500).then((r) => r.entries.map((e) => Number(e.seq))));
      const reference = await references.get(referenceKey)!;
      const upTo = seqs.at(-1) ?? 0;
      const expected = reference.filter((s) => s <= upTo);
      if (JSON.stringify(seqs) !== JSON.stringify(expected)) {
        const missing = expected.filter((s) => !seqs.includes(s));
        const extraSeqs = seqs.filter((s) => !expected.includes(s));
        fail(`history walk ${accountId}${query}: ${seqs.length} entries, reference ${expected.length}; missing ${missing.slice(0, 20)}, extra ${extraSeqs.slice(0, 20)}`);
      }
      walksChecked++;
    }

    const maxHealth = Math.max(...healthLatencies);
    const heapPeak = Math.max(...memorySamples.map((s) => s.heap));
    const rssPeak = Math.max(...memorySamples.map((s) => s.rss));
    console.log(
      `      seed ${SEED}: ${finished.length} good SSE sessions (${checked} checked, ${finished.reduce((n, s) => n + s.connections, 0)} connections), ` +
        `${walksChecked} history walks checked, health max ${maxHealth} ms over ${healthLatencies.length} probes, ` +
        `heap ${(memoryAtStart.heap / 2 ** 20).toFixed(0)} -> peak ${(heapPeak / 2 ** 20).toFixed(0)} -> end ${(memoryAtEnd.heap / 2 ** 20).toFixed(0)} MiB, ` +
        `${lifetimeEnds} good streams ended by their lifetime, ${runDurations.length} runs of ${Math.min(...runDurations)}-${Math.max(...runDurations)} ms, ` +
        `rss peak ${(rssPeak / 2 ** 20).toFixed(0)} MiB, slot recovery ${JSON.stringify(slotRecovery)}`,
    );
    console.log(`      statuses: ${JSON.stringify([...statuses].map(([kind, byStatus]) => [kind, Object.fromEntries(byStatus)]))}`);

    expect(failures, `seed ${SEED}`).to.deep.equal([]);
    expect(maxHealth, 'slowest /healthz (ms)').to.be.below(HEALTH_BOUND_MS);
    expect(heapPeak - memoryAtStart.heap, 'heap growth during the attack').to.be.below(HEAP_GROWTH_BOUND);
    expect(memoryAtEnd.heap - memoryAtStart.heap, 'heap kept after the attack (after a full GC)').to.be.below(RETAINED_HEAP_BOUND);
    expect(checked, 'well-behaved SSE sessions checked').to.be.greaterThan(5);
    expect(walksChecked, 'history walks checked').to.be.greaterThan(2);
    expect(slotRecovery.length, 'hold-and-drop rounds').to.be.greaterThan(1);
  });
});
