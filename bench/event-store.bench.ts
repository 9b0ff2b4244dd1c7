import { sql, type Kysely } from 'kysely';
import type { Database } from '../src/db/schema.ts';
import { BENCH_BRIEF, BENCH_KEY_ID, BENCH_META, BENCH_WORKSPACE, accountCreated, appendAccountHistories, runCanceled, runQueued } from './support/bench-events.ts';
import { v4 as uuidv4 } from 'uuid';
import { Commands } from '../commands/command-bus.ts';
import { Aggregates } from '../commands/shared/aggregates.ts';
import { PROJECTIONS } from '../projections/index.ts';
import { runsProjection } from '../projections/runs/runs-projection.ts';
import { readCheckpoint } from '../projections/runtime/checkpoints.ts';
import { Projector } from '../projections/runtime/projector.ts';
import { admissionSealsOf } from '../projections/runtime/admission-seals.ts';
import { rebuildProjection } from '../projections/runtime/rebuild.ts';
import type { Config } from '../src/config/config.ts';
import { EMPTY_POSITION, type StoredEvent, type SubjectPosition } from '../src/event-store/event-store.ts';
import { JetStreamEventStore as EventStore } from '../src/event-store/jetstream-event-store.ts';
import { SnapshotStore } from '../src/event-store/snapshot-store.ts';
import { sealEvent } from '../src/events/event-hash.ts';
import { GENESIS_HASH, type UnsealedEvent } from '../src/events/envelope.ts';
import { createLogger } from '../src/log/logger.ts';
import { openInfrastructure, type Infrastructure } from '../src/runtime/infrastructure.ts';
import { availableParallelism } from 'node:os';
import { accountCpu, type CpuShare } from './support/cpu-accounting.ts';
import { benchConfig, releaseConfig } from './support/isolation.ts';
import {
  compare,
  compareLatency,
  compareThroughput,
  figure,
  note,
  now,
  percentile,
  perSecond,
  section,
  summarize,
  timed,
} from './support/report.ts';
import { accountDecider } from '../commands/account/account-decider.ts';
import { streams } from '../src/event-store/subjects.ts';

/**
 * Event store benchmarks, each against a baseline measured in the same run:
 *   1. append with optimistic concurrency vs raw js.publish (sequential and 16 writers);
 *   2. the real projectors (one consumer for all, as the service runs them) from zero over 100,000
 *      events vs an ordered-consumer read;
 *   3. rebuildProjection('runs') over the same events vs the same read;
 *   4. command latency on an account with ~100,000 earlier events vs a fresh one, warm and cold.
 */

const APPEND_EVENTS = 5_000;
const APPEND_WRITERS = 16;
const WARMUP_EVENTS = 300;

const PROJECTION_ACCOUNTS = 500;
const EVENTS_PER_ACCOUNT = 200; // AccountCreated, 99 × (RunQueued, RunCanceled), RunQueued
const SETUP_WRITERS = 32;

const BIG_CYCLES = 50_000; // AccountCreated + 50,000 × (RunQueued, RunCanceled) = 100,001 events
const SETUP_CHUNK = 1_000;
const WARM_CYCLES = 300;
const COLD_CYCLES = 250;
const COLD_OPENS = 5;

const CATCH_UP_TIMEOUT_MS = 180_000;
/** How often section 2 measures each projection alone over sealed blocks (each run against reads of its own); BENCH_ALONE_RUNS=N to change. */
const ALONE_RUNS = Number(process.env.BENCH_ALONE_RUNS ?? 3);
/** The projectors' batch size in section 2 (BENCH_BATCH_SIZE=N to compare; default the projector's own). */
const BATCH_SIZE = process.env.BENCH_BATCH_SIZE ? Number(process.env.BENCH_BATCH_SIZE) : undefined;

const WORKSPACE = BENCH_WORKSPACE;
const KEY_ID = BENCH_KEY_ID;
const META = BENCH_META;
const BRIEF = BENCH_BRIEF;

const logger = createLogger('silent');

// ---------------------------------------------------------------------------------------
// Helpers

function positionAfter(stored: StoredEvent): SubjectPosition {
  return { lastSequence: stored.seq, lastHash: stored.event.hash };
}

/** Appends events to one subject with chained positions, one store.append per event. */
async function appendChained(store: EventStore, subject: string, events: readonly UnsealedEvent[], from = EMPTY_POSITION) {
  let position = from;
  for (const event of events) {
    const [stored] = await store.append(subject, [event], position);
    position = positionAfter(stored!);
  }
  return position;
}

/** CPU time of this process (every thread) in milliseconds: steadier than wall time on a shared machine. */
function cpuMs(): number {
  const { user, system } = process.cpuUsage();
  return (user + system) / 1000;
}

/**
 * The baseline of sections 2 and 3, read once before `work` and once after it (ordered-consumer
 * read + JSON.parse of every event through `head`), as the sum of both reads: on this shared
 * machine one read alone swung between 77,000 and 126,000 events a second within one run.
 */
async function bracketedByReads<T>(infra: Infrastructure, head: number, work: () => Promise<T>): Promise<{ value: T; baseline: { count: number; ms: number; cpuMs: number } }> {
  const before = await timeFullRead(infra, head);
  const value = await work();
  const after = await timeFullRead(infra, head);
  note(`   baseline reads: ${perSecond(before.count, before.ms).toFixed(0)} ev/s before, ${perSecond(after.count, after.ms).toFixed(0)} ev/s after`);
  return { value, baseline: { count: before.count + after.count, ms: before.ms + after.ms, cpuMs: before.cpuMs + after.cpuMs } };
}

/** Ordered-consumer read + JSON.parse of every event through `head`. */
async function timeFullRead(infra: Infrastructure, head: number): Promise<{ count: number; ms: number; cpuMs: number }> {
  const cpuBefore = cpuMs();
  const { value: count, ms } = await timed(async () => {
    let n = 0;
    for await (const _stored of infra.store.readFiltered(infra.subjects.all, 1, head)) n++;
    return n;
  });
  if (count !== head) throw new Error(`baseline read returned ${count} events, expected ${head}`);
  return { count, ms, cpuMs: cpuMs() - cpuBefore };
}

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

const CORES = availableParallelism();

/**
 * The highest ratio to the read the machine allows at the CPU per event just measured: even
 * with every core busy all the time, an event takes the whole machine's CPU for it divided by
 * the cores; the read takes its own wall time. Shows whether a ratio is held back by the
 * projector's own waiting (bound well above the ratio) or by the machine (bound near it).
 */
function machineBound(cpu: CpuShare, read: { count: number; ms: number }): string {
  const fastestMicros = cpu.machineMicros / CORES;
  const readMicros = (read.ms * 1000) / read.count;
  return `machine bound: ${cpu.machineMicros.toFixed(1)} µs of CPU an event on ${CORES} cores takes at least ${fastestMicros.toFixed(1)} µs; the read took ${readMicros.toFixed(1)} µs: at most ${(readMicros / fastestMicros).toFixed(2)}× of it`;
}

async function withInfrastructure<T>(config: Config, name: string, work: (infra: Infrastructure) => Promise<T>): Promise<T> {
  const infra = await openInfrastructure(config, name);
  try {
    return await work(infra);
  } finally {
    await infra.close();
  }
}

// ---------------------------------------------------------------------------------------
// 1. Append throughput

async function benchAppend(): Promise<void> {
  section(`1. append throughput: store.append (validate, hash-chain, expected subject seq) vs raw js.publish, ${APPEND_EVENTS.toLocaleString('en-US')} events each`);
  const config = benchConfig('append');
  try {
    await withInfrastructure(config, 'bench-append', async (infra) => {
      const { store, js, subjects } = infra;
      const subjectOf = (name: string) => subjects.forAggregate(streams.account(WORKSPACE, name));

      // Unsealed events for the OCC path; for the raw path, the JSON of equivalent sealed events (same size).
      const unsealed = (account: string, count: number) => Array.from({ length: count }, () => runQueued(account, uuidv4()));
      const payloads = (account: string, count: number) =>
        unsealed(account, count).map((event) => JSON.stringify(sealEvent(event, GENESIS_HASH)));
      const sampleBytes = Buffer.byteLength(payloads('acc-sample', 1)[0]!);
      note(`payload: sealed RunQueued envelope, ${sampleBytes} bytes of JSON; both paths await each publish's ack`);

      // Warm-up of both paths (JIT, connection buffers, stream files).
      await appendChained(store, subjectOf('warm-occ'), unsealed('warm-occ', WARMUP_EVENTS));
      for (const payload of payloads('warm-raw', WARMUP_EVENTS)) await js.publish(subjectOf('warm-raw'), payload);

      // Sequential.
      const rawSeqPayloads = payloads('raw-seq', APPEND_EVENTS);
      const rawSeq = await timed(async () => {
        for (const payload of rawSeqPayloads) await js.publish(subjectOf('raw-seq'), payload);
      });
      const occSeqEvents = unsealed('occ-seq', APPEND_EVENTS);
      const occSeq = await timed(() => appendChained(store, subjectOf('occ-seq'), occSeqEvents));

      // 16 concurrent writers, each on its own aggregate subject.
      const perWriter = (total: number, writer: number) => Math.floor(total / APPEND_WRITERS) + (writer < total % APPEND_WRITERS ? 1 : 0);
      const writers = Array.from({ length: APPEND_WRITERS }, (_, w) => w);
      const rawConcPayloads = writers.map((w) => payloads(`raw-conc-${w}`, perWriter(APPEND_EVENTS, w)));
      const rawConc = await timed(() =>
        Promise.all(
          writers.map(async (w) => {
            for (const payload of rawConcPayloads[w]!) await js.publish(subjectOf(`raw-conc-${w}`), payload);
          }),
        ),
      );
      const occConcEvents = writers.map((w) => unsealed(`occ-conc-${w}`, perWriter(APPEND_EVENTS, w)));
      const occConc = await timed(() =>
        Promise.all(writers.map((w) => appendChained(store, subjectOf(`occ-conc-${w}`), occConcEvents[w]!))),
      );

      compareThroughput('append (OCC, sync)', APPEND_EVENTS, occSeq.ms, 'raw js.publish (sync)', APPEND_EVENTS, rawSeq.ms);
      compareThroughput(
        `append (OCC, ${APPEND_WRITERS} writers)`,
        APPEND_EVENTS,
        occConc.ms,
        `raw js.publish (${APPEND_WRITERS} writers)`,
        APPEND_EVENTS,
        rawConc.ms,
      );
      compare({
        name: `append latency (OCC, sync) mean`,
        value: occSeq.ms / APPEND_EVENTS,
        unit: 'ms',
        baselineName: 'raw js.publish (sync) mean',
        baselineValue: rawSeq.ms / APPEND_EVENTS,
      });
    });
  } finally {
    await releaseConfig(config);
  }
}

// ---------------------------------------------------------------------------------------
// 2 + 3. Projection throughput and rebuild

async function benchProjections(includeRebuild: boolean): Promise<void> {
  const total = PROJECTION_ACCOUNTS * EVENTS_PER_ACCOUNT;
  section(
    `2. projection throughput: real projectors (${PROJECTIONS.map((p) => p.name).join(', ')}) from zero over ` +
      `${total.toLocaleString('en-US')} events vs ordered-consumer read + JSON.parse`,
  );
  const config = benchConfig('projections');
  try {
    // Setup: 500 accounts × 200 events, appended with store.append on distinct subjects. In a
    // process of its own: a process believes what it signed itself without verifying it again,
    // and the projectors here must check every signature as a projector process does.
    const setup = await withInfrastructure(config, 'bench-projections-setup', (writer) =>
      timed(() => appendAccountHistories(writer, PROJECTION_ACCOUNTS, EVENTS_PER_ACCOUNT, SETUP_WRITERS)),
    );
    await withInfrastructure(config, 'bench-projections', async (infra) => {
      const { store, database } = infra;
      const db = database.db;
      const head = await store.lastSequence();
      if (head !== total) throw new Error(`stream holds ${head} events, expected ${total}`);
      figure('setup: store.append, 32 writers', perSecond(total, setup.ms), 'ev/s', `(${(setup.ms / 1000).toFixed(1)} s, not a result)`);


      // As the service runs them: one projector for every projection (one consumer, one admission
      // of each batch, every event's Ed25519 signature checked), each in its own transaction.
      // No block of this stream was admitted before: every event is checked in full, and the
      // blocks are sealed on the way (the first pass over a live stream does the same).
      const firstSeals = admissionSealsOf(infra, logger);
      const projector = new Projector({
        db,
        js: infra.js,
        jsm: infra.jsm,
        stream: config.eventStream,
        filterSubject: infra.subjects.all,
        projections: PROJECTIONS,
        admission: store.admission,
        seals: firstSeals,
        logger,
        batchSize: BATCH_SIZE,
      });
      // Until the last projection reached the head, plus stop(): the wait loop's own reads are in it too.
      const {
        value: { value: reached, cpu },
        baseline,
      } = await bracketedByReads(infra, head, () => accountCpu('projectors-from-zero', () => catchUp(projector, db, head), () => head));
      const allMs = Math.max(...reached.values());
      for (const [name, ms] of reached) {
        compareThroughput(`projector ${name} (from 0)`, head, ms, 'ordered read + parse', baseline.count, baseline.ms);
      }
      compareThroughput(`projectors, all ${PROJECTIONS.length} together`, head, allMs, 'ordered read + parse', baseline.count, baseline.ms);
      compare({
        name: 'projectors, CPU of this process per event',
        value: cpu.processMicros,
        unit: 'µs',
        baselineName: 'ordered read + parse',
        baselineValue: (baseline.cpuMs * 1000) / baseline.count,
        ratioNote: '(projector/read; Postgres and NATS not counted)',
      });
      note(
        `the same run's other processes per event: nats-server ${cpu.natsMicros.toFixed(1)} µs, ` +
          `postgres ${cpu.postgresMicros.toFixed(1)} µs, whole machine ${cpu.machineMicros.toFixed(1)} µs (${CORES} cores)`,
      );
      note(`   ${machineBound(cpu, baseline)}`);
      note(`   admission seals written: ${firstSeals.counts.written} (blocks of ${firstSeals.blockSize} sequences); events believed from seals: ${firstSeals.counts.eventsFromSeals}`);
      await checkRunsTable(infra, 'after projectors');

      // Each projection alone, from zero, with a consumer of its own and the admission of a fresh
      // process (no verdict or signature remembered from the run above), beside the same read in
      // that process: what each one costs by itself when it reads the stream again (a rebuild, a
      // new projection or version, another process catching up), believing the blocks sealed by
      // the pass above. The last line is the same without seals: every event checked in full.
      const alone = async (projection: (typeof PROJECTIONS)[number], withSeals: boolean): Promise<number> => {
        await sql`delete from projection_checkpoints where projection = ${projection.name}`.execute(db);
        return withInfrastructure(config, `bench-projection-${projection.name}`, async (fresh) => {
          const seals = withSeals ? admissionSealsOf(fresh, logger) : undefined;
          const single = new Projector({
            db: fresh.database.db,
            js: fresh.js,
            jsm: fresh.jsm,
            stream: config.eventStream,
            filterSubject: fresh.subjects.all,
            projection,
            admission: fresh.store.admission,
            seals,
            logger,
            batchSize: BATCH_SIZE,
          });
          const label = `projector ${projection.name} alone (from 0${withSeals ? '' : ', no seals'})`;
          const {
            value: { value: reached, cpu },
            baseline: read,
          } = await bracketedByReads(fresh, head, () => accountCpu(`projector-${projection.name}-alone${withSeals ? "" : "-no-seals"}`, () => catchUp(single, fresh.database.db, head), () => head));
          const ratio = compareThroughput(label, head, reached.get(projection.name)!, 'ordered read + parse', read.count, read.ms);
          note(
            `   CPU per event: this process ${cpu.processMicros.toFixed(1)} µs (its ordered read + parse ${((read.cpuMs * 1000) / read.count).toFixed(1)} µs), ` +
              `nats-server ${cpu.natsMicros.toFixed(1)} µs, postgres ${cpu.postgresMicros.toFixed(1)} µs, whole machine ${cpu.machineMicros.toFixed(1)} µs` +
              (seals ? `; events believed from seals: ${seals.counts.eventsFromSeals.toLocaleString('en-US')}` : ''),
          );
          note(`   ${machineBound(cpu, read)}`);
          return ratio;
        });
      };
      // Each one several times: on this shared machine one measurement alone swung by a fifth.
      for (const projection of PROJECTIONS) {
        const ratios: number[] = [];
        for (let run = 0; run < ALONE_RUNS; run++) ratios.push(await alone(projection, true));
        note(`   projector ${projection.name} alone, ${ALONE_RUNS} runs: ratios ${ratios.map((r) => r.toFixed(2)).join(', ')}; median ${percentile(ratios, 50).toFixed(2)}`);
      }
      await alone(runsProjection, false);
      await checkRunsTable(infra, 'after each projection alone');
      if (!includeRebuild) return;

      section(`3. rebuild: rebuildProjection(runs) over ${total.toLocaleString('en-US')} events vs ordered-consumer read + JSON.parse`);
      const rebuildSeals = admissionSealsOf(infra, logger);
      const { value: rebuild, baseline: rebuildBaseline } = await bracketedByReads(infra, head, () =>
        timed(() => rebuildProjection({ db, store, schema: config.databaseSchema, filterSubject: infra.subjects.all, projection: runsProjection, seals: rebuildSeals })),
      );
      if (rebuild.value.events !== head) throw new Error(`rebuild applied ${rebuild.value.events} events, expected ${head}`);
      compareThroughput('rebuild runs', rebuild.value.events, rebuild.ms, 'ordered read + parse', rebuildBaseline.count, rebuildBaseline.ms);
      figure('rebuild runs, wall time', rebuild.ms / 1000, 's', `(events believed from seals: ${rebuildSeals.counts.eventsFromSeals.toLocaleString('en-US')})`);
      await checkRunsTable(infra, 'after rebuild');

      // The cost of believing only signed events: the same rebuild, without seals, through a store
      // whose admission checks structure only (JSON, schema, text, subject), no signatures.
      const structuralOnly = new EventStore(infra.js, infra.jsm, config.eventStream);
      const unchecked = await timed(() =>
        rebuildProjection({ db, store: structuralOnly, schema: config.databaseSchema, filterSubject: infra.subjects.all, projection: runsProjection }),
      );
      compareThroughput('rebuild runs, from seals', rebuild.value.events, rebuild.ms, 'same, no seals, signatures not checked', unchecked.value.events, unchecked.ms);
      await checkRunsTable(infra, 'after rebuild without signature checks');
    });
  } finally {
    await releaseConfig(config);
  }
}

/**
 * Starts `projector` and waits until the checkpoint of each of its projections reaches `head`;
 * stops it. @returns the ms from the start to when each projection got there.
 */
async function catchUp(projector: Projector, db: Kysely<Database>, head: number): Promise<Map<string, number>> {
  const reached = new Map<string, number>();
  const started = now();
  try {
    await projector.start();
    const statuses = () => projector.statuses().filter((status) => !reached.has(status.name));
    for (let waiting = statuses(); waiting.length > 0; waiting = statuses()) {
      for (const status of waiting) {
        const checkpoint = await readCheckpoint(db, status.name);
        if (checkpoint && checkpoint.lastSeq >= head) reached.set(status.name, now() - started);
        else if (status.stalled) note(`(projection ${status.name} stalled, retrying: ${status.lastError})`);
      }
      if (now() - started > CATCH_UP_TIMEOUT_MS) throw new Error(`projectors did not reach ${head} within ${CATCH_UP_TIMEOUT_MS} ms`);
      if (reached.size < projector.statuses().length) await sleep(20);
    }
  } finally {
    await projector.stop();
  }
  return reached;
}

/** The read model must hold what the log says: one run per RunQueued, all but the last of each account canceled. */
async function checkRunsTable(infra: Infrastructure, when: string): Promise<void> {
  const { rows } = await sql<{ status: string; n: number }>`select status, count(*)::int as n from runs group by status order by status`.execute(
    infra.database.db,
  );
  const counts = Object.fromEntries(rows.map((r) => [r.status, r.n]));
  const canceled = (PROJECTION_ACCOUNTS * (EVENTS_PER_ACCOUNT - 2)) / 2;
  const ok = counts.canceled === canceled && counts.queued === PROJECTION_ACCOUNTS && rows.length === 2;
  note(`check ${when}: runs ${JSON.stringify(counts)} ${ok ? 'as expected' : `UNEXPECTED (want canceled=${canceled}, queued=${PROJECTION_ACCOUNTS})`}`);
  if (!ok) throw new Error(`runs read model is wrong ${when}`);
}

// ---------------------------------------------------------------------------------------
// 4. Command latency on a long aggregate

interface CycleSamples {
  readonly start: number[];
  readonly cancel: number[];
  /** Events each cold load had to fold after the persisted snapshot (only while a TailProbe measures). */
  readonly startTails: number[];
  readonly cancelTails: number[];
}

const samples = (): CycleSamples => ({ start: [], cancel: [], startTails: [], cancelTails: [] });

/**
 * Diagnostics for the cold path, outside the timed region: how many events of the
 * subject lie after its persisted snapshot when a command starts (what the load folds).
 */
class TailProbe {
  private readonly seqs = new Map<string, number[]>();
  /** Off during the warm phase, where loads never read the snapshot. */
  measuring = false;

  private readonly snapshots: SnapshotStore;
  private readonly subjectOf: (accountId: string) => string;

  constructor(
    snapshots: SnapshotStore,
    subjectOf: (accountId: string) => string,
  ) {
    this.snapshots = snapshots;
    this.subjectOf = subjectOf;
  }

  appended(accountId: string, seq: number): void {
    const list = this.seqs.get(accountId) ?? [];
    list.push(seq);
    this.seqs.set(accountId, list);
  }

  /** Tail length before the next command; events older than the first tracked one are not counted. */
  async tail(accountId: string): Promise<number> {
    const snapshot = await this.snapshots.read(this.subjectOf(accountId));
    const after = snapshot?.lastSequence ?? 0;
    return (this.seqs.get(accountId) ?? []).filter((seq) => seq > after).length;
  }
}

function startCommand(accountId: string, runId: string) {
  return { type: 'StartRun' as const, workspaceId: WORKSPACE, accountId, runId, brief: BRIEF, autoApply: false, keyId: KEY_ID, scope: 'write' as const, meta: META };
}

function cancelCommand(accountId: string, runId: string) {
  return { type: 'CancelRun' as const, workspaceId: WORKSPACE, accountId, runId, knownStatus: 'queued', meta: META };
}

/**
 * One cycle on each account, in random order. Strict alternation would hand every
 * stream sequence divisible by 64 (where a snapshot is persisted on append) to the same
 * account, and so measure the snapshot cadence instead of the history length.
 */
async function cyclePair(
  model: () => Commands,
  a: [string, CycleSamples],
  b: [string, CycleSamples],
  probe?: TailProbe,
): Promise<void> {
  const [first, second] = Math.random() < 0.5 ? [a, b] : [b, a];
  await cycle(model, first[0], first[1], probe);
  await cycle(model, second[0], second[1], probe);
}

/** One start + cancel cycle; `model()` is asked for a write model before each command. */
async function cycle(model: () => Commands, accountId: string, into: CycleSamples, probe?: TailProbe): Promise<void> {
  const runId = uuidv4();
  if (probe?.measuring) into.startTails.push(await probe.tail(accountId));
  const start = await timed(() => model().handle(accountDecider, startCommand(accountId, runId)));
  if (start.value.appended.length !== 1) throw new Error(`startRun on ${accountId} appended ${start.value.appended.length} events`);
  into.start.push(start.ms);
  probe?.appended(accountId, start.value.appended[0]!.seq);
  if (probe?.measuring) into.cancelTails.push(await probe.tail(accountId));
  const cancel = await timed(() => model().handle(accountDecider, cancelCommand(accountId, runId)));
  if (cancel.value.appended.length !== 1) throw new Error(`cancelRun on ${accountId} appended ${cancel.value.appended.length} events`);
  into.cancel.push(cancel.ms);
  probe?.appended(accountId, cancel.value.appended[0]!.seq);
}

async function benchCommandLatency(): Promise<void> {
  const bigEvents = 1 + 2 * BIG_CYCLES;
  section(`4. command latency: startRun / cancelRun on an account with ${bigEvents.toLocaleString('en-US')} earlier events (big) vs a fresh account (new)`);
  const config = benchConfig('latency');
  const bucket = `${config.eventStream}_snapshots`;
  try {
    await withInfrastructure(config, 'bench-latency', async (infra) => {
      const { store, subjects, commands } = infra;
      const big = 'acc-big';
      const bigSubject = subjects.forAggregate(streams.account(WORKSPACE, big));

      // Setup: the big account's history, one subject, chained positions.
      const setup = await timed(async () => {
        let position = EMPTY_POSITION;
        const first = await store.append(bigSubject, [accountCreated(big)], position);
        position = positionAfter(first[0]!);
        for (let done = 0; done < BIG_CYCLES; done += SETUP_CHUNK / 2) {
          const chunk: UnsealedEvent[] = [];
          for (let i = 0; i < Math.min(SETUP_CHUNK / 2, BIG_CYCLES - done); i++) {
            const runId = uuidv4();
            chunk.push(runQueued(big, runId), runCanceled(big, runId));
          }
          const stored = await store.append(bigSubject, chunk, position);
          position = positionAfter(stored[stored.length - 1]!);
        }
        return position;
      });
      if (setup.value.lastSequence !== bigEvents) throw new Error(`big subject ends at ${setup.value.lastSequence}, expected ${bigEvents}`);
      figure('setup: store.append, one subject', perSecond(bigEvents, setup.ms), 'ev/s', `(${(setup.ms / 1000).toFixed(1)} s, not a result)`);

      // One load in another infrastructure: folds the whole history once and persists a snapshot.
      await withInfrastructure(config, 'bench-latency-snapshot', async (other) => {
        const fold = await timed(() => other.aggregates.load(accountDecider, streams.account(WORKSPACE, big)));
        if (!fold.value.state.exists || fold.value.state.runsQueued !== BIG_CYCLES) throw new Error('big account folded to an unexpected state');
        figure('full fold of big (no cache, no snapshot)', fold.ms, 'ms', `(${bigEvents.toLocaleString('en-US')} events, once)`);
        const snapshots = await SnapshotStore.open(other.nc, bucket, config.streamReplicas, other.signing.signer);
        const deadline = now() + 10_000;
        while ((await snapshots.read(bigSubject))?.lastSequence !== fold.value.lastSequence) {
          if (now() > deadline) throw new Error('snapshot of the big account was not persisted');
          await sleep(10);
        }
      });

      // (a) warm: this process, in-memory cache. Big and new interleaved (random order per pair) so drift hits both alike.
      const probe = new TailProbe(await SnapshotStore.open(infra.nc, bucket, config.streamReplicas, infra.signing.signer), (id) => subjects.forAggregate(streams.account(WORKSPACE, id)));
      const createAccount = async (accountId: string) => {
        const created = await commands.handle(accountDecider, { type: 'CreateAccount', workspaceId: WORKSPACE, accountId, name: accountId, platform: 'sandbox', sandboxSeed: 1, meta: META });
        probe.appended(accountId, created.appended[0]!.seq);
      };
      const newWarm = 'acc-new-warm';
      await createAccount(newWarm);
      const discard = samples();
      for (let i = 0; i < 20; i++) await cyclePair(() => commands, [big, discard], [newWarm, discard], probe);
      const warmBig = samples();
      const warmNew = samples();
      for (let i = 0; i < WARM_CYCLES; i++) await cyclePair(() => commands, [big, warmBig], [newWarm, warmNew], probe);

      // (b) cold: a new infrastructure (empty cache) that has to use the KV snapshot + tail.
      const newCold = 'acc-new-cold';
      await createAccount(newCold);
      probe.measuring = true;
      const firstBig = samples();
      const firstNew = samples();
      for (let i = 0; i < COLD_OPENS; i++) {
        // The very first commands of a new infrastructure (its own connection, empty cache).
        await withInfrastructure(config, `bench-latency-open-${i}`, (cold) =>
          cyclePair(() => cold.commands, [big, firstBig], [newCold, firstNew], probe),
        );
      }
      const coldBig = samples();
      const coldNew = samples();
      await withInfrastructure(config, 'bench-latency-cold', async (cold) => {
        // A series on one new infrastructure: every command gets a write model with an empty cache.
        const snapshots = await SnapshotStore.open(cold.nc, bucket, config.streamReplicas, cold.signing.signer);
        const fresh = () => new Commands(new Aggregates(cold.store, cold.subjects, snapshots));
        for (let i = 0; i < COLD_CYCLES; i++) await cyclePair(fresh, [big, coldBig], [newCold, coldNew], probe);
      });

      note(`warm = same process, in-memory cache (${WARM_CYCLES} cycles each, after 20 untimed); ratio = big/new`);
      compareLatency('warm startRun big', warmBig.start, 'new', warmNew.start, '(big/new)');
      compareLatency('warm cancelRun big', warmBig.cancel, 'new', warmNew.cancel, '(big/new)');
      compareLatency('warm start+cancel big', [...warmBig.start, ...warmBig.cancel], 'new', [...warmNew.start, ...warmNew.cancel], '(big/new)');
      note(
        `cold = empty cache, so KV snapshot + tail: first startRun after each of ${COLD_OPENS} new openInfrastructure calls; ` +
          `then ${COLD_CYCLES} cycles each on one new infrastructure with a fresh write model (empty cache) per command`,
      );
      compareLatency(`cold 1st startRun after open big`, firstBig.start, 'new', firstNew.start, '(big/new)');
      compareLatency('cold startRun big', coldBig.start, 'new', coldNew.start, '(big/new)');
      compareLatency('cold cancelRun big', coldBig.cancel, 'new', coldNew.cancel, '(big/new)');
      compareLatency('cold start+cancel big', [...coldBig.start, ...coldBig.cancel], 'new', [...coldNew.start, ...coldNew.cancel], '(big/new)');
      const tails = (values: readonly number[]) => {
        const t = summarize(values);
        return `mean ${t.mean.toFixed(1)}, p50 ${t.p50}, max ${t.max}`;
      };
      note(`events after the KV snapshot (what a cold load folds), 1st after open: big ${tails(firstBig.startTails)}; new ${tails(firstNew.startTails)}`);
      note(`events after the KV snapshot (what a cold load folds), series:       big ${tails([...coldBig.startTails, ...coldBig.cancelTails])}; new ${tails([...coldNew.startTails, ...coldNew.cancelTails])}`);
      note('(a fold reads up to 32 events by direct get, one round trip each, the rest through an ordered consumer. A cold load that');
      note(' folds >= 64 events persists a snapshot, so in the series tails stay under ~64 whatever the history length. While loads hit');
      note(' the cache, a snapshot is only persisted by an append landing on a stream sequence divisible by 64, so after a warm period');
      note(' the tail is random and unbounded. Which account gets those appends is random here: compare tails before a cold ratio.)');
    });
  } finally {
    await releaseConfig(config);
  }
}

/** Runs every section; BENCH_SECTIONS=1,4 runs only those (section 3 runs on section 2's setup, after it). */
export async function run(): Promise<void> {
  const only = (process.env.BENCH_SECTIONS ?? '').split(',').map((s) => s.trim()).filter(Boolean);
  const wanted = (...ids: string[]) => only.length === 0 || ids.some((id) => only.includes(id));
  if (wanted('1')) await benchAppend();
  if (wanted('2', '3')) await benchProjections(wanted('3'));
  if (wanted('4')) await benchCommandLatency();
}
