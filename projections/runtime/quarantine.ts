import { sql, type Kysely, type Transaction } from 'kysely';
import type { Database } from '../../src/db/schema.ts';
import { InadmissibleCode } from '../../src/events/event-admission.ts';
import { sanitizeText } from '../../src/text/hostile-text.ts';

/** One event a projection parked instead of applying. */
export interface ParkedEvent {
  readonly projection: string;
  readonly seq: number;
  readonly subject: string;
  readonly code: InadmissibleCode;
  readonly error: string;
  /** The stored bytes, so an operator sees exactly what was refused. */
  readonly payload: Uint8Array;
}

export interface QuarantineEntry extends ParkedEvent {
  readonly firstSeenAt: Date;
  readonly lastSeenAt: Date;
}

/** Keeps an error message readable in a table and a log line whatever the event put in it. */
const MAX_ERROR_LENGTH = 2000;

/**
 * Parks an event in the quarantine table, in the caller's transaction so the park and the
 * checkpoint move commit together. Parking the same event again (a rebuild, a redelivery)
 * keeps its first-seen time. `schema` qualifies the table when the transaction's search
 * path points elsewhere (a rebuild's shadow schema).
 */
export async function parkEvent(trx: Transaction<Database> | Kysely<Database>, parked: ParkedEvent, schema?: string): Promise<void> {
  const table = schema ? sql.id(schema, 'event_quarantine') : sql.id('event_quarantine');
  // The quarantine must never be refused itself: text Postgres cannot store is repaired here.
  const error = sanitizeText(parked.error.slice(0, MAX_ERROR_LENGTH));
  const subject = sanitizeText(parked.subject);
  await sql`
    insert into ${table} (projection, seq, subject, code, error, payload)
    values (${parked.projection}, ${parked.seq}, ${subject}, ${parked.code}, ${error}, ${Buffer.from(parked.payload)})
    on conflict (projection, seq) do update
      set code = excluded.code, error = excluded.error, subject = excluded.subject, payload = excluded.payload, last_seen_at = now()
  `.execute(trx);
}

export async function listQuarantine(db: Kysely<Database>, seq?: number): Promise<QuarantineEntry[]> {
  let query = db.selectFrom('event_quarantine').selectAll().orderBy('seq').orderBy('projection');
  if (seq !== undefined) query = query.where('seq', '=', seq);
  const rows = await query.execute();
  return rows.map((row) => ({
    projection: row.projection,
    seq: row.seq,
    subject: row.subject,
    code: row.code as InadmissibleCode,
    error: row.error,
    payload: row.payload,
    firstSeenAt: row.first_seen_at,
    lastSeenAt: row.last_seen_at,
  }));
}

/**
 * Which of these stream sequences `projection` parked as `chain-broken` (a validly signed event
 * that does not continue its subject's chain: a replayed or inserted copy), with the reason.
 * Every projection checks every subject's chain, so one projection's verdicts cover the log up
 * to its checkpoint.
 */
export async function chainBreaksAmong(db: Kysely<Database>, projection: string, seqs: readonly number[]): Promise<Map<number, string>> {
  if (seqs.length === 0) return new Map();
  const rows = await db
    .selectFrom('event_quarantine')
    .select(['seq', 'error'])
    .where('projection', '=', projection)
    .where('code', '=', InadmissibleCode.ChainBroken)
    .where(sql<boolean>`seq = any(${seqs.map(String)}::bigint[])`)
    .execute();
  return new Map(rows.map((row) => [Number(row.seq), row.error]));
}

/** Parked events per projection (projections with none are absent). */
export async function countQuarantined(db: Kysely<Database>): Promise<Map<string, number>> {
  const rows = await db
    .selectFrom('event_quarantine')
    .select(['projection', sql<number>`count(*)::int`.as('count')])
    .groupBy('projection')
    .execute();
  return new Map(rows.map((row) => [row.projection, row.count]));
}

export async function releaseQuarantined(trx: Transaction<Database>, projection: string, seq: number): Promise<void> {
  await trx.deleteFrom('event_quarantine').where('projection', '=', projection).where('seq', '=', seq).execute();
}
