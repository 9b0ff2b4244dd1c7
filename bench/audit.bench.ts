import { sql } from 'kysely';
import { PROJECTIONS } from '../projections/index.ts';
import { readCheckpoint } from '../projections/runtime/checkpoints.ts';
import { Projector } from '../projections/runtime/projector.ts';
import { auditVerifier, verifyEventLog, type VerifyReport } from '../src/audit/verify-event-log.ts';
import { createLogger } from '../src/log/logger.ts';
import { openInfrastructure, type Infrastructure } from '../src/runtime/infrastructure.ts';
import { appendAccountHistories } from './support/bench-events.ts';
import { benchConfig, releaseConfig } from './support/isolation.ts';
import { compare, compareThroughput, figure, note, now, perSecond, section, timed } from './support/report.ts';

/**
 * `audit verify` benchmarks (issue 6) over 100,000 valid events:
 *   1. verifyEventLog without read models (JSON, schema, subject, hash, chain per event)
 *      vs an ordered-consumer read + JSON.parse of the same events;
 *   2. verifyEventLog with every signature checked, as `adsagent audit verify` runs it (in
 *      libuv's thread pool, many at once), vs the same read + parse with each signature
 *      verified on the event loop, one after the other;
 *   3. verifyEventLog with the read models (a fresh fold of each projection compared row by
 *      row with the live tables, kept up to date by running projectors).
 */

const ACCOUNTS = 500;
const EVENTS_PER_ACCOUNT = 200; // AccountCreated, 99 × (RunQueued, RunCanceled), RunQueued
const SETUP_WRITERS = 32;
const CATCH_UP_TIMEOUT_MS = 180_000;

const logger = createLogger('silent');

async function timeFullRead(infra: Infrastructure, head: number): Promise<{ count: number; ms: number }> {
  const { value: count, ms } = await timed(async () => {
    let n = 0;
    for await (const _stored of infra.store.readFiltered(infra.subjects.all, 1, head)) n++;
    return n;
  });
  if (count !== head) throw new Error(`baseline read returned ${count} events, expected ${head}`);
  return { count, ms };
}

/** Ordered-consumer read + JSON.parse, each event's signature verified on the event loop before the next is read. */
async function timeReadVerifyingEach(infra: Infrastructure, head: number): Promise<{ count: number; ms: number }> {
  const verifier = auditVerifier(infra.signing);
  const { value: count, ms } = await timed(async () => {
    let n = 0;
    for await (const stored of infra.store.readFiltered(infra.subjects.all, 1, head)) {
      verifier.check(stored.event, stored.subject, stored.seq);
      n++;
    }
    return n;
  });
  if (count !== head) throw new Error(`read returned ${count} events, expected ${head}`);
  return { count, ms };
}

function checkReport(report: VerifyReport, head: number, readModels: number): void {
  if (report.discrepancy) throw new Error(`verifyEventLog found a discrepancy: ${JSON.stringify(report.discrepancy)}`);
  if (report.events !== head) throw new Error(`verifyEventLog checked ${report.events} events, expected ${head}`);
  if (report.readModelsChecked.length !== readModels) throw new Error(`verifyEventLog checked read models ${report.readModelsChecked.join(', ')}`);
}

/**
 * Runs verifyEventLog and splits its wall time by the progress reports: the event pass ends
 * at its last report; a fold runs from its first report to its last (its first batch is
 * counted before it); what lies between a fold's last report and the next phase's first is
 * that read model's comparison (dump of live and fresh tables, row diff, drop of the shadow schema).
 */
async function verifyWithPhases(options: Parameters<typeof verifyEventLog>[0]) {
  const first = new Map<string, number>();
  const last = new Map<string, number>();
  const started = now();
  const { value, ms } = await timed(() =>
    verifyEventLog({
      ...options,
      onProgress: (phase) => {
        const at = now() - started;
        if (!first.has(phase)) first.set(phase, at);
        last.set(phase, at);
      },
    }),
  );
  const names = [...first.keys()];
  const phases: { phase: string; ms: number }[] = [];
  names.forEach((phase, i) => {
    const start = phase === 'events' ? 0 : first.get(phase)!;
    const next = names[i + 1];
    const gap = (next ? first.get(next)! : ms) - last.get(phase)!;
    phases.push({ phase: phase === 'events' ? 'event pass' : phase, ms: last.get(phase)! - start });
    if (phase === 'events') {
      if (next) phases.push({ phase: `dump live ${next.replace(/^fold /, '')}, 1st batch`, ms: gap });
    } else {
      phases.push({ phase: `compare ${phase.replace(/^fold /, '')}${next ? ', next dump' : ''}`, ms: gap });
    }
  });
  return { report: value, ms, phases };
}

export async function run(): Promise<void> {
  const total = ACCOUNTS * EVENTS_PER_ACCOUNT;
  const config = benchConfig('audit');
  try {
    const infra = await openInfrastructure(config, 'bench-audit');
    try {
      const { store, database } = infra;
      const setup = await timed(() => appendAccountHistories(infra, ACCOUNTS, EVENTS_PER_ACCOUNT, SETUP_WRITERS));
      const head = await store.lastSequence();
      if (head !== total) throw new Error(`stream holds ${head} events, expected ${total}`);
      figure('setup: store.append, 32 writers', perSecond(total, setup.ms), 'ev/s', `(${(setup.ms / 1000).toFixed(1)} s, ${ACCOUNTS} subjects, not a result)`);

      // ---- 1. without read models
      section(`1. verifyEventLog over ${total.toLocaleString('en-US')} events, no read models, vs ordered-consumer read + JSON.parse`);
      const baseline = await timeFullRead(infra, head);
      const plain = await verifyWithPhases({ store, subjects: infra.subjects });
      checkReport(plain.report, head, 0);
      compareThroughput('verifyEventLog (no read models)', plain.report.events, plain.ms, 'ordered read + parse', baseline.count, baseline.ms);
      figure('verifyEventLog (no read models), wall', plain.ms / 1000, 's', `${plain.report.subjects} subjects, no discrepancy`);

      // ---- 2. with every signature checked
      section(`2. verifyEventLog over ${total.toLocaleString('en-US')} events with every signature checked (as adsagent audit verify), vs read + parse verifying each on the event loop`);
      const verifyingEach = await timeReadVerifyingEach(infra, head);
      const signed = await verifyWithPhases({ store, subjects: infra.subjects, verifier: auditVerifier(infra.signing) });
      checkReport(signed.report, head, 0);
      if (signed.report.signedEvents !== head) throw new Error(`verifyEventLog counted ${signed.report.signedEvents} valid signatures, expected ${head}`);
      compareThroughput('verifyEventLog, signatures checked', signed.report.events, signed.ms, 'read + parse + verify each in line', verifyingEach.count, verifyingEach.ms);
      compareThroughput('verifyEventLog, signatures checked', signed.report.events, signed.ms, 'ordered read + parse', baseline.count, baseline.ms);
      figure('verifyEventLog, signatures checked, wall', signed.ms / 1000, 's', `${signed.report.signedEvents.toLocaleString('en-US')} signatures valid`);

      // ---- 3. with read models
      section(`3. verifyEventLog over ${total.toLocaleString('en-US')} events with the read models (${PROJECTIONS.map((p) => p.name).join(', ')}), projectors caught up`);
      const projectors = PROJECTIONS.map(
        (projection) =>
          new Projector({ db: database.db, js: infra.js, jsm: infra.jsm, stream: config.eventStream, filterSubject: infra.subjects.all, projection, logger }),
      );
      try {
        const catchUp = await timed(async () => {
          await Promise.all(projectors.map((p) => p.start()));
          const deadline = now() + CATCH_UP_TIMEOUT_MS;
          for (;;) {
            const checkpoints = await Promise.all(PROJECTIONS.map((p) => readCheckpoint(database.db, p.name)));
            if (checkpoints.every((c) => c && c.lastSeq >= head)) return;
            if (now() > deadline) throw new Error(`projectors did not reach ${head} within ${CATCH_UP_TIMEOUT_MS} ms`);
            await new Promise((resolve) => setTimeout(resolve, 50));
          }
        });
        note(`setup: ${projectors.length} projectors caught up from 0 in ${(catchUp.ms / 1000).toFixed(1)} s (not a result)`);
        const full = await verifyWithPhases({
          store,
          subjects: infra.subjects,
          readModels: { db: database.db, schema: config.databaseSchema, projections: PROJECTIONS },
        });
        checkReport(full.report, head, PROJECTIONS.length);
        compare({
          name: 'verifyEventLog (with read models), wall',
          value: full.ms / 1000,
          unit: 's',
          baselineName: 'verifyEventLog (no read models)',
          baselineValue: plain.ms / 1000,
        });
        compareThroughput('verifyEventLog (with read models)', full.report.events, full.ms, 'ordered read + parse', baseline.count, baseline.ms);
        note(`phases, from verifyEventLog's progress reports (read models checked: ${full.report.readModelsChecked.join(', ')}, no discrepancy):`);
        for (const { phase, ms } of full.phases) figure(`  ${phase}`, ms / 1000, 's');
        const rows: string[] = [];
        for (const projection of PROJECTIONS) {
          for (const table of projection.tables) {
            const { rows: [count] } = await sql<{ n: number }>`select count(*)::int as n from ${sql.id(config.databaseSchema, table)}`.execute(database.db);
            rows.push(`${table} ${count?.n ?? 0}`);
          }
        }
        note(`live rows compared per table: ${rows.join(', ')}`);
      } finally {
        await Promise.all(projectors.map((p) => p.stop()));
      }
    } finally {
      await infra.close();
    }
  } finally {
    await releaseConfig(config);
  }
}
