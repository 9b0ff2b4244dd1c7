import { createHash, randomUUID } from 'node:crypto';
import canonicalize from 'canonicalize';
import { sql, type Kysely } from 'kysely';
import type { Database } from '../../db/schema.ts';
import { unavailableError } from '../../errors/infrastructure-errors.ts';
import { PROCESSING_LEASE_SECONDS } from './processing-lease.ts';
import { IdempotencyKeyReusedError, IdempotentRequestInProgressError, InvalidIdempotencyKeyError } from './idempotency-errors.ts';

/** How long a completed request can be replayed; documented in docs/api.md. */
export const IDEMPOTENCY_RETENTION_HOURS = 24;
export { PROCESSING_LEASE_SECONDS } from './processing-lease.ts';

/** Visible ASCII (RFC 5234 VCHAR, `!` to `~`): no space, no control, nothing that needs escaping in a log line. */
const KEY_PATTERN = /^[\x21-\x7e]{1,255}$/;

/**
 * A claim this request holds: what it completes or releases. The token is drawn afresh by
 * every claim and takeover, so a request that stalled past its lease and was taken over
 * completes or releases nothing of its successor's.
 */
export interface HeldClaim {
  readonly keyId: string;
  readonly idempotencyKey: string;
  readonly token: string;
}

export type IdempotencyClaim =
  | { readonly kind: 'new'; readonly runId: string; readonly held: HeldClaim }
  | { readonly kind: 'takeover'; readonly runId: string; readonly held: HeldClaim }
  | { readonly kind: 'replay'; readonly status: number; readonly body: Record<string, unknown> };

/**
 * The fingerprint of a request's meaning: canonical JSON (key order and whitespace do not
 * count) of the body AFTER its schema's defaults were applied, so a retry that spells out
 * a default (`"auto_apply": false`) is the same request as one that leaves it out.
 */
export function requestFingerprint(body: unknown): string {
  return createHash('sha256').update(canonicalize(body) ?? '').digest('hex');
}

/** @throws InvalidIdempotencyKeyError unless `value` is 1 to 255 visible ASCII characters. */
export function validateIdempotencyKey(value: string): string {
  if (value === '') throw new InvalidIdempotencyKeyError('it was empty');
  if (!KEY_PATTERN.test(value)) throw new InvalidIdempotencyKeyError();
  return value;
}

/**
 * The request's Idempotency-Key, or null when it has none. A header that is present but
 * empty is an invalid key, not "no key": taking it as none would make every retry a new run.
 *
 * @throws InvalidIdempotencyKeyError (400)
 */
export function idempotencyKeyOf(headers: Readonly<Record<string, string | string[] | undefined>>): string | null {
  const raw = headers['idempotency-key'];
  if (raw === undefined) return null;
  // Node joins repeated headers with ', '; a repeated key is as ambiguous as a malformed one.
  return validateIdempotencyKey(Array.isArray(raw) ? raw.join(', ') : raw);
}

/**
 * Idempotency-Key handling after the IETF httpapi draft, scoped to the API key. The row
 * is claimed with an INSERT that only one concurrent request can win; the run id is
 * chosen then and stored, so a retry that takes over after a crash finishes the same run.
 */
export class IdempotencyStore {
  private readonly db: Kysely<Database>;

  constructor(db: Kysely<Database>) {
    this.db = db;
  }

  /**
   * @throws IdempotencyKeyReusedError (422) for another body under the same key,
   *   IdempotentRequestInProgressError (409) while the first request runs.
   */
  async claim(keyId: string, idempotencyKey: string, fingerprint: string, proposedRunId: string): Promise<IdempotencyClaim> {
    await this.db
      .deleteFrom('idempotency_records')
      .where('key_id', '=', keyId)
      .where('idempotency_key', '=', idempotencyKey)
      .where('created_at', '<', sql<Date>`now() - make_interval(hours => ${IDEMPOTENCY_RETENTION_HOURS})`)
      .execute();
    const held: HeldClaim = { keyId, idempotencyKey, token: randomUUID() };
    const inserted = await this.db
      .insertInto('idempotency_records')
      .values({
        key_id: keyId,
        idempotency_key: idempotencyKey,
        request_hash: fingerprint,
        run_id: proposedRunId,
        state: 'processing',
        response_status: null,
        response_body: null,
        locked_until: sql`now() + make_interval(secs => ${PROCESSING_LEASE_SECONDS})` as any,
        claim_token: held.token,
      })
      .onConflict((oc) => oc.columns(['key_id', 'idempotency_key']).doNothing())
      .returning('run_id')
      .executeTakeFirst();
    if (inserted) return { kind: 'new', runId: inserted.run_id, held };

    const existing = await this.db
      .selectFrom('idempotency_records')
      .selectAll()
      .where('key_id', '=', keyId)
      .where('idempotency_key', '=', idempotencyKey)
      .executeTakeFirst();
    if (!existing) return this.claim(keyId, idempotencyKey, fingerprint, proposedRunId);
    if (existing.request_hash !== fingerprint) throw new IdempotencyKeyReusedError();
    if (existing.state === 'completed' && existing.response_status !== null && existing.response_body) {
      return { kind: 'replay', status: existing.response_status, body: existing.response_body };
    }
    const takenOver = await this.db
      .updateTable('idempotency_records')
      .set({ locked_until: sql`now() + make_interval(secs => ${PROCESSING_LEASE_SECONDS})` as any, claim_token: held.token })
      .where('key_id', '=', keyId)
      .where('idempotency_key', '=', idempotencyKey)
      .where('state', '=', 'processing')
      .where('locked_until', '<', sql<Date>`now()`)
      .returning('run_id')
      .executeTakeFirst();
    if (takenOver) return { kind: 'takeover', runId: takenOver.run_id, held };
    const leftMs = existing.locked_until.getTime() - Date.now();
    throw new IdempotentRequestInProgressError(Math.min(PROCESSING_LEASE_SECONDS, Math.max(1, Math.ceil(leftMs / 1000))));
  }

  /**
   * Records the answer a retry replays. A claim taken over meanwhile is left to its new
   * holder, which answers for the same run (or action) and records that.
   */
  async complete(claim: HeldClaim, status: number, body: Record<string, unknown>): Promise<void> {
    await this.db
      .updateTable('idempotency_records')
      .set({ state: 'completed', response_status: status, response_body: JSON.stringify(body) })
      .where('key_id', '=', claim.keyId)
      .where('idempotency_key', '=', claim.idempotencyKey)
      .where('state', '=', 'processing')
      .where('claim_token', '=', claim.token)
      .execute();
  }

  /**
   * An error response is not remembered: the key stays free for a corrected retry. Only
   * while this request still holds the claim: releasing a successor's would let a third
   * request claim the key afresh and make a second run beside the successor's.
   */
  async release(claim: HeldClaim): Promise<void> {
    await this.db
      .deleteFrom('idempotency_records')
      .where('key_id', '=', claim.keyId)
      .where('idempotency_key', '=', claim.idempotencyKey)
      .where('state', '=', 'processing')
      .where('claim_token', '=', claim.token)
      .execute();
  }

  /**
   * The request ended without knowing whether its write was stored: the event log did not
   * answer (a publish whose acknowledgement was lost, a NATS leader election), and the run may
   * be queued all the same. Releasing would let a retry claim the key afresh with a new run id
   * and queue a second run. The claim and its run id stay instead, and its lease ends now, so
   * the retry takes it over at once and finishes the same run or finds it queued.
   */
  async abandon(claim: HeldClaim): Promise<void> {
    await this.db
      .updateTable('idempotency_records')
      .set({ locked_until: sql`now() - interval '1 millisecond'` as any })
      .where('key_id', '=', claim.keyId)
      .where('idempotency_key', '=', claim.idempotencyKey)
      .where('state', '=', 'processing')
      .where('claim_token', '=', claim.token)
      .execute();
  }

  /**
   * Gives the claim up after `error`: {@link abandon} when the write's outcome may be unknown
   * (the event log or the database could not be reached), else {@link release}: a refusal
   * stored nothing, and the key stays free for a corrected retry.
   */
  async giveUp(claim: HeldClaim, error: unknown): Promise<void> {
    await (unavailableError(error) ? this.abandon(claim) : this.release(claim));
  }

  /** Drops records past retention; the service calls it hourly. */
  async sweep(): Promise<number> {
    const result = await this.db
      .deleteFrom('idempotency_records')
      .where('created_at', '<', sql<Date>`now() - make_interval(hours => ${IDEMPOTENCY_RETENTION_HOURS})`)
      .executeTakeFirst();
    return Number(result.numDeletedRows);
  }
}
