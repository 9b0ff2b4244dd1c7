import { sql, type Kysely } from 'kysely';

/**
 * Tables of the sandbox ads platform: generated advertising accounts that applied
 * changes modify. Not projections — the sandbox is a stand-in for an external system,
 * so its state lives only here and is never rebuilt from events. Every key starts with
 * account_id because generated ids are unique per account only.
 */
export async function up(db: Kysely<any>): Promise<void> {
  await db.schema
    .createTable('sandbox_accounts')
    .addColumn('account_id', 'text', (c) => c.primaryKey())
    .addColumn('seed', 'bigint', (c) => c.notNull())
    .addColumn('name', 'text', (c) => c.notNull())
    .addColumn('theme', 'text', (c) => c.notNull())
    .addColumn('currency', 'text', (c) => c.notNull())
    .addColumn('time_zone', 'text', (c) => c.notNull())
    .addColumn('generated_at', 'timestamptz', (c) => c.notNull().defaultTo(sql`now()`))
    .addColumn('anchor_date', 'date', (c) => c.notNull())
    .execute();

  await db.schema
    .createTable('sandbox_portfolios')
    .addColumn('account_id', 'text', (c) => c.notNull().references('sandbox_accounts.account_id').onDelete('cascade'))
    .addColumn('id', 'text', (c) => c.notNull())
    .addColumn('name', 'text', (c) => c.notNull())
    .addColumn('strategy_type', 'text', (c) => c.notNull())
    .addColumn('target_cpa', sql`numeric(14,2)`, (c) => c.check(sql`target_cpa > 0`))
    .addColumn('target_roas_pct', sql`numeric(8,2)`, (c) => c.check(sql`target_roas_pct > 0`))
    .addPrimaryKeyConstraint('sandbox_portfolios_pk', ['account_id', 'id'])
    .addCheckConstraint('sandbox_portfolios_strategy', sql`strategy_type in ('maximize_conversions', 'maximize_conversion_value', 'manual_cpc')`)
    .execute();

  await db.schema
    .createTable('sandbox_campaigns')
    .addColumn('account_id', 'text', (c) => c.notNull().references('sandbox_accounts.account_id').onDelete('cascade'))
    .addColumn('id', 'text', (c) => c.notNull())
    .addColumn('name', 'text', (c) => c.notNull())
    .addColumn('status', 'text', (c) => c.notNull())
    .addColumn('daily_budget', sql`numeric(14,2)`, (c) => c.notNull().check(sql`daily_budget > 0`))
    .addColumn('strategy_type', 'text')
    .addColumn('target_cpa', sql`numeric(14,2)`, (c) => c.check(sql`target_cpa > 0`))
    .addColumn('target_roas_pct', sql`numeric(8,2)`, (c) => c.check(sql`target_roas_pct > 0`))
    .addColumn('portfolio_id', 'text')
    .addPrimaryKeyConstraint('sandbox_campaigns_pk', ['account_id', 'id'])
    .addForeignKeyConstraint('sandbox_campaigns_portfolio_fk', ['account_id', 'portfolio_id'], 'sandbox_portfolios', ['account_id', 'id'])
    .addCheckConstraint('sandbox_campaigns_status', sql`status in ('enabled', 'paused', 'removed')`)
    .addCheckConstraint('sandbox_campaigns_strategy', sql`strategy_type in ('maximize_conversions', 'maximize_conversion_value', 'manual_cpc')`)
    // One source of truth for the strategy: a campaign on a portfolio has none of its own.
    .addCheckConstraint(
      'sandbox_campaigns_own_or_portfolio',
      sql`(portfolio_id is null and strategy_type is not null) or (portfolio_id is not null and strategy_type is null and target_cpa is null and target_roas_pct is null)`,
    )
    .execute();

  await db.schema
    .createTable('sandbox_ad_groups')
    .addColumn('account_id', 'text', (c) => c.notNull())
    .addColumn('id', 'text', (c) => c.notNull())
    .addColumn('campaign_id', 'text', (c) => c.notNull())
    .addColumn('name', 'text', (c) => c.notNull())
    .addColumn('status', 'text', (c) => c.notNull())
    .addPrimaryKeyConstraint('sandbox_ad_groups_pk', ['account_id', 'id'])
    .addForeignKeyConstraint('sandbox_ad_groups_campaign_fk', ['account_id', 'campaign_id'], 'sandbox_campaigns', ['account_id', 'id'], (c) =>
      c.onDelete('cascade'),
    )
    .addCheckConstraint('sandbox_ad_groups_status', sql`status in ('enabled', 'paused')`)
    .execute();

  await db.schema
    .createTable('sandbox_keywords')
    .addColumn('account_id', 'text', (c) => c.notNull())
    .addColumn('id', 'text', (c) => c.notNull())
    .addColumn('campaign_id', 'text', (c) => c.notNull())
    .addColumn('ad_group_id', 'text', (c) => c.notNull())
    .addColumn('text', 'text', (c) => c.notNull())
    .addColumn('match_type', 'text', (c) => c.notNull())
    .addColumn('status', 'text', (c) => c.notNull())
    .addColumn('max_cpc', sql`numeric(14,2)`, (c) => c.check(sql`max_cpc > 0`))
    .addPrimaryKeyConstraint('sandbox_keywords_pk', ['account_id', 'id'])
    .addForeignKeyConstraint('sandbox_keywords_ad_group_fk', ['account_id', 'ad_group_id'], 'sandbox_ad_groups', ['account_id', 'id'], (c) =>
      c.onDelete('cascade'),
    )
    .addCheckConstraint('sandbox_keywords_match_type', sql`match_type in ('exact', 'phrase', 'broad')`)
    .addCheckConstraint('sandbox_keywords_status', sql`status in ('enabled', 'paused')`)
    .execute();
  await db.schema.createIndex('sandbox_keywords_campaign').on('sandbox_keywords').columns(['account_id', 'campaign_id']).execute();

  await db.schema
    .createTable('sandbox_search_term_daily')
    .addColumn('account_id', 'text', (c) => c.notNull())
    .addColumn('day', 'date', (c) => c.notNull())
    .addColumn('search_term', 'text', (c) => c.notNull())
    .addColumn('campaign_id', 'text', (c) => c.notNull())
    .addColumn('ad_group_id', 'text', (c) => c.notNull())
    .addColumn('keyword_id', 'text', (c) => c.notNull())
    .addColumn('impressions', 'integer', (c) => c.notNull().check(sql`impressions >= 0`))
    .addColumn('clicks', 'integer', (c) => c.notNull().check(sql`clicks >= 0`))
    .addColumn('cost', sql`numeric(14,2)`, (c) => c.notNull().check(sql`cost >= 0`))
    .addColumn('conversions', sql`numeric(12,2)`, (c) => c.notNull().check(sql`conversions >= 0`))
    .addColumn('conversion_value', sql`numeric(14,2)`, (c) => c.notNull().check(sql`conversion_value >= 0`))
    // A search term is matched to one keyword of its ad group, so (ad group, term, day) is the grain.
    .addPrimaryKeyConstraint('sandbox_search_term_daily_pk', ['account_id', 'ad_group_id', 'search_term', 'day'])
    .addForeignKeyConstraint('sandbox_search_term_daily_keyword_fk', ['account_id', 'keyword_id'], 'sandbox_keywords', ['account_id', 'id'], (c) =>
      c.onDelete('cascade'),
    )
    .addCheckConstraint('sandbox_search_term_daily_clicks', sql`clicks <= impressions`)
    .execute();
  // Every read filters by account and date range, optionally by campaign.
  await db.schema
    .createIndex('sandbox_search_term_daily_campaign_day')
    .on('sandbox_search_term_daily')
    .columns(['account_id', 'campaign_id', 'day'])
    .execute();
  await db.schema.createIndex('sandbox_search_term_daily_keyword').on('sandbox_search_term_daily').columns(['account_id', 'keyword_id']).execute();

  await db.schema
    .createTable('sandbox_negative_keywords')
    .addColumn('account_id', 'text', (c) => c.notNull())
    .addColumn('campaign_id', 'text', (c) => c.notNull())
    .addColumn('text', 'text', (c) => c.notNull())
    .addColumn('match_type', 'text', (c) => c.notNull())
    .addColumn('created_at', 'timestamptz', (c) => c.notNull().defaultTo(sql`now()`))
    // The key makes adding the same negative twice a no-op (idempotent apply).
    .addPrimaryKeyConstraint('sandbox_negative_keywords_pk', ['account_id', 'campaign_id', 'text', 'match_type'])
    .addForeignKeyConstraint('sandbox_negative_keywords_campaign_fk', ['account_id', 'campaign_id'], 'sandbox_campaigns', ['account_id', 'id'], (c) =>
      c.onDelete('cascade'),
    )
    .addCheckConstraint('sandbox_negative_keywords_match_type', sql`match_type in ('exact', 'phrase', 'broad')`)
    .execute();
}

export async function down(db: Kysely<any>): Promise<void> {
  for (const table of [
    'sandbox_negative_keywords',
    'sandbox_search_term_daily',
    'sandbox_keywords',
    'sandbox_ad_groups',
    'sandbox_campaigns',
    'sandbox_portfolios',
    'sandbox_accounts',
  ]) {
    await db.schema.dropTable(table).execute();
  }
}
