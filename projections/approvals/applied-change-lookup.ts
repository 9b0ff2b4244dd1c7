import { sql, type Kysely } from 'kysely';
import type { Database } from '../../src/db/schema.ts';
import type { ActionKind } from '../../src/events/catalogue/index.ts';
import { BUDGET_AND_TARGET_KINDS, type PolicyContext } from '../../src/policy/classify-action.ts';
import type { AppliedChangeLookup, CampaignTies } from '../../src/policy/policy-context.ts';

/**
 * Which changes count for the learning period:
 * - `applied`: changes recorded as applied (a proposal, an edit: what the policy shows people).
 * - `decided`: also changes on their way live: being applied (`applying`), and changes decided
 *   to go live (`auto_applied`, `approved`) before the action being classified was proposed.
 *   The apply worker's last look before a change goes live: two changes of one campaign that
 *   are both still pending (one batch, a worker that was down) would otherwise each see no
 *   applied change and both go live. Only earlier decisions count, so of two pending changes
 *   the first goes live and the later one is returned, whichever the worker handles first.
 */
export type LearningPeriodCount = 'applied' | 'decided';

/** Larger than any stream sequence: the action being classified is not in the read model, so every pending change counts. */
const NO_SEQ_BOUND = '9223372036854775807';

/**
 * The learning period's input from the approvals read model: the latest budget or target
 * change applied to a campaign since a time. The policy sees only the port (AppliedChangeLookup).
 *
 * @example
 * ```ts
 * const context = new PolicyContextReader(aggregates, new ApprovalsAppliedChangeLookup(db));
 * const atApply = new PolicyContextReader(aggregates, new ApprovalsAppliedChangeLookup(db, { count: 'decided' }));
 * ```
 */
export class ApprovalsAppliedChangeLookup implements AppliedChangeLookup {
  private readonly db: Kysely<Database>;
  private readonly count: LearningPeriodCount;

  constructor(db: Kysely<Database>, options: { readonly count?: LearningPeriodCount } = {}) {
    this.db = db;
    this.count = options.count ?? 'applied';
  }

  /**
   * `appliedAt` is when the change was applied, or, for a change not live yet (`decided`), when
   * it was last decided on (proposed, approved, claimed): the read model's `updated_at`.
   */
  async lastAppliedChange(accountId: string, campaign: CampaignTies, since: Date, exceptActionId: string | undefined): Promise<PolicyContext['recentChange']> {
    const { campaignId, portfolioId, sharedBudgetId } = campaign;
    const row = await this.db
      .selectFrom('approvals')
      .select(['id', 'kind', 'updated_at', 'portfolio_id', 'shared_budget_id', sql<string | null>`params->>'campaign_id'`.as('campaign_id')])
      .where('account_id', '=', accountId)
      .where(this.count === 'applied' ? sql<boolean>`status = 'applied'` : decidedBefore(exceptActionId))
      .where('kind', 'in', [...BUDGET_AND_TARGET_KINDS])
      // The campaign's own changes, and those made through a setting it shares with others.
      .where((eb) =>
        eb.or([
          eb(sql<string>`params->>'campaign_id'`, '=', campaignId),
          ...(portfolioId !== null ? [eb('portfolio_id', '=', portfolioId)] : []),
          ...(sharedBudgetId !== null ? [eb('shared_budget_id', '=', sharedBudgetId)] : []),
        ]),
      )
      .where('updated_at', '>=', since)
      .$if(exceptActionId !== undefined, (qb) => qb.where('id', '!=', exceptActionId as string))
      .orderBy('updated_at', 'desc')
      .limit(1)
      .executeTakeFirst();
    if (!row) return null;
    const recent = { actionId: row.id, kind: row.kind as ActionKind, appliedAt: new Date(row.updated_at).toISOString() };
    if (row.campaign_id === campaignId) return recent;
    return { ...recent, through: row.portfolio_id !== null && row.portfolio_id === portfolioId ? { portfolioId: row.portfolio_id } : { sharedBudgetId: row.shared_budget_id ?? '' } };
  }
}

/**
 * Applied or being applied, or decided to go live (auto-applied when proposed, approved) at a
 * stream sequence before the classified action's proposal. `last_seq` of an `auto_applied` or
 * `approved` row is the event that decided it; stream sequences order decisions across actions.
 */
function decidedBefore(actionId: string | undefined) {
  const bound = sql`coalesce((select mine.proposed_seq from approvals mine where mine.id = ${actionId ?? null}), ${NO_SEQ_BOUND}::bigint)`;
  return sql<boolean>`(status in ('applying', 'applied') or (status in ('auto_applied', 'approved') and last_seq < ${bound}))`;
}
