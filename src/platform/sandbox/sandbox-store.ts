import { sql, type Kysely, type Transaction } from 'kysely';
import type { Database } from '../../db/schema.ts';
import type { PlatformAccountRef } from '../ads-platform.ts';
import { generateAccount } from './account-generator.ts';
import { DAYS_OF_DATA, type GeneratedAccount } from './generated-account.ts';

/** A generated account's header: what every read needs (its last day of data above all). */
export interface SandboxAccount {
  readonly accountId: string;
  readonly name: string;
  readonly currency: string;
  readonly timeZone: string;
  /** Last day of data, YYYY-MM-DD. */
  readonly anchorDate: string;
}

/** Shifts an ISO date by whole days (UTC). */
export function addDays(isoDate: string, days: number): string {
  return new Date(Date.parse(`${isoDate}T00:00:00Z`) + days * 86_400_000).toISOString().slice(0, 10);
}

/** The seed an account's data comes from; a sandbox account created without one falls back to a hash of its id. */
export function seedOf(account: PlatformAccountRef): number {
  if (account.sandboxSeed !== null) return account.sandboxSeed;
  let hash = 2166136261;
  for (const char of account.accountId) hash = Math.imul(hash ^ char.charCodeAt(0), 16777619) >>> 0;
  return hash;
}

/**
 * Returns the account's sandbox data header, generating and storing the account on first
 * access. Concurrent first accesses generate once: an advisory lock on the account id
 * serialises them, the first inserts the header and everything else in one transaction,
 * and the others find the committed header once the lock is theirs. ON CONFLICT DO
 * NOTHING is the backstop should a writer ever bypass the lock.
 */
export async function ensureSandboxAccount(db: Kysely<Database>, account: PlatformAccountRef, today: Date): Promise<SandboxAccount> {
  const existing = await readHeader(db, account.accountId);
  if (existing) return existing;
  return db.transaction().execute(async (trx) => {
    // Two-key form: the first key namespaces the lock so it cannot collide with other advisory-lock users.
    await sql`select pg_advisory_xact_lock(hashtext('sandbox-platform'), hashtext(${account.accountId}))`.execute(trx);
    // Whoever waited on the lock finds the winner's committed account and generates nothing.
    const generatedMeanwhile = await readHeader(trx, account.accountId);
    if (generatedMeanwhile) return generatedMeanwhile;
    const header: SandboxAccount = {
      accountId: account.accountId,
      name: account.name,
      currency: 'EUR',
      timeZone: 'Europe/Berlin',
      anchorDate: addDays(today.toISOString().slice(0, 10), -1),
    };
    const seed = seedOf(account);
    const generated = generateAccount(seed, account.name);
    const inserted = await trx
      .insertInto('sandbox_accounts')
      .values({
        account_id: header.accountId,
        seed,
        name: header.name,
        theme: generated.theme,
        currency: header.currency,
        time_zone: header.timeZone,
        anchor_date: header.anchorDate,
      })
      .onConflict((oc) => oc.column('account_id').doNothing())
      .returning('account_id')
      .executeTakeFirst();
    if (!inserted) {
      const winner = await readHeader(trx, account.accountId);
      if (!winner) throw new Error(`sandbox account ${account.accountId} conflicted on insert but cannot be read`);
      return winner;
    }
    await insertGenerated(trx, account.accountId, header.anchorDate, generated);
    return header;
  });
}

async function readHeader(db: Kysely<Database>, accountId: string): Promise<SandboxAccount | undefined> {
  const row = await db
    .selectFrom('sandbox_accounts')
    .select(['account_id', 'name', 'currency', 'time_zone', sql<string>`to_char(anchor_date, 'YYYY-MM-DD')`.as('anchor_date')])
    .where('account_id', '=', accountId)
    .executeTakeFirst();
  return row && { accountId: row.account_id, name: row.name, currency: row.currency, timeZone: row.time_zone, anchorDate: row.anchor_date };
}

async function insertGenerated(trx: Transaction<Database>, accountId: string, anchorDate: string, account: GeneratedAccount): Promise<void> {
  const withAccount = <T extends object>(rows: readonly T[]) => rows.map((row) => ({ ...row, account_id: accountId }));
  if (account.portfolios.length > 0) await trx.insertInto('sandbox_portfolios').values(withAccount(account.portfolios)).execute();
  await trx.insertInto('sandbox_campaigns').values(withAccount(account.campaigns)).execute();
  await trx.insertInto('sandbox_ad_groups').values(withAccount(account.adGroups)).execute();
  await trx.insertInto('sandbox_keywords').values(withAccount(account.keywords)).execute();
  if (account.negativeKeywords.length > 0) await trx.insertInto('sandbox_negative_keywords').values(withAccount(account.negativeKeywords)).execute();
  const firstDay = addDays(anchorDate, -(DAYS_OF_DATA - 1));
  const rows = account.searchTermDays;
  const column = <K extends keyof (typeof rows)[number]>(key: K) => rows.map((row) => row[key]);
  // One INSERT … SELECT FROM unnest(arrays) instead of thousands of VALUES tuples: 11
  // parameters rather than ~35,000, which keeps first access well under the generation budget.
  await trx
    .insertInto('sandbox_search_term_daily')
    .columns(['account_id', 'day', 'search_term', 'campaign_id', 'ad_group_id', 'keyword_id', 'impressions', 'clicks', 'cost', 'conversions', 'conversion_value'])
    .expression(
      sql`select ${accountId}, ${firstDay}::date + t.day_index, t.search_term, t.campaign_id, t.ad_group_id, t.keyword_id,
                 t.impressions, t.clicks, t.cost, t.conversions, t.conversion_value
          from unnest(${column('day_index')}::int[], ${column('search_term')}::text[], ${column('campaign_id')}::text[],
                      ${column('ad_group_id')}::text[], ${column('keyword_id')}::text[], ${column('impressions')}::int[],
                      ${column('clicks')}::int[], ${column('cost')}::numeric[], ${column('conversions')}::numeric[],
                      ${column('conversion_value')}::numeric[])
            as t(day_index, search_term, campaign_id, ad_group_id, keyword_id, impressions, clicks, cost, conversions, conversion_value)`,
    )
    .execute();
}
