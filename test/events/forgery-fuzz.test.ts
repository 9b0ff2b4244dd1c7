import { expect } from 'chai';
import { generateKeyPairSync } from 'node:crypto';
import { sql, type Kysely } from 'kysely';
import { newEvent, type CommandMeta } from '../../commands/shared/new-event.ts';
import { PROJECTIONS } from '../../projections/index.ts';
import { admissionSealsOf, type AdmissionSeals } from '../../projections/runtime/admission-seals.ts';
import { readCheckpoint } from '../../projections/runtime/checkpoints.ts';
import { Projector } from '../../projections/runtime/projector.ts';
import { listQuarantine } from '../../projections/runtime/quarantine.ts';
import { auditVerifier, verifyEventLog } from '../../src/audit/verify-event-log.ts';
import type { Config } from '../../src/config/config.ts';
import { EMPTY_POSITION, type SubjectPosition } from '../../src/event-store/event-store.ts';
import { streams, type SubjectAddress } from '../../src/event-store/subjects.ts';
import type { EventData, EventType } from '../../src/events/catalogue/index.ts';
import { GENESIS_HASH, type EventEnvelope, type UnsealedEvent } from '../../src/events/envelope.ts';
import { computeEventHash, sealEvent } from '../../src/events/event-hash.ts';
import { EventSigner } from '../../src/events/signing/event-signer.ts';
import { SubjectChains } from '../../src/events/subject-chains.ts';
import { createLogger } from '../../src/log/logger.ts';
import { openInfrastructure, type Infrastructure } from '../../src/runtime/infrastructure.ts';
import { actionProposal } from '../support/action-fixtures.ts';
import { runCli } from '../support/cli.ts';
import { eventually } from '../support/eventually.ts';
import { dropIsolated, isolatedConfig } from '../support/isolation.ts';
import { seededRandom } from '../support/seeded-random.ts';

/**
 * Seeded mutation fuzz of the event log's defences. A genuine, signed history is appended with
 * the real store; seeded mutations of its events are published raw (js.publish, past the store)
 * between the appends. Every reader must end where a stream of the genuine events alone ends:
 * the same read models, every mutation parked, the same verdicts on the batch, seal and
 * one-at-a-time paths, and every mutation named by `audit verify` and the chain-judging readers.
 *
 * FUZZ_SEED=<n> runs another seed; FUZZ_STEPS=<n> a longer history.
 */
const SEED = Number(process.env.FUZZ_SEED ?? 0x5eed_2026);
const STEPS = Number(process.env.FUZZ_STEPS ?? 260);
const BLOCK = 10;
const logger = createLogger((process.env.FUZZ_LOG as 'silent' | undefined) ?? 'silent');

interface Genuine {
  readonly seq: number;
  readonly subject: string;
  readonly text: string;
  readonly event: EventEnvelope;
}

interface Mutant {
  readonly seq: number;
  readonly subject: string;
  readonly kind: string;
  /** What was done, for the report. */
  readonly how: string;
  readonly bytes: Buffer;
}

interface ProjectorRun {
  readonly label: string;
  readonly infra: Infrastructure;
  readonly projector: Projector;
}

describe(`forgery fuzz: seeded mutations of genuine events are parked everywhere and change no read model (seed ${SEED})`, function () {
  this.timeout(180_000);
  const rng = seededRandom(SEED);
  const rand = (n: number) => Math.floor(rng() * n);
  const pick = <T>(items: readonly T[]): T => items[rand(items.length)]!;
  const hex = (n: number) => Array.from({ length: n }, () => '0123456789abcdef'[rand(16)]).join('');
  const uuid = () => {
    const h = hex(32);
    return `${h.slice(0, 8)}-${h.slice(8, 12)}-4${h.slice(13, 16)}-8${h.slice(17, 20)}-${h.slice(20, 32)}`;
  };

  const fuzzConfig = isolatedConfig('fuzz');
  const cleanConfig = isolatedConfig('fuzzclean');
  /** Other schemas on the fuzzed stream: one per projector, so each keeps its own tables and checkpoints. */
  const onFuzzStream = (label: string): Config => {
    const own = isolatedConfig(label);
    return { ...own, eventStream: fuzzConfig.eventStream, subjectPrefix: fuzzConfig.subjectPrefix };
  };
  const tinyConfig = onFuzzStream('fuzztiny');
  const sealReadConfig = onFuzzStream('fuzzsealread');
  const bigBatchConfig = onFuzzStream('fuzzbig');

  let fuzz: Infrastructure;
  let clean: Infrastructure;
  let tiny: Infrastructure;
  let sealRead: Infrastructure;
  let bigBatch: Infrastructure;
  const genuine: Genuine[] = [];
  const mutants: Mutant[] = [];
  const cleanSeqToFuzz = new Map<number, number>();
  let head = 0;
  let writerSeals: AdmissionSeals;
  let readerSeals: AdmissionSeals;
  const runs: ProjectorRun[] = [];

  const newProjector = (infra: Infrastructure, options: { batchSize: number; seals?: AdmissionSeals; lingerMs?: number }) =>
    new Projector({
      db: infra.database.db,
      js: infra.js,
      jsm: infra.jsm,
      stream: infra.config.eventStream,
      filterSubject: infra.subjects.all,
      projections: PROJECTIONS,
      admission: infra.store.admission,
      logger,
      ...options,
    });

  const caughtUp = async (infra: Infrastructure, upto: number) => {
    await eventually(async () => {
      for (const projection of PROJECTIONS) expect((await readCheckpoint(infra.database.db, projection.name))?.lastSeq, `${infra.config.databaseSchema} ${projection.name}`).to.equal(upto);
    }, 60_000);
  };

  before(async function () {
    console.log(`      forgery fuzz seed: ${SEED} (FUZZ_SEED=${SEED} to run it again), steps: ${STEPS}`);
    fuzz = await openInfrastructure(fuzzConfig, 'test-fuzz');
    clean = await openInfrastructure(cleanConfig, 'test-fuzz-clean');
    tiny = await openInfrastructure(tinyConfig, 'test-fuzz-tiny');
    sealRead = await openInfrastructure(sealReadConfig, 'test-fuzz-sealread');
    bigBatch = await openInfrastructure(bigBatchConfig, 'test-fuzz-big');

    // Live while the history is written: batches of whatever arrived (seals written), and batches of one.
    writerSeals = admissionSealsOf(fuzz, logger, { blockSize: BLOCK });
    // Projectors of one stream share their durable consumer's name: one runs at a time on the fuzzed stream.
    const live: ProjectorRun = { label: 'batch+seals (live)', infra: fuzz, projector: newProjector(fuzz, { batchSize: 50, seals: writerSeals }) };
    await live.projector.start();
    runs.push(live);

    const attacker = new EventSigner(generateKeyPairSync('ed25519').privateKey);
    const positions = new Map<string, SubjectPosition>();
    const positionOf = (subject: string) => positions.get(subject) ?? EMPTY_POSITION;
    const subjectOf = (address: SubjectAddress) => fuzz.subjects.forAggregate(address);
    let clock = Date.UTC(2026, 0, 1);
    const meta = (correlationId: string): CommandMeta => ({ actor: { kind: 'api_key', id: 'k-fuzz' }, correlationId, now: new Date((clock += 1000)) });

    const appendGenuine = async <T extends EventType>(address: SubjectAddress, type: T, data: EventData<T>, correlationId: string) => {
      const subject = subjectOf(address);
      const unsealed = { ...newEvent(type, data, address, meta(correlationId)), id: uuid() } as UnsealedEvent;
      const [stored] = await fuzz.store.append(subject, [unsealed], positionOf(subject));
      const raw = (await fuzz.store.rawAt(stored!.seq))!;
      positions.set(subject, { lastSequence: stored!.seq, lastHash: stored!.event.hash });
      genuine.push({ seq: stored!.seq, subject, text: raw.text, event: JSON.parse(raw.text) as EventEnvelope });
    };
    const publishRaw = async (subject: string, bytes: Buffer, kind: string, how: string) => {
      const { seq } = await fuzz.js.publish(subject, bytes);
      // The subject's last sequence moves (the next append expects it); its believed head does not.
      positions.set(subject, { lastSequence: seq, lastHash: positionOf(subject).lastHash });
      mutants.push({ seq, subject, kind, how, bytes });
    };

    // ----- the genuine history's model -----
    const workspaces = ['wsa', 'wsb'];
    const accounts: { ws: string; id: string }[] = [];
    const keys: { ws: string; id: string; revoked: boolean }[] = [];
    const runsModel: { ws: string; acct: string; id: string; state: 'queued' | 'running' | 'done'; tools: number }[] = [];
    const actions: { ws: string; acct: string; id: string; decided: boolean }[] = [];
    let n = 0;
    /** A subject about to get its first genuine event: sometimes something is published on it first. */
    const maybePreFirst = async (subject: string, address: SubjectAddress) => {
      if (genuine.length === 0 || rng() >= 0.35) return;
      const g = pick(genuine);
      const variant = rand(3);
      if (variant === 0) {
        await publishRaw(subject, Buffer.from(g.text.slice(0, 1 + rand(g.text.length - 1))), 'pre-first', 'truncated genuine event on a subject before its first event');
      } else if (variant === 1) {
        await publishRaw(subject, Buffer.from(g.text), 'pre-first', `genuine seq ${g.seq} replayed onto a subject before its first event`);
      } else {
        const { prev_hash: _p, hash: _h, key_id: _k, signature: _s, ...body } = g.event;
        const forged = sealEvent({ ...body, id: uuid(), workspace_id: address.workspaceId, account_id: address.accountId, aggregate: address.aggregate } as UnsealedEvent, GENESIS_HASH, attacker);
        await publishRaw(subject, Buffer.from(JSON.stringify(forged)), 'pre-first', 'first event of the subject signed by an unknown key');
      }
    };
    const firstOn = async (address: SubjectAddress) => {
      if (!positions.has(subjectOf(address))) await maybePreFirst(subjectOf(address), address);
    };

    const genuineStep = async () => {
      const running = runsModel.filter((r) => r.state === 'running');
      const queued = runsModel.filter((r) => r.state === 'queued');
      const idle = accounts.filter((a) => !runsModel.some((r) => r.acct === a.id && r.state !== 'done'));
      const open = actions.filter((a) => !a.decided);
      const live = keys.filter((k) => !k.revoked);
      const ops: string[] = ['account', 'key'];
      if (live.length > 0) ops.push('revoke');
      if (idle.length > 0) ops.push('queue', 'queue', 'queue');
      if (queued.length > 0) ops.push('start', 'start', 'start', 'cancel');
      if (running.length > 0) ops.push('tool', 'tool', 'tool', 'tool', 'propose', 'propose', 'finish', 'finish');
      if (open.length > 0) ops.push('decide', 'decide');
      const op = pick(ops);
      n++;
      switch (op) {
        case 'account': {
          const ws = pick(workspaces);
          const id = `acct-${n}`;
          await firstOn(streams.account(ws, id));
          await appendGenuine(streams.account(ws, id), 'AccountCreated', { name: `Account ${n}`, platform: 'sandbox', sandbox_seed: n }, `req-${n}`);
          accounts.push({ ws, id });
          return;
        }
        case 'key': {
          const ws = pick(workspaces);
          const id = `key${hex(12)}`;
          await firstOn(streams.key(ws, id));
          await appendGenuine(streams.key(ws, id), 'ApiKeyIssued', { name: `key ${n}`, scope: pick(['read', 'write', 'admin'] as const), secret_hash: hex(64) }, `req-${n}`);
          keys.push({ ws, id, revoked: false });
          return;
        }
        case 'revoke': {
          const key = pick(live);
          await appendGenuine(streams.key(key.ws, key.id), 'ApiKeyRevoked', {}, `req-${n}`);
          key.revoked = true;
          return;
        }
        case 'queue': {
          const account = pick(idle);
          const id = `run-${n}`;
          await appendGenuine(streams.account(account.ws, account.id), 'RunQueued', { run_id: id, brief: `brief ${n} ${'é'.repeat(rand(3))}`, auto_apply: rng() < 0.5, key_id: 'k-fuzz', scope: 'write' }, id);
          runsModel.push({ ws: account.ws, acct: account.id, id, state: 'queued', tools: 0 });
          return;
        }
        case 'start': {
          const run = pick(queued);
          await appendGenuine(streams.account(run.ws, run.acct), 'RunStarted', { run_id: run.id, worker_id: 'w-1', agent: { kind: 'rules', model: 'rules-1' } }, run.id);
          run.state = 'running';
          return;
        }
        case 'cancel': {
          const run = pick(queued);
          await appendGenuine(streams.account(run.ws, run.acct), 'RunCanceled', { run_id: run.id }, run.id);
          run.state = 'done';
          return;
        }
        case 'tool': {
          const run = pick(running);
          await firstOn(streams.run(run.ws, run.acct, run.id));
          const blob = 'x'.repeat(rng() < 0.08 ? 120_000 : 40 + rand(200));
          await appendGenuine(
            streams.run(run.ws, run.acct, run.id),
            'ToolCalled',
            { run_id: run.id, index: ++run.tools, name: 'get_search_terms', input: { campaign_id: `c${rand(5)}` }, ok: true, output: { blob, nested: { deep: [1, { x: 'y' }] } }, duration_ms: rand(50) },
            run.id,
          );
          return;
        }
        case 'propose': {
          const run = pick(running);
          const id = `act-${n}`;
          await firstOn(streams.action(run.ws, run.acct, id));
          await appendGenuine(streams.action(run.ws, run.acct, id), 'ActionProposed', actionProposal({ action_id: id, run_id: run.id, summary: `change ${n}` }), run.id);
          actions.push({ ws: run.ws, acct: run.acct, id, decided: false });
          return;
        }
        case 'finish': {
          const run = pick(running);
          const usage = { input_tokens: rand(1000), output_tokens: rand(1000), steps: rand(10) };
          if (rng() < 0.7) {
            await appendGenuine(streams.account(run.ws, run.acct), 'RunSucceeded', { run_id: run.id, text: `done ${n}`, truncated: false, usage, duration_ms: rand(5000) }, run.id);
          } else {
            await appendGenuine(streams.account(run.ws, run.acct), 'RunFailed', { run_id: run.id, error: { code: 'agent_error', message: 'boom' }, text: '', truncated: false, usage, duration_ms: rand(5000) }, run.id);
          }
          run.state = 'done';
          return;
        }
        case 'decide': {
          const action = pick(open);
          const address = streams.action(action.ws, action.acct, action.id);
          if (rng() < 0.6) await appendGenuine(address, 'ActionApproved', { note: `ok ${n}` }, action.id);
          else await appendGenuine(address, 'ActionRejected', { reason: `no ${n}` }, action.id);
          action.decided = true;
          return;
        }
      }
    };

    // ----- mutations of genuine events -----
    /** The text of a top-level member as the store writes it (canonical JSON). */
    const memberOf = (g: Genuine, key: string) => `"${key}":${JSON.stringify((g.event as unknown as Record<string, unknown>)[key])}`;
    const withMember = (g: Genuine, key: string, value: unknown): string => JSON.stringify({ ...g.event, [key]: value });
    const currentHead = (subject: string) => positionOf(subject).lastHash;
    const subjectsByGenuine = () => [...new Set(genuine.map((g) => g.subject))];
    const deep = (depth: number) => (rng() < 0.5 ? `${'{"a":'.repeat(depth)}1${'}'.repeat(depth)}` : `${'['.repeat(depth)}1${']'.repeat(depth)}`);

    let flips = 0;
    const mutate = async () => {
      const g = pick(genuine);
      const keysOf = Object.keys(g.event);
      const kind = pick([
        'flip', 'flip', 'flip', 'flip', 'swap', 'swap', 'cross-replay', 'self-replay', 'self-replay', 'prev-hash', 'prev-hash',
        'unknown-key', 'unsigned', 'duplicate-key', 'duplicate-key', 'whitespace', 'truncated', 'huge', 'deep', 'pair-replay', 'signature-flip',
      ]);
      switch (kind) {
        case 'flip': {
          // Every field in turn.
          const key = keysOf[flips++ % keysOf.length]!;
          const member = memberOf(g, key);
          const bytes = Buffer.from(g.text);
          const at = Buffer.from(g.text.slice(0, Math.max(0, g.text.indexOf(member)))).length;
          const offset = at + rand(Buffer.byteLength(member));
          const bit = 1 << rand(8);
          bytes[offset] = bytes[offset]! ^ bit;
          return publishRaw(g.subject, bytes, kind, `seq ${g.seq}: byte ${offset} (in ${key}) xor 0x${bit.toString(16)}`);
        }
        case 'signature-flip': {
          // One bit of one signature character, the result still base64url: a well-formed signature that does not verify.
          // Of a subject's newest event, so that the subject's next genuine event names its hash.
          const heads = genuine.filter((o) => positionOf(o.subject).lastHash === o.event.hash);
          const g = pick(heads);
          const member = memberOf(g, 'signature');
          const start = g.text.indexOf(member) + '"signature":"'.length;
          const bytes = Buffer.from(g.text);
          // Two draws whatever the signature holds, so the rest of the run does not depend on the (per-process) key.
          const first = rand(85);
          const firstBit = rand(6);
          for (let tries = 0; ; tries++) {
            const offset = start + ((first + Math.floor(tries / 6)) % 85);
            const bit = 1 << ((firstBit + tries) % 6);
            const flipped = String.fromCharCode(bytes[offset]! ^ bit);
            if (!/^[A-Za-z0-9_-]$/.test(flipped)) continue;
            bytes[offset] = flipped.charCodeAt(0);
            return publishRaw(g.subject, bytes, kind, `seq ${g.seq}: signature byte ${offset} xor 0x${bit.toString(16)} ('${g.text[offset]}' -> '${flipped}')`);
          }
        }
        case 'swap': {
          const other = pick(genuine.filter((o) => o !== g));
          const key = pick(keysOf.filter((k) => k in other.event));
          return publishRaw(g.subject, Buffer.from(withMember(g, key, (other.event as unknown as Record<string, unknown>)[key])), kind, `seq ${g.seq} with ${key} of seq ${other.seq}`);
        }
        case 'cross-replay': {
          const others = subjectsByGenuine().filter((s) => s !== g.subject);
          const target = rng() < 0.3 || others.length === 0 ? fuzz.subjects.forAggregate(streams.workspace(`wsx${rand(3)}`)) : pick(others);
          return publishRaw(target, Buffer.from(g.text), kind, `seq ${g.seq} (${g.subject}) onto ${target}`);
        }
        case 'self-replay':
          return publishRaw(g.subject, Buffer.from(g.text), kind, `seq ${g.seq} again`);
        case 'prev-hash': {
          const to = pick([currentHead(g.subject), GENESIS_HASH, pick(genuine).event.hash, hex(64)]);
          const moved = { ...g.event, prev_hash: to };
          const rehash = rng() < 0.5;
          if (rehash) moved.hash = computeEventHash(moved, to);
          return publishRaw(g.subject, Buffer.from(JSON.stringify(moved)), kind, `seq ${g.seq} with prev_hash ${to.slice(0, 12)}…${rehash ? ' and its hash recomputed' : ''}`);
        }
        case 'unknown-key':
        case 'unsigned': {
          const { prev_hash: _p, hash: _h, key_id: _k, signature: _s, ...body } = g.event;
          const sealed = sealEvent({ ...body, id: uuid() } as UnsealedEvent, currentHead(g.subject), kind === 'unknown-key' ? attacker : undefined);
          const variant = kind === 'unsigned' ? rand(3) : 0;
          let forged: Record<string, unknown> = sealed as unknown as Record<string, unknown>;
          let how = kind === 'unknown-key' ? `copy of seq ${g.seq}, chained to the subject's head, signed by unknown key ${attacker.keyId}` : `copy of seq ${g.seq}, chained to the subject's head, unsigned`;
          if (variant === 1) {
            const { signature: _sig, ...keyedOnly } = g.event as unknown as Record<string, unknown>;
            forged = keyedOnly;
            how = `seq ${g.seq} with its signature removed (key_id kept)`;
          } else if (variant === 2) {
            const { signature: _sig, key_id: _key, ...bare } = g.event as unknown as Record<string, unknown>;
            forged = bare;
            how = `seq ${g.seq} with signature and key_id removed`;
          }
          return publishRaw(g.subject, Buffer.from(JSON.stringify(forged)), kind, how);
        }
        case 'duplicate-key': {
          const key = pick(keysOf);
          const member = memberOf(g, key);
          const other = pick(genuine);
          const otherValue = (other.event as unknown as Record<string, unknown>)[key] ?? 'x';
          const alt = `"${key}":${JSON.stringify(key === 'prev_hash' && rng() < 0.5 ? currentHead(g.subject) : otherValue)}`;
          const genuineLast = rng() < 0.5;
          const text = g.text.replace(member, genuineLast ? `${alt},${member}` : `${member},${alt}`);
          return publishRaw(g.subject, Buffer.from(text), kind, `seq ${g.seq} with ${key} twice (${genuineLast ? 'genuine value last' : `value of seq ${other.seq} last`})`);
        }
        case 'whitespace': {
          const moved = rng() < 0.4;
          const event = moved ? { ...g.event, prev_hash: currentHead(g.subject) } : g.event;
          const text = rng() < 0.5 ? JSON.stringify(event, null, 1 + rand(3)) : JSON.stringify(event).replace(/,"/g, ', "').replace(/":/g, '" :\t');
          return publishRaw(g.subject, Buffer.from(`${rng() < 0.5 ? ' \n' : ''}${text}${rng() < 0.5 ? '\r\n' : ''}`), kind, `seq ${g.seq} re-spaced${moved ? ', prev_hash set to the subject head' : ''}`);
        }
        case 'truncated': {
          const cut = 1 + rand(g.text.length - 1);
          return publishRaw(g.subject, Buffer.from(g.text.slice(0, cut)), kind, `seq ${g.seq} cut to ${cut} characters`);
        }
        case 'huge': {
          const padded = { ...g.event, data: { ...(g.event.data as Record<string, unknown>), pad: 'p'.repeat(400_000) } };
          if (rng() < 0.5) return publishRaw(g.subject, Buffer.from(JSON.stringify(padded)), kind, `seq ${g.seq} with 400 kB added to data (old signature)`);
          const { prev_hash: _p, hash: _h, key_id: _k, signature: _s, ...body } = g.event;
          const forged = sealEvent({ ...body, id: uuid(), data: g.event.type === 'ToolCalled' ? { ...(g.event.data as Record<string, unknown>), output: { blob: 'p'.repeat(400_000) } } : g.event.data } as UnsealedEvent, currentHead(g.subject), attacker);
          return publishRaw(g.subject, Buffer.from(JSON.stringify(forged)), kind, `400 kB copy of seq ${g.seq}, chained, unknown key`);
        }
        case 'deep': {
          const depth = pick([70, 1_000, 20_000]);
          const text = JSON.stringify({ ...g.event, data: { ...(g.event.data as Record<string, unknown>), output: '__DEEP__' } }).replace('"__DEEP__"', deep(depth));
          return publishRaw(g.subject, Buffer.from(text), kind, `seq ${g.seq} with data.output nested ${depth} deep`);
        }
        case 'pair-replay': {
          const bySubject = genuine.filter((o) => o.subject === g.subject);
          if (bySubject.length < 2) return publishRaw(g.subject, Buffer.from(g.text), 'self-replay', `seq ${g.seq} again`);
          const i = rand(bySubject.length - 1);
          await publishRaw(g.subject, Buffer.from(bySubject[i]!.text), kind, `first of a replayed pair: seq ${bySubject[i]!.seq}`);
          return publishRaw(g.subject, Buffer.from(bySubject[i + 1]!.text), kind, `second of a replayed pair: seq ${bySubject[i + 1]!.seq}`);
        }
      }
    };

    for (const ws of workspaces) await appendGenuine(streams.workspace(ws), 'WorkspaceCreated', { name: ws }, 'setup');
    for (const ws of workspaces) {
      const id = `acct-${ws}`;
      await appendGenuine(streams.account(ws, id), 'AccountCreated', { name: id, platform: 'sandbox', sandbox_seed: 1 }, 'setup');
      accounts.push({ ws, id });
    }
    for (let step = 0; step < STEPS; step++) {
      if (rng() < 0.58) await genuineStep();
      else await mutate();
    }
    head = await fuzz.store.lastSequence();
    expect(head).to.equal(genuine.length + mutants.length);

    // The same genuine bytes, alone, on a stream of their own.
    for (const g of genuine) {
      const subject = `${clean.subjects.prefix}${g.subject.slice(fuzz.subjects.prefix.length)}`;
      const { seq } = await clean.js.publish(subject, Buffer.from(g.text));
      cleanSeqToFuzz.set(seq, g.seq);
    }
    const cleanProjector = newProjector(clean, { batchSize: 2000 });
    await cleanProjector.start();
    runs.push({ label: 'clean stream', infra: clean, projector: cleanProjector });

    await caughtUp(fuzz, head);
    await live.projector.stop();
    await writerSeals.flush();
    // Catching up afterwards, one after the other: one event per batch (each admitted alone), from the
    // seals the live projector wrote, and in one batch of everything.
    readerSeals = admissionSealsOf(sealRead, logger, { blockSize: BLOCK, db: fuzz.database.db });
    const catching: ProjectorRun[] = [
      { label: 'one at a time', infra: tiny, projector: newProjector(tiny, { batchSize: 1, lingerMs: 0 }) },
      { label: 'seals read back', infra: sealRead, projector: newProjector(sealRead, { batchSize: 500, seals: readerSeals, lingerMs: 300 }) },
      { label: 'one batch of 2000', infra: bigBatch, projector: newProjector(bigBatch, { batchSize: 2000, lingerMs: 500 }) },
    ];
    for (const run of catching) {
      await run.projector.start();
      runs.push(run);
      await caughtUp(run.infra, head);
      await run.projector.stop();
    }
    await caughtUp(clean, genuine.length);
    console.log(`      ${genuine.length} genuine events, ${mutants.length} mutations (${Object.entries(countBy(mutants.map((m) => m.kind))).map(([k, v]) => `${k} ${v}`).join(', ')}); seals written ${writerSeals.counts.written}, verdicts from seals ${readerSeals.counts.eventsFromSeals}`);
  });

  after(async () => {
    for (const run of runs) await run.projector.stop().catch(() => undefined);
    for (const infra of [fuzz, clean, tiny, sealRead, bigBatch]) await infra?.close().catch(() => undefined);
    for (const config of [tinyConfig, sealReadConfig, bigBatchConfig]) await dropSchema(config).catch(() => undefined);
    await dropIsolated(fuzzConfig).catch(() => undefined);
    await dropIsolated(cleanConfig).catch(() => undefined);
  });

  const mutantSeqs = () => new Set(mutants.map((m) => m.seq));
  const describeMutant = (seq: number) => {
    const m = mutants.find((x) => x.seq === seq);
    return m ? `seq ${seq} [${m.kind}] ${m.how}` : `seq ${seq} (genuine)`;
  };

  it('gives every projection the read model of the genuine events alone, on every path', async () => {
    const cleanRun = runs.find((r) => r.label === 'clean stream')!;
    for (const projection of PROJECTIONS) {
      for (const table of projection.tables) {
        const expected = (await dumpTable(cleanRun.infra, table)).map((row) => remapSeqs(row, cleanSeqToFuzz)).sort();
        for (const run of runs.filter((r) => r !== cleanRun)) {
          const rows = (await dumpTable(run.infra, table)).map((row) => JSON.stringify(JSON.parse(row))).sort();
          expect(rows, `${run.label}: ${projection.name}.${table}`).to.deep.equal(expected);
        }
      }
    }
    expect(await listQuarantine(cleanRun.infra.database.db), 'nothing is parked on the clean stream').to.deep.equal([]);
  });

  it('parks every mutation, and only those, in every projection on every path', async () => {
    const expected = [...mutantSeqs()].sort((a, b) => a - b);
    const problems: string[] = [];
    for (const run of runs.filter((r) => r.label !== 'clean stream')) {
      const parked = await listQuarantine(run.infra.database.db);
      for (const projection of PROJECTIONS) {
        const seqs = parked.filter((p) => p.projection === projection.name).map((p) => Number(p.seq));
        for (const seq of expected) if (!seqs.includes(seq)) problems.push(`${run.label} / ${projection.name}: not parked: ${describeMutant(seq)}`);
        for (const seq of seqs) if (!expected.includes(seq)) problems.push(`${run.label} / ${projection.name}: parked a genuine event: seq ${seq}`);
      }
    }
    expect(problems, problems.join('\n')).to.deep.equal([]);
  });

  it('reaches the same verdict on the batch, seal and one-at-a-time paths', async () => {
    const verdicts = new Map<string, Map<number, string>>();
    for (const run of runs.filter((r) => r.label !== 'clean stream')) {
      const byProjection = new Map<number, string>();
      for (const entry of await listQuarantine(run.infra.database.db)) {
        if (entry.projection !== 'runs') continue;
        byProjection.set(Number(entry.seq), entry.code);
      }
      verdicts.set(run.label, byProjection);
    }
    const reference = verdicts.get('one at a time')!;
    const problems: string[] = [];
    for (const [label, codes] of verdicts) {
      for (const seq of mutantSeqs()) {
        const [alone, here] = [reference.get(seq), codes.get(seq)];
        // The one documented difference (src/events/event-admission.ts, tryAdmitBatch): a copy of a
        // genuine event with its signature altered, whose content a later event's signature proves,
        // is judged by its place in the chain in a batch (chain-broken), by its signature alone (untrusted).
        const documented = alone === 'untrusted' && here === 'chain-broken';
        if (here !== alone && !documented) problems.push(`${describeMutant(seq)}: one at a time ${alone}, ${label} ${here}`);
      }
    }
    expect(problems, problems.join('\n')).to.deep.equal([]);
  });

  it('is named by `adsagent audit verify`: the whole log at its first mutation, and the first three mutations of each kind from their own sequence on', async () => {
    const sorted = [...mutantSeqs()].sort((a, b) => a - b);
    const audit = await runCli(fuzz.config, ['audit', 'verify', '--json']);
    expect(audit.code, audit.stderr).to.equal(1);
    expect(JSON.parse(audit.stdout).discrepancy.seq, describeMutant(sorted[0]!)).to.equal(sorted[0]);

    // From a later sequence the report must name the first mutation at or after it, never a genuine event.
    // Each read goes to the head: from the first three mutations of each kind (every kind of
    // chain start an auditor can land on) and a seeded tenth of the genuine events, not from all.
    const startsOfKind = new Map<string, number[]>();
    for (const mutant of [...mutants].sort((a, b) => a.seq - b.seq)) {
      const ofKind = startsOfKind.get(mutant.kind) ?? [];
      if (ofKind.length < 3) startsOfKind.set(mutant.kind, [...ofKind, mutant.seq]);
    }
    const starts = [...[...startsOfKind.values()].flat(), ...genuine.filter(() => rng() < 0.1).map((g) => g.seq)];
    const problems: string[] = [];
    for (const from of starts) {
      const report = await verifyEventLog({ store: fuzz.store, subjects: fuzz.subjects, fromSeq: from, verifier: auditVerifier(fuzz.signing) });
      const want = sorted.find((seq) => seq >= from) ?? null;
      const got = report.discrepancy?.seq ?? null;
      if (got !== want) {
        problems.push(`audit verify --from-seq ${from}: reported ${got === null ? 'nothing' : `${describeMutant(got)} (${report.discrepancy!.kind}: ${report.discrepancy!.detail})`}, first mutation is ${want === null ? 'none' : describeMutant(want)}`);
      }
    }
    expect(problems, problems.join('\n')).to.deep.equal([]);
  });

  it('is marked corrupt by `adsagent events tail` from the start, every genuine event shown as itself', async () => {
    const tail = await runCli(fuzz.config, ['events', 'tail']);
    expect(tail.code, tail.stderr).to.equal(0);
    const lines = tail.stdout.trim().split('\n').map((line) => JSON.parse(line) as { seq: number; corrupt?: boolean; id?: string });
    const problems: string[] = [];
    for (const line of lines) {
      const isMutant = mutantSeqs().has(line.seq);
      if (isMutant && !line.corrupt) problems.push(`shown as an event: ${describeMutant(line.seq)}`);
      if (!isMutant && line.corrupt) problems.push(`genuine seq ${line.seq} shown as corrupt: ${JSON.stringify(line).slice(0, 300)}`);
    }
    expect(lines.map((line) => line.seq)).to.deep.equal(Array.from({ length: head }, (_, i) => i + 1));
    expect(problems, problems.join('\n')).to.deep.equal([]);
  });

  it('is told apart by the subject chains the run event stream follows (chainStartOf), every genuine event believed', async () => {
    // As src/http/routes/run-events-routes.ts and `events tail --from-seq` judge: subjects that start in the read are checked with chainStartOf.
    const chains = new SubjectChains({ chainStartOf: (subject) => fuzz.store.firstGenesisSeqOf(subject) });
    const problems: string[] = [];
    for await (const raw of fuzz.store.readRaw(fuzz.subjects.all, 1, head)) {
      const { result, unknownStart } = await chains.judge(fuzz.store.admission.tryAdmit({ seq: raw.seq, subject: raw.subject, data: raw.data }));
      const isMutant = mutantSeqs().has(raw.seq);
      // The run event stream shows an event only when it is ok and its subject's start was seen.
      if (isMutant && result.ok && !unknownStart) problems.push(`believed: ${describeMutant(raw.seq)}`);
      if (!isMutant && (!result.ok || unknownStart)) {
        const first = mutants.find((m) => m.subject === raw.subject);
        const verdict = result.ok ? 'unknownStart (not shown)' : `${result.corrupt.code}: ${result.corrupt.detail}`;
        problems.push(`genuine seq ${raw.seq} (${raw.subject}) judged ${verdict}${first && first.seq < raw.seq ? `; the subject's first message is ${describeMutant(first.seq)}` : ''}`);
      }
    }
    expect(problems, problems.join('\n')).to.deep.equal([]);
  });
});

function countBy(items: readonly string[]): Record<string, number> {
  const counts: Record<string, number> = {};
  for (const item of items) counts[item] = (counts[item] ?? 0) + 1;
  return counts;
}

async function dumpTable(infra: Infrastructure, table: string): Promise<string[]> {
  const result = await sql<{ row: string }>`select row_to_json(t)::jsonb::text as row from ${sql.id(infra.config.databaseSchema, table)} t`.execute(infra.database.db as Kysely<any>);
  return result.rows.map((r) => r.row);
}

/** A clean-stream row with its stream sequences (`*seq` columns) given as the fuzzed stream's. */
function remapSeqs(row: string, map: ReadonlyMap<number, number>): string {
  const value = JSON.parse(row) as Record<string, unknown>;
  for (const [key, v] of Object.entries(value)) {
    if (!/seq$/.test(key) || v === null) continue;
    const seq = Number(v);
    const mapped = map.get(seq);
    if (mapped === undefined) throw new Error(`clean row ${row.slice(0, 200)}: ${key} ${seq} is not a genuine event's sequence`);
    value[key] = typeof v === 'string' ? String(mapped) : mapped;
  }
  return JSON.stringify(value);
}

async function dropSchema(config: Config): Promise<void> {
  const pg = await import('pg');
  const client = new pg.default.Client({ connectionString: config.databaseUrl });
  await client.connect();
  try {
    await client.query(`DROP SCHEMA IF EXISTS "${config.databaseSchema}" CASCADE`);
  } finally {
    await client.end();
  }
}
