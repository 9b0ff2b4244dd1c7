import { randomBytes } from 'node:crypto';
import { expect } from 'chai';
import { sql } from 'kysely';
import { openDatabase, type DatabaseHandle } from '../../src/db/database.ts';
import { migrateToLatest } from '../../src/db/migrator.ts';
import type { DateRange, PlatformAccountRef } from '../../src/platform/ads-platform.ts';
import { SandboxPlatform } from '../../src/platform/sandbox/sandbox-platform.ts';
import { classifyAction } from '../../src/policy/classify-action.ts';
import { negativeKeywordBasis } from '../../src/policy/negative-keyword-basis.ts';
import { TEST_DATABASE_URL } from '../support/isolation.ts';

const NOW = new Date('2025-06-15T09:30:00Z');
const LAST_30: DateRange = { from: '2025-05-16', to: '2025-06-14' };
const EXTRA_TERMS = 700;

/**
 * The share of spend a negative keyword blocks is measured over every search term of the
 * campaign. A campaign with more than 500 terms (the search_terms read page's maximum) must
 * not look cheaper to block than it is.
 */
describe('policy input: the spend a negative keyword blocks covers all search terms', function () {
  this.timeout(60_000);
  let handle: DatabaseHandle;
  let platform: SandboxPlatform;
  const account: PlatformAccountRef = { accountId: 'acct-many-terms', name: 'Many terms', platform: 'sandbox', sandboxSeed: 4711 };

  before(async () => {
    const schema = `t_basis_${randomBytes(4).toString('hex')}`;
    handle = await openDatabase(TEST_DATABASE_URL, schema, 4);
    await migrateToLatest(handle.db, schema);
    platform = new SandboxPlatform(handle.db, { now: () => NOW });
  });

  after(async () => {
    await sql`drop schema if exists ${sql.id(handle.schema)} cascade`.execute(handle.db).catch(() => undefined);
    await handle.close();
  });

  it(`counts ${EXTRA_TERMS} cheap matching terms beyond the top 500 by cost`, async () => {
    const campaign = (await platform.listCampaigns(account)).find((c) => c.status === 'enabled')!;
    const keyword = (await platform.listKeywords(account, LAST_30, campaign.id))[0]!;
    // 700 distinct long-tail terms, 1.00 each, cheaper than every generated term: they rank last by cost.
    const rows = Array.from({ length: EXTRA_TERMS }, (_, i) => ({
      account_id: account.accountId,
      day: LAST_30.to,
      search_term: `zzqx widget ${i}`,
      campaign_id: campaign.id,
      ad_group_id: keyword.ad_group_id,
      keyword_id: keyword.id,
      impressions: 10,
      clicks: 1,
      cost: '1.00',
      conversions: '0',
      conversion_value: '0',
    }));
    await handle.db.insertInto('sandbox_search_term_daily').values(rows as never).execute();

    const negatives = [{ text: 'zzqx', match_type: 'phrase' as const }];
    const basis = await negativeKeywordBasis(platform, account, campaign, negatives, LAST_30);
    expect(basis.matched_cost_30d).to.equal(EXTRA_TERMS * 1.0);
    expect(basis.matched_conversions_30d).to.equal(0);

    // What a top-500 page would have seen: fewer of them, so a smaller share.
    const page = await platform.searchTerms(account, LAST_30, { campaignId: campaign.id, limit: 500 });
    expect(page).to.have.length(500);
    const seenOnPage = page.filter((t) => t.search_term.startsWith('zzqx ')).length;
    expect(seenOnPage).to.be.below(EXTRA_TERMS);

    const totals = await platform.searchTermTotals(account, LAST_30, campaign.id);
    expect(totals.length).to.be.above(500);
    const campaignCost = (await platform.campaignPerformance(account, LAST_30, campaign.id))[0]!.cost;
    expect(Math.round(totals.reduce((s, t) => s + t.cost, 0) * 100) / 100).to.equal(campaignCost);

    const share = classifyAction({ kind: 'add_negative_keywords', params: { campaign_id: campaign.id, keywords: negatives }, based_on: basis });
    expect(share.policy_reasons.join(' ')).to.include(`${((EXTRA_TERMS / basis.account_cost_30d) * 100).toFixed(1)}%`);
  });
});
