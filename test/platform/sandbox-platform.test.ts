import { randomBytes } from 'node:crypto';
import { expect } from 'chai';
import { sql, type Kysely, type KyselyPlugin } from 'kysely';
import { openDatabase, type DatabaseHandle } from '../../src/db/database.ts';
import { migrateToLatest } from '../../src/db/migrator.ts';
import type { Database } from '../../src/db/schema.ts';
import type { AdsPlatform, Campaign, DateRange, PlatformAccountRef, PlatformChange } from '../../src/platform/ads-platform.ts';
import { AccountNotConnectedError, CampaignNotFoundError } from '../../src/platform/platform-errors.ts';
import { ChangeNotApplicableError, InvalidDateRangeError, KeywordNotFoundError } from '../../src/platform/sandbox/sandbox-errors.ts';
import { SandboxPlatform } from '../../src/platform/sandbox/sandbox-platform.ts';
import { TEST_DATABASE_URL } from '../support/isolation.ts';

/** A fixed clock: the last day of data is 2025-06-14 in every schema, so generated rows compare exactly. */
const NOW = new Date('2025-06-15T09:30:00Z');
const LAST_30: DateRange = { from: '2025-05-16', to: '2025-06-14' };
const SANDBOX_TABLES = [
  'sandbox_accounts',
  'sandbox_portfolios',
  'sandbox_campaigns',
  'sandbox_ad_groups',
  'sandbox_keywords',
  'sandbox_search_term_daily',
  'sandbox_negative_keywords',
] as const;

const sandbox = (accountId: string, seed: number): PlatformAccountRef => ({ accountId, name: `Sandbox ${accountId}`, platform: 'sandbox', sandboxSeed: seed });
const round2 = (n: number) => Math.round(n * 100) / 100;

async function rejection(promise: Promise<unknown>): Promise<Error> {
  try {
    await promise;
  } catch (error) {
    return error as Error;
  }
  throw new Error('expected the call to fail');
}

async function rowCounts(db: Kysely<Database>, accountId: string): Promise<Record<string, number>> {
  const counts: Record<string, number> = {};
  for (const table of SANDBOX_TABLES) {
    const result = await sql<{ n: number }>`select count(*)::int as n from ${sql.table(table)} where account_id = ${accountId}`.execute(db);
    counts[table] = result.rows[0]?.n ?? -1;
  }
  return counts;
}

/** Every generated search-term row of an account, in a stable order, with days as text. */
async function dailyRows(db: Kysely<Database>, accountId: string) {
  const result = await sql`
    select to_char(day, 'YYYY-MM-DD') as day, search_term, campaign_id, ad_group_id, keyword_id, impressions, clicks, cost, conversions, conversion_value
    from sandbox_search_term_daily where account_id = ${accountId}
    order by day, ad_group_id, search_term`.execute(db);
  return result.rows;
}

describe('sandbox ads platform', function () {
  this.timeout(60_000);
  const handles: DatabaseHandle[] = [];
  let db: Kysely<Database>;
  let platform: SandboxPlatform;

  const openSchema = async (): Promise<DatabaseHandle> => {
    const schema = `t_sandbox_${randomBytes(4).toString('hex')}`;
    const handle = await openDatabase(TEST_DATABASE_URL, schema, 12);
    handles.push(handle);
    await migrateToLatest(handle.db, schema);
    return handle;
  };

  before(async () => {
    db = (await openSchema()).db;
    platform = new SandboxPlatform(db, { now: () => NOW });
  });

  after(async () => {
    for (const handle of handles) {
      await sql`drop schema if exists ${sql.id(handle.schema)} cascade`.execute(handle.db).catch(() => undefined);
      await handle.close();
    }
  });

  describe('generation', () => {
    it('generates the same account from the same seed in another schema', async () => {
      const other = new SandboxPlatform((await openSchema()).db, { now: () => NOW });
      const account = sandbox('acct-determinism', 424242);
      const [campaignsA, campaignsB] = await Promise.all([platform.listCampaigns(account), other.listCampaigns(account)]);
      expect(campaignsA).to.deep.equal(campaignsB);
      expect(await platform.searchTerms(account, LAST_30, { limit: 500 })).to.deep.equal(await other.searchTerms(account, LAST_30, { limit: 500 }));
      expect(await platform.listKeywords(account, LAST_30)).to.deep.equal(await other.listKeywords(account, LAST_30));
      const otherDb = handles[handles.length - 1]!.db;
      expect(await dailyRows(db, account.accountId)).to.deep.equal(await dailyRows(otherDb, account.accountId));
    });

    it('generates different accounts from different seeds', async () => {
      const [a, b] = [sandbox('acct-seed-1', 1), sandbox('acct-seed-2', 2)];
      const names = async (ref: PlatformAccountRef) => (await platform.listCampaigns(ref)).map((c) => `${c.name}/${c.daily_budget}`);
      const terms = async (ref: PlatformAccountRef) => (await platform.searchTerms(ref, LAST_30, { limit: 100 })).map((t) => t.search_term);
      expect(await names(a)).to.not.deep.equal(await names(b));
      expect(await terms(a)).to.not.deep.equal(await terms(b));
    });

    it('dates the data to the 30 days ending yesterday (UTC)', async () => {
      const account = sandbox('acct-dates', 5);
      await platform.accountSummary(account);
      const span = await sql<{ first: string; last: string; days: number }>`
        select to_char(min(day), 'YYYY-MM-DD') as first, to_char(max(day), 'YYYY-MM-DD') as last, count(distinct day)::int as days
        from sandbox_search_term_daily where account_id = ${account.accountId}`.execute(db);
      expect(span.rows[0]).to.deep.equal({ first: LAST_30.from, last: LAST_30.to, days: 30 });
    });

    for (const seed of [3, 17, 2024, 99991, 2_000_000_001]) {
      it(`seed ${seed}: every bidding set-up, a paused campaign and a shared portfolio`, async () => {
        const account = sandbox(`acct-variety-${seed}`, seed);
        const campaigns = await platform.listCampaigns(account);
        expect(campaigns.length).to.be.within(5, 7);
        const own = campaigns.filter((c) => c.bidding_strategy.portfolio === null);
        const strategy = (c: Campaign) => c.bidding_strategy;
        expect(own.some((c) => strategy(c).type === 'maximize_conversions' && strategy(c).target_cpa !== null)).to.equal(true);
        expect(own.some((c) => strategy(c).type === 'maximize_conversion_value' && strategy(c).target_roas_pct !== null)).to.equal(true);
        expect(own.some((c) => strategy(c).type === 'manual_cpc')).to.equal(true);
        expect(own.some((c) => strategy(c).type === 'maximize_conversions' && strategy(c).target_cpa === null)).to.equal(true);
        const onPortfolio = campaigns.filter((c) => c.bidding_strategy.portfolio !== null);
        expect(onPortfolio).to.have.length(2);
        const [first, second] = onPortfolio as [Campaign, Campaign];
        expect(first.bidding_strategy.portfolio).to.deep.equal(second.bidding_strategy.portfolio);
        expect(first.bidding_strategy.portfolio!.campaign_ids).to.have.members([first.id, second.id]);
        expect(first.bidding_strategy.target_cpa).to.be.a('number').and.to.be.greaterThan(0);
        expect(campaigns.filter((c) => c.status === 'paused')).to.have.length(1);
        for (const campaign of campaigns) expect(campaign.daily_budget).to.be.within(20, 400);

        const structure = await sql<{ campaign_id: string; ad_groups: number; min_kw: number; max_kw: number; min_terms: number; max_terms: number }>`
          select g.campaign_id, count(*)::int as ad_groups, min(k.n)::int as min_kw, max(k.n)::int as max_kw,
                 min(coalesce(t.n, 0))::int as min_terms, max(coalesce(t.n, 0))::int as max_terms
          from sandbox_ad_groups g
          join (select ad_group_id, count(*) as n from sandbox_keywords where account_id = ${account.accountId} group by ad_group_id) k on k.ad_group_id = g.id
          left join (select ad_group_id, count(distinct search_term) as n from sandbox_search_term_daily where account_id = ${account.accountId} group by ad_group_id) t
            on t.ad_group_id = g.id
          where g.account_id = ${account.accountId}
          group by g.campaign_id`.execute(db);
        expect(structure.rows).to.have.length(campaigns.length);
        for (const row of structure.rows) {
          expect(row.ad_groups, `ad groups of ${row.campaign_id}`).to.be.within(2, 4);
          expect(row.min_kw).to.be.at.least(4);
          expect(row.max_kw).to.be.at.most(10);
          expect(row.min_terms).to.be.at.least(15);
          expect(row.max_terms).to.be.at.most(40);
        }
        const keywords = await platform.listKeywords(account, LAST_30);
        const manual = new Set(campaigns.filter((c) => c.bidding_strategy.type === 'manual_cpc').map((c) => c.id));
        for (const keyword of keywords) expect(keyword.max_cpc === null, keyword.text).to.equal(!manual.has(keyword.campaign_id));
      });

      it(`seed ${seed}: realistic rates and waste worth finding`, async () => {
        const account = sandbox(`acct-variety-${seed}`, seed);
        const summary = await platform.accountSummary(account);
        const m = summary.last_30_days;
        expect(m.clicks / m.impressions, 'CTR').to.be.within(0.01, 0.1);
        expect(m.cost / m.clicks, 'CPC').to.be.within(0.3, 4);
        expect(m.conversions / m.clicks, 'conversion rate').to.be.within(0, 0.12);

        const terms = await platform.searchTerms(account, LAST_30, { limit: 500 });
        const wasted = terms.filter((t) => t.conversions === 0 && t.cost > 20);
        expect(wasted.length, 'zero-conversion terms costing over 20').to.be.at.least(3);
        const irrelevant = /\b(free|jobs|diy|used|reddit|repair|second hand|wikipedia|youtube)\b/;
        const irrelevantTerms = terms.filter((t) => irrelevant.test(t.search_term));
        expect(irrelevantTerms.length).to.be.greaterThan(0);
        expect(irrelevantTerms.every((t) => t.conversions === 0)).to.equal(true);
        expect(irrelevantTerms.some((t) => t.clicks > 0 && t.cost > 0)).to.equal(true);

        // At least one keyword spends far beyond the account's CPA without converting.
        const cpa = m.cost / m.conversions;
        const keywords = await platform.listKeywords(account, LAST_30);
        expect(keywords.some((k) => k.status === 'enabled' && k.conversions === 0 && k.cost > 1.5 * cpa)).to.equal(true);
      });
    }

    it('generates exactly once under 10 concurrent first accesses', async () => {
      const seed = 777;
      const summaries = await Promise.all(Array.from({ length: 10 }, () => platform.accountSummary(sandbox('acct-concurrent', seed))));
      for (const summary of summaries) expect(summary).to.deep.equal(summaries[0]);
      await platform.accountSummary(sandbox('acct-single', seed));
      const concurrent = await rowCounts(db, 'acct-concurrent');
      expect(concurrent).to.deep.equal(await rowCounts(db, 'acct-single'));
      expect(concurrent.sandbox_accounts).to.equal(1);
      expect(concurrent.sandbox_search_term_daily).to.be.within(1000, 5000);
    });
  });

  it('reads an account\'s header once per process: later calls of that account go straight to its data', async () => {
    // Counts the statements that touch the header table, as the platform sends them.
    let headerStatements = 0;
    const counting: KyselyPlugin = {
      transformQuery: (args) => {
        if (JSON.stringify(args.node).includes('"sandbox_accounts"')) headerStatements++;
        return args.node;
      },
      transformResult: async (args) => args.result,
    };
    const account = sandbox('acct-header-once', 99);
    const first = new SandboxPlatform(db.withPlugin(counting), { now: () => NOW });
    const campaigns = await first.listCampaigns(account);
    const afterFirst = headerStatements;
    expect(afterFirst, 'the first call reads (and here writes) the header').to.be.greaterThan(0);
    await first.listCampaigns(account);
    await first.accountSummary(account);
    await first.searchTerms(account, LAST_30);
    expect(headerStatements).to.equal(afterFirst);
    // Another process reads it once, and sees the same account.
    const second = new SandboxPlatform(db.withPlugin(counting), { now: () => NOW });
    expect(await second.listCampaigns(account)).to.deep.equal(campaigns);
    expect(headerStatements).to.equal(afterFirst + 1);
  });

  describe('reads', () => {
    const account = sandbox('acct-reads', 31337);

    it('campaign, keyword and account totals equal the sum of search-term rows', async () => {
      const performance = await platform.campaignPerformance(account, LAST_30);
      const summary = await platform.accountSummary(account);
      const campaigns = await platform.listCampaigns(account);
      expect(performance.map((p) => p.campaign_id)).to.have.members(campaigns.map((c) => c.id));
      const sumOf = (rows: readonly { cost: number; clicks: number; impressions: number; conversions: number; conversion_value: number }[]) => ({
        impressions: rows.reduce((s, r) => s + r.impressions, 0),
        clicks: rows.reduce((s, r) => s + r.clicks, 0),
        cost: round2(rows.reduce((s, r) => s + r.cost, 0)),
        conversions: round2(rows.reduce((s, r) => s + r.conversions, 0)),
        conversion_value: round2(rows.reduce((s, r) => s + r.conversion_value, 0)),
      });
      expect(sumOf(performance)).to.deep.equal(summary.last_30_days);
      expect(sumOf(await platform.listKeywords(account, LAST_30))).to.deep.equal(summary.last_30_days);
      for (const campaign of performance) {
        const terms = await platform.searchTerms(account, LAST_30, { campaignId: campaign.campaign_id, limit: 500 });
        expect(terms.length).to.be.below(500);
        expect(sumOf(terms), campaign.campaign_name).to.deep.equal(sumOf([campaign]));
        if (campaign.clicks > 0) expect(campaign.cpc).to.equal(round2(campaign.cost / campaign.clicks));
        if (campaign.conversions > 0) expect(campaign.cpa).to.equal(round2(campaign.cost / campaign.conversions));
        else expect(campaign.cpa).to.equal(null);
      }
    });

    it('sums only the days inside an inclusive range', async () => {
      const week: DateRange = { from: '2025-06-08', to: '2025-06-14' };
      const direct = await sql<{ cost: string; clicks: number }>`
        select coalesce(sum(cost), 0) as cost, coalesce(sum(clicks), 0)::int as clicks from sandbox_search_term_daily
        where account_id = ${account.accountId} and day between '2025-06-08' and '2025-06-14'`.execute(db);
      const performance = await platform.campaignPerformance(account, week);
      expect(round2(performance.reduce((s, p) => s + p.cost, 0))).to.equal(Number(direct.rows[0]!.cost));
      expect(performance.reduce((s, p) => s + p.clicks, 0)).to.equal(direct.rows[0]!.clicks);
      const single = await platform.campaignPerformance(account, { from: '2025-06-14', to: '2025-06-14' });
      expect(single.reduce((s, p) => s + p.impressions, 0)).to.be.greaterThan(0);
      const before = await platform.campaignPerformance(account, { from: '2024-01-01', to: '2024-01-31' });
      expect(before.every((p) => p.impressions === 0 && p.cpc === null && p.cpa === null && p.roas === null && p.ctr === 0)).to.equal(true);
    });

    it('sorts search terms by cost, limits to 50 by default and 500 at most', async () => {
      const terms = await platform.searchTerms(account, LAST_30);
      expect(terms).to.have.length(50);
      for (let i = 1; i < terms.length; i++) expect(terms[i - 1]!.cost).to.be.at.least(terms[i]!.cost);
      expect((await platform.searchTerms(account, LAST_30, { limit: 10_000 })).length).to.be.at.most(500);
      expect(await platform.searchTerms(account, LAST_30, { limit: 3 })).to.deep.equal(terms.slice(0, 3));
    });

    it('answers a missing campaign with null or CampaignNotFoundError, a bad range with InvalidDateRangeError', async () => {
      const [campaign] = await platform.listCampaigns(account);
      expect(await platform.getCampaign(account, campaign!.id)).to.deep.equal(campaign);
      expect(await platform.getCampaign(account, 'no-such-campaign')).to.equal(null);
      expect(await rejection(platform.campaignPerformance(account, LAST_30, 'no-such-campaign'))).to.be.instanceOf(CampaignNotFoundError);
      expect(await rejection(platform.listNegativeKeywords(account, 'no-such-campaign'))).to.be.instanceOf(CampaignNotFoundError);
      expect(await rejection(platform.searchTerms(account, { from: '2025-06-14', to: '2025-06-01' }))).to.be.instanceOf(InvalidDateRangeError);
      expect(await rejection(platform.listKeywords(account, { from: 'yesterday', to: '2025-06-01' }))).to.be.instanceOf(InvalidDateRangeError);
    });
  });

  describe('changes', () => {
    /** Everything the read methods show, to compare state after one and two applications. */
    const snapshot = async (ref: PlatformAccountRef) => ({
      campaigns: await platform.listCampaigns(ref),
      keywords: await platform.listKeywords(ref, LAST_30),
      negatives: await platform.listNegativeKeywords(ref),
      performance: await platform.campaignPerformance(ref, LAST_30),
    });
    /** Applies a change once, then again, and returns the states before, after once and after twice. */
    const applyTwice = async (ref: PlatformAccountRef, change: PlatformChange) => {
      const before = await snapshot(ref);
      await platform.applyChange(ref, change);
      const once = await snapshot(ref);
      await platform.applyChange(ref, change);
      const twice = await snapshot(ref);
      expect(twice, 'applying twice equals applying once').to.deep.equal(once);
      return { before, once };
    };
    const campaignWith = async (ref: PlatformAccountRef, test: (c: Campaign) => boolean) => {
      const found = (await platform.listCampaigns(ref)).find(test);
      if (!found) throw new Error('no such campaign in the generated account');
      return found;
    };

    it('add_negative_keywords adds normalised negatives once', async () => {
      const ref = sandbox('acct-change-negatives', 11);
      const campaign = await campaignWith(ref, (c) => c.name.startsWith('Generic'));
      const { before, once } = await applyTwice(ref, {
        kind: 'add_negative_keywords',
        campaign_id: campaign.id,
        keywords: [
          { text: '  Free ', match_type: 'phrase' },
          { text: 'free', match_type: 'phrase' },
          { text: 'hiking  jobs', match_type: 'exact' },
        ],
      });
      const added = once.negatives.filter((n) => !before.negatives.some((b) => b.campaign_id === n.campaign_id && b.text === n.text && b.match_type === n.match_type));
      expect(added).to.have.deep.members([
        { campaign_id: campaign.id, text: 'free', match_type: 'phrase' },
        { campaign_id: campaign.id, text: 'hiking jobs', match_type: 'exact' },
      ]);
      expect(await platform.listNegativeKeywords(ref, campaign.id)).to.deep.include({ campaign_id: campaign.id, text: 'free', match_type: 'phrase' });
      // History is not rewritten: the change affects future traffic only.
      expect(once.performance).to.deep.equal(before.performance);
    });

    it('pause_keywords pauses exactly the named keywords, all or nothing', async () => {
      const ref = sandbox('acct-change-pause', 12);
      const enabled = (await platform.listKeywords(ref, LAST_30)).filter((k) => k.status === 'enabled');
      const targets = enabled.slice(0, 2).map((k) => k.id);
      const { before, once } = await applyTwice(ref, { kind: 'pause_keywords', keyword_ids: targets });
      for (const keyword of once.keywords) {
        const was = before.keywords.find((k) => k.id === keyword.id)!;
        expect(keyword.status, keyword.id).to.equal(targets.includes(keyword.id) ? 'paused' : was.status);
        expect(keyword.cost).to.equal(was.cost);
      }
      const other = enabled[2]!.id;
      expect(await rejection(platform.applyChange(ref, { kind: 'pause_keywords', keyword_ids: [other, 'no-such-keyword'] }))).to.be.instanceOf(KeywordNotFoundError);
      expect((await platform.listKeywords(ref, LAST_30)).find((k) => k.id === other)!.status).to.equal('enabled');
    });

    it('set_campaign_budget sets the budget in cents', async () => {
      const ref = sandbox('acct-change-budget', 13);
      const campaign = await campaignWith(ref, () => true);
      const { once } = await applyTwice(ref, { kind: 'set_campaign_budget', campaign_id: campaign.id, daily_budget: 123.456 });
      expect(once.campaigns.find((c) => c.id === campaign.id)!.daily_budget).to.equal(123.46);
      expect(await rejection(platform.applyChange(ref, { kind: 'set_campaign_budget', campaign_id: campaign.id, daily_budget: 0 }))).to.be.instanceOf(
        ChangeNotApplicableError,
      );
      expect(await rejection(platform.applyChange(ref, { kind: 'set_campaign_budget', campaign_id: 'nope', daily_budget: 50 }))).to.be.instanceOf(
        CampaignNotFoundError,
      );
    });

    it('set_target_cpa sets a campaign target; on a portfolio it moves both campaigns', async () => {
      const ref = sandbox('acct-change-cpa', 14);
      const standalone = await campaignWith(ref, (c) => c.bidding_strategy.portfolio === null && c.bidding_strategy.target_cpa !== null);
      const { before, once } = await applyTwice(ref, { kind: 'set_target_cpa', campaign_id: standalone.id, target_cpa: 31.5 });
      expect(once.campaigns.find((c) => c.id === standalone.id)!.bidding_strategy.target_cpa).to.equal(31.5);
      const othersOf = (list: Campaign[]) => list.filter((c) => c.id !== standalone.id);
      expect(othersOf(once.campaigns)).to.deep.equal(othersOf(before.campaigns));

      const onPortfolio = await campaignWith(ref, (c) => c.bidding_strategy.portfolio !== null);
      const members = onPortfolio.bidding_strategy.portfolio!.campaign_ids;
      const moved = await applyTwice(ref, { kind: 'set_target_cpa', campaign_id: onPortfolio.id, target_cpa: 42.25 });
      for (const id of members) expect(moved.once.campaigns.find((c) => c.id === id)!.bidding_strategy.target_cpa, id).to.equal(42.25);
      expect(moved.once.campaigns.find((c) => c.id === standalone.id)!.bidding_strategy.target_cpa).to.equal(31.5);

      const manual = await campaignWith(ref, (c) => c.bidding_strategy.type === 'manual_cpc');
      expect(await rejection(platform.applyChange(ref, { kind: 'set_target_cpa', campaign_id: manual.id, target_cpa: 20 }))).to.be.instanceOf(
        ChangeNotApplicableError,
      );
      expect(await rejection(platform.applyChange(ref, { kind: 'set_target_cpa', campaign_id: 'nope', target_cpa: 20 }))).to.be.instanceOf(CampaignNotFoundError);
    });

    it('set_target_cpa gives a maximize-conversions campaign without a target its first target', async () => {
      const ref = sandbox('acct-change-cpa-new', 15);
      const open = await campaignWith(
        ref,
        (c) => c.bidding_strategy.type === 'maximize_conversions' && c.bidding_strategy.portfolio === null && c.bidding_strategy.target_cpa === null,
      );
      const { once } = await applyTwice(ref, { kind: 'set_target_cpa', campaign_id: open.id, target_cpa: 25 });
      expect(once.campaigns.find((c) => c.id === open.id)!.bidding_strategy.target_cpa).to.equal(25);
    });

    it('set_target_roas sets the ROAS target of a maximize-conversion-value campaign only', async () => {
      const ref = sandbox('acct-change-roas', 16);
      const valueCampaign = await campaignWith(ref, (c) => c.bidding_strategy.type === 'maximize_conversion_value');
      const { once } = await applyTwice(ref, { kind: 'set_target_roas', campaign_id: valueCampaign.id, target_roas_pct: 420 });
      expect(once.campaigns.find((c) => c.id === valueCampaign.id)!.bidding_strategy.target_roas_pct).to.equal(420);
      const onPortfolio = await campaignWith(ref, (c) => c.bidding_strategy.portfolio !== null);
      expect(
        await rejection(platform.applyChange(ref, { kind: 'set_target_roas', campaign_id: onPortfolio.id, target_roas_pct: 300 })),
      ).to.be.instanceOf(ChangeNotApplicableError);
    });
  });

  describe('an account without a platform', () => {
    const account: PlatformAccountRef = { accountId: 'acct-none', name: 'Not connected', platform: 'none', sandboxSeed: null };
    const calls: [string, (p: AdsPlatform) => Promise<unknown>][] = [
      ['accountSummary', (p) => p.accountSummary(account)],
      ['listCampaigns', (p) => p.listCampaigns(account)],
      ['getCampaign', (p) => p.getCampaign(account, 'c')],
      ['campaignPerformance', (p) => p.campaignPerformance(account, LAST_30)],
      ['listKeywords', (p) => p.listKeywords(account, LAST_30)],
      ['searchTerms', (p) => p.searchTerms(account, LAST_30)],
      ['listNegativeKeywords', (p) => p.listNegativeKeywords(account)],
      ['applyChange', (p) => p.applyChange(account, { kind: 'set_campaign_budget', campaign_id: 'c', daily_budget: 10 })],
    ];
    for (const [name, call] of calls) {
      it(`${name} throws AccountNotConnectedError`, async () => {
        expect(await rejection(call(platform))).to.be.instanceOf(AccountNotConnectedError);
      });
    }

    it('generates nothing for it', async () => {
      expect((await rowCounts(db, account.accountId)).sandbox_accounts).to.equal(0);
    });
  });
});

describe('sandbox themes follow the account name', () => {
  it('picks the theme a name asks for, and the seed decides otherwise', async () => {
    const { generateAccount } = await import('../../src/platform/sandbox/account-generator.ts');
    expect(generateAccount(7, 'Bloom Florists').theme).to.equal('florist');
    expect(generateAccount(7, 'Acme Outdoor').theme).to.equal('outdoor');
    expect(generateAccount(7, 'Daily Grind Coffee Roasters').theme).to.equal('coffee');
    expect(generateAccount(7, 'Untitled').theme).to.equal(generateAccount(7).theme);
    // Only the theme changes: the structure's size comes from the same draws.
    expect(generateAccount(7, 'Bloom Florists').campaigns.length).to.equal(generateAccount(7).campaigns.length);
  });
});
