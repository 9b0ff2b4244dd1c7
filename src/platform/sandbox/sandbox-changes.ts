import type { Kysely, Transaction } from 'kysely';
import type { Database } from '../../db/schema.ts';
import { MATCH_TYPES, normaliseNegativeKeyword, type BiddingStrategyType, type MatchType, type PlatformChange } from '../ads-platform.ts';
import { CampaignNotFoundError } from '../platform-errors.ts';
import { ChangeNotApplicableError, KeywordNotFoundError } from './sandbox-errors.ts';
import { cents } from './sandbox-metrics.ts';

/**
 * Write side of the sandbox platform. Each change runs in one transaction and is
 * idempotent: it sets state rather than adjusting it (a budget *to* 50, never *by* 10),
 * and negatives are keyed, so applying a change twice leaves what applying it once did.
 * History (search_term_daily) is never rewritten: a change affects the future, as on a
 * real platform.
 */
type Trx = Transaction<Database>;

/** Upper bounds well inside the columns' precision (numeric(14,2) money, numeric(8,2) percent). */
const MAX_MONEY = 1_000_000;
const MAX_ROAS_PCT = 100_000;

export async function applyChange(db: Kysely<Database>, accountId: string, change: PlatformChange): Promise<void> {
  await db.transaction().execute(async (trx) => {
    switch (change.kind) {
      case 'add_negative_keywords':
        return addNegativeKeywords(trx, accountId, change.campaign_id, change.keywords);
      case 'pause_keywords':
        return pauseKeywords(trx, accountId, change.keyword_ids);
      case 'set_campaign_budget':
        return setBudget(trx, accountId, change.campaign_id, change.daily_budget);
      case 'set_target_cpa':
        return setTarget(trx, accountId, change.campaign_id, 'maximize_conversions', { target_cpa: amount(change.target_cpa, 'target CPA', MAX_MONEY) });
      case 'set_target_roas':
        return setTarget(trx, accountId, change.campaign_id, 'maximize_conversion_value', {
          target_roas_pct: amount(change.target_roas_pct, 'target ROAS percent', MAX_ROAS_PCT),
        });
      default: {
        // Changes arrive as stored JSON: an unknown kind is rejected, not ignored.
        const unknown: never = change;
        throw new ChangeNotApplicableError(`unknown change kind '${(unknown as { kind?: unknown }).kind}'`);
      }
    }
  });
}

/** A positive amount rounded to cents; anything else is refused rather than clamped. */
function amount(value: number, label: string, max: number): number {
  const rounded = typeof value === 'number' && Number.isFinite(value) ? cents(value) : NaN;
  if (!(rounded > 0 && rounded <= max)) throw new ChangeNotApplicableError(`${label} must be between 0.01 and ${max}, not ${String(value)}`);
  return rounded;
}

async function loadCampaign(trx: Trx, accountId: string, campaignId: string) {
  const campaign = await trx
    .selectFrom('sandbox_campaigns')
    .select(['id', 'name', 'strategy_type', 'portfolio_id'])
    .where('account_id', '=', accountId)
    .where('id', '=', campaignId)
    // Serialises concurrent changes to one campaign, so a check and its update see the same row.
    .forUpdate()
    .executeTakeFirst();
  if (!campaign) throw new CampaignNotFoundError(campaignId);
  return campaign;
}

async function addNegativeKeywords(trx: Trx, accountId: string, campaignId: string, keywords: readonly { text: string; match_type: MatchType }[]) {
  await loadCampaign(trx, accountId, campaignId);
  const rows = new Map<string, { account_id: string; campaign_id: string; text: string; match_type: MatchType }>();
  for (const keyword of keywords) {
    const text = typeof keyword.text === 'string' ? normaliseNegativeKeyword(keyword.text) : '';
    if (text.length === 0 || text.length > 80) throw new ChangeNotApplicableError(`a negative keyword needs 1–80 characters, not '${String(keyword.text)}'`);
    if (!MATCH_TYPES.includes(keyword.match_type)) throw new ChangeNotApplicableError(`unknown match type '${String(keyword.match_type)}'`);
    rows.set(`${keyword.match_type}:${text}`, { account_id: accountId, campaign_id: campaignId, text, match_type: keyword.match_type });
  }
  if (rows.size === 0) return;
  await trx
    .insertInto('sandbox_negative_keywords')
    .values([...rows.values()])
    .onConflict((oc) => oc.columns(['account_id', 'campaign_id', 'text', 'match_type']).doNothing())
    .execute();
}

async function pauseKeywords(trx: Trx, accountId: string, keywordIds: readonly string[]) {
  const ids = [...new Set(keywordIds)];
  if (ids.length === 0) return;
  const found = await trx.selectFrom('sandbox_keywords').select('id').where('account_id', '=', accountId).where('id', 'in', ids).execute();
  const known = new Set(found.map((row) => row.id));
  const missing = ids.filter((id) => !known.has(id));
  // All or nothing: a change naming an unknown keyword changes no keyword.
  if (missing.length > 0) throw new KeywordNotFoundError(missing);
  await trx.updateTable('sandbox_keywords').set({ status: 'paused' }).where('account_id', '=', accountId).where('id', 'in', ids).execute();
}

async function setBudget(trx: Trx, accountId: string, campaignId: string, dailyBudget: number) {
  const budget = amount(dailyBudget, 'daily budget', MAX_MONEY);
  await loadCampaign(trx, accountId, campaignId);
  await trx.updateTable('sandbox_campaigns').set({ daily_budget: budget }).where('account_id', '=', accountId).where('id', '=', campaignId).execute();
}

/**
 * Sets a CPA or ROAS target where the campaign's bidding takes one. A campaign on a
 * portfolio has no target of its own: the portfolio's changes, moving every campaign on it.
 */
async function setTarget(
  trx: Trx,
  accountId: string,
  campaignId: string,
  requires: BiddingStrategyType,
  target: { target_cpa: number } | { target_roas_pct: number },
) {
  const campaign = await loadCampaign(trx, accountId, campaignId);
  const label = 'target_cpa' in target ? 'target CPA' : 'target ROAS';
  if (campaign.portfolio_id) {
    const portfolio = await trx
      .selectFrom('sandbox_portfolios')
      .select(['id', 'name', 'strategy_type'])
      .where('account_id', '=', accountId)
      .where('id', '=', campaign.portfolio_id)
      .forUpdate()
      .executeTakeFirstOrThrow();
    if (portfolio.strategy_type !== requires) {
      throw new ChangeNotApplicableError(`campaign ${campaignId} bids with portfolio "${portfolio.name}" (${portfolio.strategy_type}), which takes no ${label}`);
    }
    await trx.updateTable('sandbox_portfolios').set(target).where('account_id', '=', accountId).where('id', '=', portfolio.id).execute();
    return;
  }
  if (campaign.strategy_type !== requires) {
    throw new ChangeNotApplicableError(`campaign ${campaignId} ("${campaign.name}") bids with ${campaign.strategy_type}, which takes no ${label}`);
  }
  await trx.updateTable('sandbox_campaigns').set(target).where('account_id', '=', accountId).where('id', '=', campaignId).execute();
}
