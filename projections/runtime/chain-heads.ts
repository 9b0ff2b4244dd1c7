import { sql, type Kysely, type RawBuilder, type Transaction } from 'kysely';
import type { Database } from '../../src/db/schema.ts';
import { GENESIS_HASH } from '../../src/events/envelope.ts';
import type { StoredEvent } from '../../src/event-store/event-store.ts';
import type { Projection } from './projection.ts';

/**
 * A signature proves who wrote an event, not where it belongs: the stored bytes of a
 * validly signed event can be published again later on the same subject (a replay) by
 * anyone with publish rights, and would be believed again, e.g. an old KillSwitchReleased.
 * What a replay cannot fake is the hash chain: every event names the hash of the event
 * before it on its subject (`prev_hash`), so a projection keeps the last hash it accepted
 * per subject and refuses an event that does not continue it. The write model applies the
 * same rule (src/event-store/aggregate-repository.ts), so both sides believe the same events.
 *
 * The heads live in a table of the projection's own, created, dropped, rebuilt and swapped
 * with its other tables, so a rebuild from sequence 1 recomputes them.
 */
export function chainHeadsTable(projection: Projection): string {
  return `${projection.name}_chain_heads`;
}

/** The projection's tables and its chain heads: what is dropped, created and swapped together. */
export function ownedTables(projection: Projection): string[] {
  return [...projection.tables, chainHeadsTable(projection)];
}

/** Creates the projection's tables and its chain-heads table (unqualified: the caller's schema). */
export async function createOwnedTables(db: Kysely<any>, projection: Projection): Promise<void> {
  await projection.createTables(db);
  await db.schema
    .createTable(chainHeadsTable(projection))
    .addColumn('subject', 'text', (c) => c.primaryKey())
    .addColumn('last_seq', 'bigint', (c) => c.notNull())
    .addColumn('last_hash', 'text', (c) => c.notNull())
    .execute();
}

export interface ChainCheck<T> {
  /** Entries that continue their subject's chain, in order. */
  readonly continuing: T[];
  /** Entries that do not, each with the hash its subject expected. */
  readonly broken: { readonly entry: T; readonly expected: string }[];
  /** The new head hash of each subject the batch moved, as written in the transaction. */
  readonly moved: ReadonlyMap<string, string>;
  /**
   * The statement that writes the moved heads (null when none moved): already executed,
   * unless the caller asked to write it itself (`write: false`), e.g. as part of its own statement.
   */
  readonly headsUpsert: RawBuilder<unknown> | null;
}

/**
 * Splits a batch (in stream order) into events that continue their subject's chain and
 * events that do not, and records the new heads in the same transaction. Two queries a
 * batch: one read of the heads of the batch's subjects, one multi-row upsert (left to the
 * caller with `write: false`). `known` heads (what the caller committed itself, while no one
 * else wrote: see the projector) are not read.
 */
export async function checkChains<T extends { readonly stored: StoredEvent }>(
  trx: Transaction<Database>,
  projection: Projection,
  entries: readonly T[],
  known?: ReadonlyMap<string, string>,
  { write = true }: { readonly write?: boolean } = {},
): Promise<ChainCheck<T>> {
  if (entries.length === 0) return { continuing: [], broken: [], moved: new Map(), headsUpsert: null };
  const table = chainHeadsTable(projection);
  const db = trx as unknown as Kysely<any>;
  const heads = new Map<string, string>();
  const unknown: string[] = [];
  for (const subject of new Set(entries.map((e) => e.stored.subject))) {
    const head = known?.get(subject);
    if (head === undefined) unknown.push(subject);
    else heads.set(subject, head);
  }
  if (unknown.length > 0) {
    const rows: { subject: string; last_hash: string }[] = await db
      .selectFrom(table)
      .select(['subject', 'last_hash'])
      .where(sql<boolean>`subject = any(${unknown}::text[])`)
      .execute();
    for (const row of rows) heads.set(row.subject, row.last_hash);
  }
  /** Each moved subject's last continuing entry. */
  const moved = new Map<string, StoredEvent>();
  const continuing: T[] = [];
  const broken: { entry: T; expected: string }[] = [];
  for (const entry of entries) {
    const { stored } = entry;
    const expected = heads.get(stored.subject) ?? GENESIS_HASH;
    if (stored.event.prev_hash !== expected) {
      broken.push({ entry, expected });
      continue;
    }
    heads.set(stored.subject, stored.event.hash);
    moved.set(stored.subject, stored);
    continuing.push(entry);
  }
  const headsUpsert = moved.size > 0 ? upsertHeads(table, [...moved.values()]) : null;
  if (headsUpsert && write) await headsUpsert.execute(trx);
  return { continuing, broken, moved: new Map([...moved].map(([subject, head]) => [subject, head.event.hash])), headsUpsert };
}

/** Sets each event's subject head to it; three array parameters whatever the number of subjects: no per-row parameters to compile and send. */
function upsertHeads(table: string, heads: readonly StoredEvent[]): RawBuilder<unknown> {
  return sql`
    insert into ${sql.table(table)} (subject, last_seq, last_hash)
    select * from unnest(${heads.map((h) => h.subject)}::text[], ${heads.map((h) => h.seq)}::bigint[], ${heads.map((h) => h.event.hash)}::text[])
    on conflict (subject) do update set last_seq = excluded.last_seq, last_hash = excluded.last_hash
  `;
}
