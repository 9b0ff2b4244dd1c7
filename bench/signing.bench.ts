import { v4 as uuidv4 } from 'uuid';
import { verifyEventLog } from '../src/audit/verify-event-log.ts';
import { EMPTY_POSITION, type SubjectPosition } from '../src/event-store/event-store.ts';
import { JetStreamEventStore as EventStore } from '../src/event-store/jetstream-event-store.ts';
import { GENESIS_HASH, type EventEnvelope, type UnsealedEvent } from '../src/events/envelope.ts';
import { sealEvent } from '../src/events/event-hash.ts';
import { DEFAULT_BATCH_SIZE } from '../projections/runtime/projector.ts';
import { EventAdmission, type RawEventMessage } from '../src/events/event-admission.ts';
import { EventVerifier } from '../src/events/signing/event-verifier.ts';
import { openInfrastructure, type Infrastructure } from '../src/runtime/infrastructure.ts';
import { BENCH_WORKSPACE, appendAccountHistories, runQueued } from './support/bench-events.ts';
import { benchConfig, releaseConfig } from './support/isolation.ts';
import { compare, compareThroughput, figure, note, section, timed } from './support/report.ts';
import { streams } from '../src/event-store/subjects.ts';

/**
 * Event signing benchmarks (issue 9), each against a baseline measured in the same run:
 *   1. store.append with signing vs the same store without a signer (sequential and 16 writers);
 *   2. CPU alone: sealEvent with and without signing, EventVerifier.check per event;
 *   3. a projector-like read: ordered-consumer read + every signature checked, and + a projector's
 *      batch admission (schema, chains, the newest signature of each subject), vs read + parse;
 *   4. verifyEventLog (no read models) with signature checks vs without.
 */

const APPEND_EVENTS = 3_000;
const APPEND_WRITERS = 16;
const WARMUP_EVENTS = 300;
const CPU_EVENTS = 10_000;
const READ_ACCOUNTS = 200;
const EVENTS_PER_ACCOUNT = 200; // 40,000 events
const SETUP_WRITERS = 32;

async function appendChained(store: EventStore, subject: string, events: readonly UnsealedEvent[]): Promise<void> {
  let position: SubjectPosition = EMPTY_POSITION;
  for (const event of events) {
    const [stored] = await store.append(subject, [event], position);
    position = { lastSequence: stored!.seq, lastHash: stored!.event.hash };
  }
}

async function benchAppend(infra: Infrastructure, unsigned: EventStore): Promise<void> {
  section(`1. append throughput: store.append signed (Ed25519) vs unsigned, ${APPEND_EVENTS.toLocaleString('en-US')} events each, same stream`);
  const subjectOf = (name: string) => infra.subjects.forAggregate(streams.account(BENCH_WORKSPACE, name));
  const events = (account: string, count: number) => Array.from({ length: count }, () => runQueued(account, uuidv4()));
  await appendChained(infra.store, subjectOf('warm-signed'), events('warm-signed', WARMUP_EVENTS));
  await appendChained(unsigned, subjectOf('warm-unsigned'), events('warm-unsigned', WARMUP_EVENTS));

  // Interleaved halves so drift of the shared machine weighs on both paths alike.
  let signedMs = 0;
  let unsignedMs = 0;
  for (const half of [0, 1]) {
    const u = events(`unsigned-seq-${half}`, APPEND_EVENTS / 2);
    unsignedMs += (await timed(() => appendChained(unsigned, subjectOf(`unsigned-seq-${half}`), u))).ms;
    const s = events(`signed-seq-${half}`, APPEND_EVENTS / 2);
    signedMs += (await timed(() => appendChained(infra.store, subjectOf(`signed-seq-${half}`), s))).ms;
  }
  compareThroughput('append signed (sync)', APPEND_EVENTS, signedMs, 'append unsigned (sync)', APPEND_EVENTS, unsignedMs);

  const per = APPEND_EVENTS / APPEND_WRITERS;
  const concurrent = async (store: EventStore, label: string) => {
    const batches = Array.from({ length: APPEND_WRITERS }, (_, w) => events(`${label}-${w}`, per));
    return (await timed(() => Promise.all(batches.map((batch, w) => appendChained(store, subjectOf(`${label}-${w}`), batch))))).ms;
  };
  const unsignedConc = await concurrent(unsigned, 'unsigned-conc');
  const signedConc = await concurrent(infra.store, 'signed-conc');
  compareThroughput(`append signed (${APPEND_WRITERS} writers)`, per * APPEND_WRITERS, signedConc, `append unsigned (${APPEND_WRITERS} writers)`, per * APPEND_WRITERS, unsignedConc);
}

function benchCpu(infra: Infrastructure): void {
  section(`2. CPU per event, ${CPU_EVENTS.toLocaleString('en-US')} RunQueued envelopes (no I/O)`);
  const signer = infra.signing.signer!;
  const unsealed = Array.from({ length: CPU_EVENTS }, () => runQueued('acc-cpu', uuidv4()));
  const plain = (() => {
    const t0 = performance.now();
    for (const event of unsealed) sealEvent(event, GENESIS_HASH);
    return performance.now() - t0;
  })();
  let sealed: EventEnvelope[] = [];
  const signing = (() => {
    const t0 = performance.now();
    sealed = unsealed.map((event) => sealEvent(event, GENESIS_HASH, signer));
    return performance.now() - t0;
  })();
  compare({ name: 'seal + sign per event', value: (signing * 1000) / CPU_EVENTS, unit: 'µs', baselineName: 'seal (hash only) per event', baselineValue: (plain * 1000) / CPU_EVENTS });
  const verifier = new EventVerifier(infra.signing.keys, { firstSignedSeq: 1, keyId: signer.keyId });
  const texts = sealed.map((event) => JSON.stringify(event));
  const parseOnly = (() => {
    const t0 = performance.now();
    for (const text of texts) JSON.parse(text);
    return performance.now() - t0;
  })();
  const parseVerify = (with_: EventVerifier) => {
    const t0 = performance.now();
    texts.forEach((text, i) => with_.check(JSON.parse(text) as EventEnvelope, 'subject', i + 1));
    return performance.now() - t0;
  };
  const first = parseVerify(verifier);
  const second = parseVerify(verifier);
  compare({ name: 'JSON.parse + verify per event', value: (first * 1000) / CPU_EVENTS, unit: 'µs', baselineName: 'JSON.parse per event', baselineValue: (parseOnly * 1000) / CPU_EVENTS });
  compare({ name: 'JSON.parse + verify, cached', value: (second * 1000) / CPU_EVENTS, unit: 'µs', baselineName: 'JSON.parse per event', baselineValue: (parseOnly * 1000) / CPU_EVENTS });
}

async function benchReads(infra: Infrastructure): Promise<void> {
  const total = READ_ACCOUNTS * EVENTS_PER_ACCOUNT;
  const setup = await timed(() => appendAccountHistories(infra, READ_ACCOUNTS, EVENTS_PER_ACCOUNT, SETUP_WRITERS));
  const first = (await infra.store.lastSequence()) - total + 1;
  const head = await infra.store.lastSequence();
  figure('setup: store.append (signed), 32 writers', (total * 1000) / setup.ms, 'ev/s', `(${(setup.ms / 1000).toFixed(1)} s, not a result)`);

  section(`3. projector-like read over ${total.toLocaleString('en-US')} signed events: read + admission vs read + parse`);
  const verifier = infra.signing.verifier;
  const readOnly = async () => {
    let n = 0;
    for await (const _stored of infra.store.readFiltered(infra.subjects.all, first, head)) n++;
    return n;
  };
  // Every event's signature checked one at a time: what `adsagent audit verify` does.
  const readVerifyEach = async () => {
    let n = 0;
    for await (const stored of infra.store.readFiltered(infra.subjects.all, first, head)) {
      verifier.check(stored.event, stored.subject, stored.seq);
      n++;
    }
    return n;
  };
  // What a projector does with a batch no seal answers for (projections/runtime/projector.ts): a
  // fresh admission (no verdict remembered) over batches of a projector's size, in which only the
  // newest event of each subject has its signature verified and the earlier ones are believed by
  // their chain.
  const readAdmitBatches = async () => {
    const admission = new EventAdmission();
    admission.useAuthenticity(verifier);
    let n = 0;
    let batch: RawEventMessage[] = [];
    const admit = () => {
      for (const result of admission.tryAdmitBatch(batch)) if (!result.ok) throw new Error(`event ${result.corrupt.seq} refused: ${result.corrupt.error}`);
      n += batch.length;
      batch = [];
    };
    for await (const raw of infra.store.readRaw(infra.subjects.all, first, head)) {
      batch.push({ seq: raw.seq, subject: raw.subject, data: raw.data });
      if (batch.length === DEFAULT_BATCH_SIZE) admit();
    }
    admit();
    return n;
  };
  await readOnly(); // warm-up
  const baseline = await timed(readOnly);
  const each = await timed(readVerifyEach);
  const batched = await timed(readAdmitBatches);
  if (baseline.value !== each.value || baseline.value !== batched.value) throw new Error(`reads disagree: ${baseline.value}, ${each.value}, ${batched.value}`);
  compareThroughput('read + verify every signature', each.value, each.ms, 'read + parse', baseline.value, baseline.ms);
  compareThroughput(`read + admission, batches of ${DEFAULT_BATCH_SIZE.toLocaleString('en-US')}`, batched.value, batched.ms, 'read + parse', baseline.value, baseline.ms);
  note('the second line is a projector\'s admission of blocks no seal answers for (the first pass); blocks sealed before are believed from their seals: event store bench, section 2');

  section(`4. audit verify (verifyEventLog, no read models) over ${head.toLocaleString('en-US')} events: with signature checks vs without`);
  const without = await timed(() => verifyEventLog({ store: infra.store, subjects: infra.subjects }));
  const withSignatures = await timed(() =>
    verifyEventLog({ store: infra.store, subjects: infra.subjects, verifier: new EventVerifier(infra.signing.keys, infra.signing.verifier.activation) }),
  );
  for (const result of [without, withSignatures]) {
    if (result.value.discrepancy) throw new Error(`verifyEventLog found ${JSON.stringify(result.value.discrepancy)}`);
  }
  if (withSignatures.value.signedEvents !== head) throw new Error(`checked ${withSignatures.value.signedEvents} signatures, expected ${head}`);
  compareThroughput('audit verify with signatures', withSignatures.value.events, withSignatures.ms, 'audit verify without', without.value.events, without.ms);
}

export async function run(): Promise<void> {
  const config = benchConfig('signing');
  try {
    const infra = await openInfrastructure(config, 'bench-signing');
    try {
      const unsigned = new EventStore(infra.js, infra.jsm, config.eventStream);
      note(`key ${infra.signing.signer!.keyId}; payload: RunQueued envelope`);
      benchCpu(infra);
      await benchAppend(infra, unsigned);
      // Section 3 and 4 need a log whose every event is signed: a stream of its own.
    } finally {
      await infra.close();
    }
  } finally {
    await releaseConfig(config);
  }
  const readConfig = benchConfig('signingread');
  try {
    const infra = await openInfrastructure(readConfig, 'bench-signing-read');
    try {
      await benchReads(infra);
    } finally {
      await infra.close();
    }
  } finally {
    await releaseConfig(readConfig);
  }
}
