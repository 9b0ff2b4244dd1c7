import { sql, type Kysely } from 'kysely';
import type { Database } from '../../src/db/schema.ts';
import type { ActionKind } from '../../src/events/catalogue/index.ts';
import { BUDGET_AND_TARGET_KINDS, type PolicyContext } from '../../src/policy/classify-action.ts';
import type { AppliedChangeLookup } from '../../src/policy/policy-context.ts';

/**
 * The learning period's input from the approvals read model: the latest budget or target
 * change applied to a campaign since a time. The policy sees only the port (AppliedChangeLookup).
 *
 * @example
 * ```ts
 * const context = new PolicyContextReader(aggregates, new ApprovalsAppliedChangeLookup(db));
 * ```
 */
export class ApprovalsAppliedChangeLookup implements AppliedChangeLookup {
  private readonly db: Kysely<Database>;

  constructor(db: Kysely<Database>) {
    this.db = db;
  }

  async lastAppliedChange(accountId: string, campaignId: string, since: Date, exceptActionId: string | undefined): Promise<PolicyContext['recentChange']> {
    const row = await this.db
      .selectFrom('approvals')
      .select(['id', 'kind', 'updated_at'])
      .where('account_id', '=', accountId)
      .where('status', '=', 'applied')
      .where('kind', 'in', [...BUDGET_AND_TARGET_KINDS])
      .where(sql<string>`params->>'campaign_id'`, '=', campaignId)
      .where('updated_at', '>=', since)
      .$if(exceptActionId !== undefined, (qb) => qb.where('id', '!=', exceptActionId as string))
      .orderBy('updated_at', 'desc')
      .limit(1)
      .executeTakeFirst();
    return row ? { actionId: row.id, kind: row.kind as ActionKind, appliedAt: new Date(row.updated_at).toISOString() } : null;
  }
}
