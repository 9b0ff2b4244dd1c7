import { sql, type Kysely } from 'kysely';
import type { Database } from '../../src/db/schema.ts';
import { InadmissibleCode, type AdmissionResult, type EventAdmission, type RawEventMessage } from '../../src/events/event-admission.ts';
import {
  BlockDigest,
  blockOf,
  MAX_SEALED_DETAIL,
  MAX_SEALED_REFUSALS,
  SEAL_BLOCK,
  sealSignedBytes,
  type AdmissionSeal,
  type SealedRefusal,
} from '../../src/events/sealing/admission-seal.ts';
import type { Logger } from '../../src/log/logger.ts';

/** Signs seals: the process's event signer. */
export interface SealSigner {
  readonly keyId: string;
  signRecord(bytes: Buffer): string;
}

/** Verifies seals with the keys the process believes: its event verifier. */
export interface SealVerifier {
  verifyRecord(keyId: string, bytes: Buffer, signature: string): boolean;
}

export interface AdmissionSealsOptions {
  readonly db: Kysely<Database>;
  /** The stream whose sequences the seals name. */
  readonly stream: string;
  readonly admission: EventAdmission;
  readonly verifier: SealVerifier;
  /** Absent in a process that may read seals but not write them. */
  readonly signer?: SealSigner;
  readonly logger: Logger;
  /** Sequences per block; only tests change it, and every process of a stream must agree. */
  readonly blockSize?: number;
}

/** What a process has that its seals need (an opened Infrastructure has all of it). */
export interface SealingProcess {
  readonly config: { readonly eventStream: string };
  readonly database: { readonly db: Kysely<Database> };
  readonly store: { readonly admission: EventAdmission };
  readonly signing: { readonly verifier: SealVerifier; readonly signer?: SealSigner };
}

/**
 * The seals of a process's stream, read with its admission and keys and written with its
 * signer: what the service's projectors, `adsagent projections rebuild` and the benchmarks use.
 *
 * @example
 * const seals = admissionSealsOf(infrastructure, logger);
 * new Projector({ ...options, admission: infrastructure.store.admission, seals });
 */
export function admissionSealsOf(process: SealingProcess, logger: Logger, overrides: Partial<AdmissionSealsOptions> = {}): AdmissionSeals {
  return new AdmissionSeals({
    db: process.database.db,
    stream: process.config.eventStream,
    admission: process.store.admission,
    verifier: process.signing.verifier,
    signer: process.signing.signer,
    logger,
    ...overrides,
  });
}

/** What the seals did in this process, for /metrics. */
export interface SealCounts {
  /** Seals signed and stored. */
  written: number;
  /** Events whose verdict came from a verified seal instead of a full admission. */
  eventsFromSeals: number;
  /** Seals found but not believed: a signature that does not verify, or messages that are not the ones sealed. */
  rejected: number;
}

/** Per position of a batch: the recorded verdict (null: believed), or undefined where the batch must be admitted in full. */
export interface RecordedVerdicts {
  readonly verdicts: readonly (SealedRefusal | null | undefined)[];
  /** First sequences of the blocks whose verdicts came from seals: they need no new seal. */
  readonly sealedBlocks: ReadonlySet<number>;
}

interface CompleteBlock {
  readonly firstSeq: number;
  /** Positions in the batch of its first and last message. */
  readonly start: number;
  readonly end: number;
}

/** The codes admission itself gives: the chain and Postgres refusals are decided by each projection. */
const ADMISSION_CODES: ReadonlySet<string> = new Set(
  Object.values(InadmissibleCode).filter((code) => code !== InadmissibleCode.ChainBroken && code !== InadmissibleCode.Refused),
);

/**
 * Admission seals, kept in Postgres: a projector that admitted a whole block of the stream
 * (SEAL_BLOCK sequences) signs the verdicts with the service's key and stores them; a
 * projector reading that block again (a rebuild, a new projection, a projection version
 * bump, a second process catching up from zero) takes the verdicts from the seal when its
 * signature verifies, its rules are this process's and the digest of the messages it read
 * is the sealed one, instead of checking schema, hashes and signatures of every event again.
 * A seal is trusted as far as the key that signed it, like the events themselves: a row
 * written by anyone without the key is ignored and the block is admitted in full. The hash
 * chains are still followed by every projection (chain-heads.ts); seals only replace the
 * per-event checks.
 */
export class AdmissionSeals {
  readonly blockSize: number;
  readonly counts: SealCounts = { written: 0, eventsFromSeals: 0, rejected: 0 };
  private readonly options: AdmissionSealsOptions;
  private writes: Promise<void> = Promise.resolve();

  constructor(options: AdmissionSealsOptions) {
    this.options = options;
    this.blockSize = options.blockSize ?? SEAL_BLOCK;
  }

  /**
   * How many of the first `count` buffered messages to take so the batch ends at a block's
   * end when it holds one: the rest of a block then arrives whole in the next batch, where a
   * seal can answer for it. Unchanged when no block ends inside.
   */
  alignedCount(buffered: readonly { readonly seq: number }[], count: number): number {
    const last = buffered[count - 1]!.seq;
    const block = blockOf(last, this.blockSize);
    if (block.lastSeq === last) return count;
    const cut = count - (last - (block.firstSeq - 1));
    return cut >= 1 && buffered[cut - 1]!.seq === block.firstSeq - 1 ? cut : count;
  }

  /**
   * The verdicts seals hold for the complete blocks of `messages` (in stream order). Never
   * throws: a seal that cannot be read or believed leaves its block to a full admission.
   */
  async recordedVerdicts(messages: readonly RawEventMessage[]): Promise<RecordedVerdicts> {
    const verdicts: (SealedRefusal | null | undefined)[] = new Array(messages.length);
    const sealedBlocks = new Set<number>();
    const rules = this.options.admission.rulesFingerprint();
    const blocks = rules === null ? [] : completeBlocks(messages, this.blockSize);
    if (blocks.length === 0) return { verdicts, sealedBlocks };
    let rows: { first_seq: string; last_seq: string; digest: string; refused: unknown; key_id: string; signature: string }[];
    try {
      rows = await this.options.db
        .selectFrom('admission_seals')
        .select(['first_seq', 'last_seq', 'digest', 'refused', 'key_id', 'signature'])
        .where('stream', '=', this.options.stream)
        .where('rules', '=', rules!)
        .where(sql<boolean>`first_seq = any(${blocks.map((b) => b.firstSeq)}::bigint[])`)
        .execute();
    } catch (error) {
      this.options.logger.warn({ err: error instanceof Error ? error.message : String(error) }, 'admission seals could not be read; admitting every event in full');
      return { verdicts, sealedBlocks };
    }
    const byFirstSeq = new Map(rows.map((row) => [Number(row.first_seq), row]));
    for (const block of blocks) {
      const row = byFirstSeq.get(block.firstSeq);
      if (!row) continue;
      // A block's digest is a few milliseconds of hashing: let the reader's other work run between blocks.
      await new Promise((resolve) => setImmediate(resolve));
      const refused = sealedRefusals(row.refused, block.firstSeq, block.firstSeq + this.blockSize - 1);
      const seal: AdmissionSeal = {
        stream: this.options.stream,
        firstSeq: block.firstSeq,
        lastSeq: Number(row.last_seq),
        digest: row.digest,
        rules: rules!,
        refused: refused ?? [],
        keyId: row.key_id,
        signature: row.signature,
      };
      const believed =
        refused !== null &&
        seal.lastSeq === block.firstSeq + this.blockSize - 1 &&
        this.options.verifier.verifyRecord(seal.keyId, sealSignedBytes(seal), seal.signature) &&
        digestOf(messages, block.start, block.end) === seal.digest;
      if (!believed) {
        this.counts.rejected++;
        continue;
      }
      const refusals = new Map(seal.refused.map((refusal) => [refusal.seq, refusal]));
      for (let position = block.start; position <= block.end; position++) verdicts[position] = refusals.get(messages[position]!.seq) ?? null;
      sealedBlocks.add(block.firstSeq);
      this.counts.eventsFromSeals += block.end - block.start + 1;
    }
    return { verdicts, sealedBlocks };
  }

  /** A recorder for one projector's stream of batches (each projector keeps its own). */
  recorder(): SealRecorder {
    return new SealRecorder(this);
  }

  /** Waits for the seals handed to {@link store} so far to be written (or to have failed). */
  flush(): Promise<void> {
    return this.writes;
  }

  /** Signs and stores finished blocks, in the background: a seal that is not written only costs the next reader a full admission. */
  store(blocks: readonly FinishedBlock[]): void {
    const { signer } = this.options;
    if (!signer || blocks.length === 0) return;
    let seals: AdmissionSeal[];
    try {
      seals = blocks.map((block): AdmissionSeal => {
        const unsigned = { stream: this.options.stream, ...block, keyId: signer.keyId };
        return { ...unsigned, signature: signer.signRecord(sealSignedBytes(unsigned)) };
      });
    } catch (error) {
      this.options.logger.warn({ err: error instanceof Error ? error.message : String(error) }, 'admission seals could not be signed; the blocks will be admitted in full when read again');
      return;
    }
    this.writes = this.writes.then(async () => {
      try {
        await sql`
          insert into admission_seals (stream, first_seq, last_seq, digest, rules, refused, key_id, signature)
          select * from unnest(${seals.map((s) => s.stream)}::text[], ${seals.map((s) => s.firstSeq)}::bigint[], ${seals.map((s) => s.lastSeq)}::bigint[],
            ${seals.map((s) => s.digest)}::text[], ${seals.map((s) => s.rules)}::text[], ${seals.map((s) => JSON.stringify(s.refused))}::jsonb[],
            ${seals.map((s) => s.keyId)}::text[], ${seals.map((s) => s.signature)}::text[])
          on conflict (stream, first_seq) do update set last_seq = excluded.last_seq, digest = excluded.digest, rules = excluded.rules,
            refused = excluded.refused, key_id = excluded.key_id, signature = excluded.signature, sealed_at = now()
        `.execute(this.options.db);
        this.counts.written += seals.length;
      } catch (error) {
        this.options.logger.warn({ err: error instanceof Error ? error.message : String(error), seals: seals.length }, 'admission seals could not be stored; the blocks will be admitted in full when read again');
      }
    });
  }

  /** The rules verdicts are reached under now (null: none can be sealed). */
  rules(): string | null {
    return this.options.admission.rulesFingerprint();
  }
}

export interface SealedAdmissionOptions {
  readonly admission: EventAdmission;
  /** Without seals, every message is admitted in full. */
  readonly seals?: AdmissionSeals;
  /** Told what was admitted, so blocks admitted whole are sealed; one per reader of the stream. */
  readonly recorder?: SealRecorder;
  /** How far behind the stream's head the batch is (see BatchAdmissionOptions.behindHead). */
  readonly behindHead?: number;
  /** Admits, in stream order, the messages no seal answers for (a subsequence of the batch). */
  readonly admitInFull: (messages: readonly RawEventMessage[]) => Promise<AdmissionResult[]> | AdmissionResult[];
  /**
   * Lets the event loop run after this many events believed from seals: a reader whose own
   * transactions wait on Postgres meanwhile (a projector) gets their answers without waiting
   * for the whole batch to be parsed.
   */
  readonly pauseEvery?: number;
}

/**
 * Admits a batch of stream messages in order (a projector's batch, a rebuild's page): the
 * messages of complete blocks that a verified seal answers for get the sealed verdicts, the
 * others go through `admitInFull`; then the recorder sees the whole batch.
 */
export async function admitWithSeals(messages: readonly RawEventMessage[], options: SealedAdmissionOptions): Promise<AdmissionResult[]> {
  const { admission, seals, behindHead } = options;
  const verdicts: AdmissionResult[] = new Array(messages.length);
  const recorded = seals ? await seals.recordedVerdicts(messages) : undefined;
  const unsealed: number[] = [];
  for (let position = 0, parsed = 0; position < messages.length; position++) {
    const verdict = recorded?.verdicts[position];
    if (verdict === undefined) {
      unsealed.push(position);
      continue;
    }
    if (options.pauseEvery && ++parsed % options.pauseEvery === 0) await new Promise((resolve) => setImmediate(resolve));
    verdicts[position] = admission.admitRecorded(messages[position]!, verdict ?? undefined, { behindHead });
  }
  if (unsealed.length > 0) {
    const results = await options.admitInFull(unsealed.map((position) => messages[position]!));
    unsealed.forEach((position, i) => (verdicts[position] = results[i]!));
  }
  options.recorder?.record(messages, verdicts, recorded?.sealedBlocks ?? new Set());
  return verdicts;
}

/** A block admitted whole, ready to be signed. */
export interface FinishedBlock {
  readonly firstSeq: number;
  readonly lastSeq: number;
  readonly digest: string;
  readonly rules: string;
  readonly refused: readonly SealedRefusal[];
}

interface OpenBlock {
  readonly firstSeq: number;
  nextSeq: number;
  readonly digest: BlockDigest;
  readonly refused: SealedRefusal[];
  readonly rules: string;
  /** A refusal too long to seal, or too many: the block is followed to its end but not sealed. */
  sealable: boolean;
}

/**
 * Follows one projector's admitted batches, in order, and hands every block it saw admitted
 * whole, from its first sequence to its last without a gap, to the seals to be signed.
 * A gap (a redelivery, a batch handed back) abandons the block under way.
 */
export class SealRecorder {
  private open: OpenBlock | undefined;
  private readonly seals: AdmissionSeals;

  constructor(seals: AdmissionSeals) {
    this.seals = seals;
  }

  record(messages: readonly RawEventMessage[], results: readonly AdmissionResult[], sealedBlocks: ReadonlySet<number>): void {
    const finished: FinishedBlock[] = [];
    const size = this.seals.blockSize;
    for (let i = 0; i < messages.length; i++) {
      const message = messages[i]!;
      const seq = message.seq;
      let open = this.open;
      if (open && open.nextSeq !== seq) open = this.open = undefined;
      if (!open) {
        if ((seq - 1) % size !== 0 || sealedBlocks.has(seq)) continue;
        const rules = this.seals.rules();
        if (rules === null) continue;
        open = this.open = { firstSeq: seq, nextSeq: seq, digest: new BlockDigest(), refused: [], rules, sealable: true };
      }
      open.digest.add(message);
      const result = results[i]!;
      if (!result.ok) {
        const { code, detail } = result.corrupt;
        if (open.refused.length >= MAX_SEALED_REFUSALS || detail.length > MAX_SEALED_DETAIL || !PLAIN_TEXT.test(detail)) open.sealable = false;
        else open.refused.push({ seq, code, detail });
      }
      open.nextSeq = seq + 1;
      if (seq === open.firstSeq + size - 1) {
        // Rules that changed while the block was admitted (keys reloaded) gave it mixed verdicts.
        if (open.sealable && this.seals.rules() === open.rules) {
          finished.push({ firstSeq: open.firstSeq, lastSeq: seq, digest: open.digest.finish(), rules: open.rules, refused: open.refused });
        }
        this.open = undefined;
      }
    }
    this.seals.store(finished);
  }
}

/**
 * A reason a seal can carry as it is: a refusal's reason can quote a forged field (an unknown
 * type's name) before the text rule ran, and canonical JSON refuses lone surrogates and
 * Postgres's jsonb refuses U+0000. Such a block is simply not sealed.
 */
const PLAIN_TEXT = /^[^\u0000-\u001f\ud800-\udfff]*$/;

/** The blocks of the stream that `messages` hold whole, each message at its place. */
function completeBlocks(messages: readonly RawEventMessage[], size: number): CompleteBlock[] {
  // Each read of a JetStream message's sequence parses its reply subject: read once.
  const seqs = messages.map((message) => message.seq);
  const blocks: CompleteBlock[] = [];
  let i = 0;
  while (i < seqs.length) {
    const seq = seqs[i]!;
    if ((seq - 1) % size !== 0) {
      i++;
      continue;
    }
    let end = i;
    while (end + 1 < seqs.length && end - i + 1 < size && seqs[end + 1] === seqs[end]! + 1) end++;
    if (end - i + 1 === size) blocks.push({ firstSeq: seq, start: i, end });
    i = end + 1;
  }
  return blocks;
}

function digestOf(messages: readonly RawEventMessage[], start: number, end: number): string {
  const digest = new BlockDigest();
  for (let i = start; i <= end; i++) digest.add(messages[i]!);
  return digest.finish();
}

/** The refusals a seal lists, each in its block with a code admission gives, or null when the list is malformed. */
function sealedRefusals(value: unknown, firstSeq: number, lastSeq: number): SealedRefusal[] | null {
  if (!Array.isArray(value)) return null;
  const refusals: SealedRefusal[] = [];
  for (const item of value as unknown[]) {
    if (typeof item !== 'object' || item === null) return null;
    const { seq, code, detail } = item as Record<string, unknown>;
    if (typeof seq !== 'number' || !Number.isInteger(seq) || seq < firstSeq || seq > lastSeq) return null;
    if (typeof code !== 'string' || !ADMISSION_CODES.has(code) || typeof detail !== 'string') return null;
    refusals.push({ seq, code: code as SealedRefusal['code'], detail });
  }
  return refusals;
}
