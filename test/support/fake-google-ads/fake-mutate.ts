import type { FakeAccount } from './fake-account.ts';
import { googleAdsFailure, type FailureError } from './fake-failure.ts';

/** What mutate handling needs of the fake server: its API version, clock and scripted refusals. */
export interface MutateContext {
  readonly version: string;
  readonly maxTargetCpaMicros: number | null;
  readonly refusedResources: ReadonlyMap<string, { errorCode: Record<string, string>; message: string }>;
  stamp(): string;
}

/**
 * The per-service mutate endpoints the adapter uses. Each operation is checked first;
 * `validateOnly` stops there (an empty answer, or the errors), `partialFailure` applies the
 * valid operations and reports the rest in partialFailureError, and without it one bad
 * operation refuses the whole request and changes nothing, as the API does.
 */
export type MutateService = 'campaignCriteria' | 'adGroupCriteria' | 'campaignBudgets' | 'campaigns';

type Refusal = { errorCode: Record<string, string>; message: string };
/** A refused operation: its first error, and any more Google reports for the same operation (each with its own location). */
type Checked = { ok: true; apply: () => string } | ({ ok: false; more?: Refusal[] } & Refusal);

export type MutateOutcome = { kind: 'refused'; errors: FailureError[] } | { kind: 'answered'; response: Record<string, unknown> };

const KEYWORD_MATCH_TYPES = ['EXACT', 'PHRASE', 'BROAD'];
/** Amounts must be multiples of the currency's minimum unit: a cent, or a whole yen. */
const minimumUnitMicros = (currency: string) => (currency === 'JPY' ? 1_000_000 : 10_000);

export function applyMutate(fake: MutateContext, account: FakeAccount, service: MutateService, body: Record<string, unknown>): MutateOutcome {
  const operations = Array.isArray(body.operations) ? (body.operations as Record<string, unknown>[]) : [];
  if (operations.length === 0) return { kind: 'refused', errors: [{ errorCode: { requestError: 'OPERATIONS_REQUIRED' }, message: 'At least one operation is required.' }] };
  const checked = operations.map((op) => checkOperation(fake, account, service, op ?? {}));
  const errors: FailureError[] = [];
  checked.forEach((c, index) => {
    if (!c.ok) {
      for (const refusal of [c, ...(c.more ?? [])]) {
        errors.push({ errorCode: refusal.errorCode, message: refusal.message, location: { fieldPathElements: [{ fieldName: 'operations', index }] } });
      }
    }
  });
  if (body.validateOnly === true) return errors.length > 0 ? { kind: 'refused', errors } : { kind: 'answered', response: {} };
  if (errors.length > 0 && body.partialFailure !== true) return { kind: 'refused', errors };
  const results = checked.map((c) => (c.ok ? { resourceName: c.apply() } : {}));
  const response: Record<string, unknown> = { results };
  if (errors.length > 0) {
    response.partialFailureError = {
      code: 3,
      message: `Multiple errors in 'details'. First error: ${errors[0]!.message}, at operations[${errors[0]!.location!.fieldPathElements[0]!.index}]`,
      details: [googleAdsFailure(fake.version, errors)],
    };
  }
  return { kind: 'answered', response };
}

function idFrom(resourceName: unknown, account: FakeAccount, collection: string): string | null {
  const match = new RegExp(`^customers/${account.customerId}/${collection}/([0-9~]+)$`).exec(String(resourceName ?? ''));
  return match ? match[1]! : null;
}

const notFound = (what: string): Checked => ({ ok: false, errorCode: { mutateError: 'RESOURCE_NOT_FOUND' }, message: `The ${what} was not found.` });
const maskError = (): Checked => ({ ok: false, errorCode: { fieldMaskError: 'FIELD_NOT_FOUND' }, message: 'The field mask contained an invalid field.' });

function checkOperation(fake: MutateContext, account: FakeAccount, service: MutateService, op: Record<string, unknown>): Checked {
  const create = op.create as Record<string, unknown> | undefined;
  const update = op.update as Record<string, unknown> | undefined;
  const mask = typeof op.updateMask === 'string' ? op.updateMask.split(',').map((s) => s.trim()) : [];
  const scripted = fake.refusedResources.get(String(update?.resourceName ?? ''));
  if (scripted) return { ok: false, ...scripted };
  switch (service) {
    case 'campaignCriteria': {
      if (typeof op.remove === 'string') {
        const id = idFrom(op.remove, account, 'campaignCriteria');
        const removed = id ? account.negatives.find((n) => `${n.campaignId}~${n.criterionId}` === id && n.status !== 'REMOVED') : undefined;
        if (!removed) return notFound('campaign criterion');
        return {
          ok: true,
          apply: () => {
            removed.status = 'REMOVED';
            return String(op.remove);
          },
        };
      }
      if (!create) return { ok: false, errorCode: { requestError: 'UNKNOWN' }, message: 'Only create and remove operations are supported by this fake.' };
      const campaignId = idFrom(create.campaign, account, 'campaigns');
      const campaign = campaignId ? account.campaigns.get(campaignId) : undefined;
      if (!campaign || campaign.status === 'REMOVED') return notFound('campaign');
      const keyword = create.keyword as { text?: unknown; matchType?: unknown } | undefined;
      const text = typeof keyword?.text === 'string' ? keyword.text : '';
      if (create.negative !== true) return { ok: false, errorCode: { criterionError: 'CANNOT_ADD_CRITERIA_TYPE' }, message: 'Only negative keyword criteria can be added at campaign level here.' };
      if (text.length === 0 || text.length > 80) return { ok: false, errorCode: { criterionError: 'KEYWORD_TEXT_TOO_LONG' }, message: 'Keyword text is too long.' };
      // Google reports every problem of an operation, each as its own error on the same operation index.
      const problems: Refusal[] = [];
      if (text.split(/\s+/).length > 10) problems.push({ errorCode: { criterionError: 'KEYWORD_HAS_TOO_MANY_WORDS' }, message: 'Keyword has too many words.' });
      if (/[!@%,*]/.test(text)) problems.push({ errorCode: { criterionError: 'KEYWORD_HAS_INVALID_CHARS' }, message: 'Keyword text has invalid characters or symbols.' });
      if (problems.length > 0) return { ok: false, ...problems[0]!, more: problems.slice(1) };
      if (!KEYWORD_MATCH_TYPES.includes(String(keyword?.matchType))) return { ok: false, errorCode: { criterionError: 'INVALID_MATCH_TYPE' }, message: 'Invalid match type.' };
      const matchType = keyword!.matchType as 'EXACT' | 'PHRASE' | 'BROAD';
      // A removed criterion does not stand in the way: creating it again makes a new one.
      if (account.negatives.some((n) => n.campaignId === campaign.id && n.text === text && n.matchType === matchType && n.status !== 'REMOVED')) {
        return { ok: false, errorCode: { mutateError: 'RESOURCE_ALREADY_EXISTS' }, message: 'The resource already exists.' };
      }
      return {
        ok: true,
        apply: () => {
          const criterionId = String(700_000 + account.negatives.length + 1);
          account.negatives.push({ criterionId, campaignId: campaign.id, text, matchType });
          return `customers/${account.customerId}/campaignCriteria/${campaign.id}~${criterionId}`;
        },
      };
    }
    case 'adGroupCriteria': {
      const id = idFrom(update?.resourceName, account, 'adGroupCriteria');
      const keyword = id ? account.keywords.get(id.split('~')[1]!) : undefined;
      if (!keyword || keyword.status === 'REMOVED' || `${keyword.adGroupId}~${keyword.criterionId}` !== id) return notFound('ad group criterion');
      if (mask.join(',') !== 'status' || !['ENABLED', 'PAUSED'].includes(String(update!.status))) return maskError();
      return {
        ok: true,
        apply: () => {
          keyword.status = update!.status as 'PAUSED';
          return String(update!.resourceName);
        },
      };
    }
    case 'campaignBudgets': {
      const id = idFrom(update?.resourceName, account, 'campaignBudgets');
      const budget = id ? account.budgets.get(id) : undefined;
      if (!budget) return notFound('campaign budget');
      if (mask.join(',') !== 'amountMicros' || typeof update!.amountMicros !== 'string' || !/^[0-9]+$/.test(update!.amountMicros)) return maskError();
      const micros = Number(update!.amountMicros);
      if (micros % minimumUnitMicros(account.currencyCode) !== 0) {
        return { ok: false, errorCode: { campaignBudgetError: 'NON_MULTIPLE_OF_MINIMUM_CURRENCY_UNIT' }, message: 'The budget amount must be a multiple of the minimum currency unit.' };
      }
      if (micros <= 0) return { ok: false, errorCode: { campaignBudgetError: 'MONEY_AMOUNT_TOO_SMALL' }, message: 'The budget amount is too small.' };
      return {
        ok: true,
        apply: () => {
          const old = budget.amountMicros;
          budget.amountMicros = micros;
          account.changeEvents.push(apiChange(fake, account, 'CAMPAIGN_BUDGET', String(update!.resourceName), 'amountMicros', { campaignBudget: { amountMicros: String(old) } }, { campaignBudget: { amountMicros: String(micros) } }, ''));
          return String(update!.resourceName);
        },
      };
    }
    case 'campaigns': {
      const id = idFrom(update?.resourceName, account, 'campaigns');
      const campaign = id ? account.campaigns.get(id) : undefined;
      if (!campaign || campaign.status === 'REMOVED') return notFound('campaign');
      if (mask.length !== 1) return maskError();
      const [group, field] = mask[0]!.split('.') as [string, string];
      const FIELD_OF: Record<string, [string, string]> = {
        'maximizeConversions.targetCpaMicros': ['MAXIMIZE_CONVERSIONS', 'cpa'],
        'targetCpa.targetCpaMicros': ['TARGET_CPA', 'cpa'],
        'maximizeConversionValue.targetRoas': ['MAXIMIZE_CONVERSION_VALUE', 'roas'],
        'targetRoas.targetRoas': ['TARGET_ROAS', 'roas'],
      };
      const expected = FIELD_OF[mask[0]!];
      const value = (update![group] as Record<string, unknown> | undefined)?.[field];
      if (!expected || value === undefined) return maskError();
      if (campaign.biddingStrategyId || campaign.biddingStrategyType !== expected[0]) {
        return { ok: false, errorCode: { campaignError: 'INCOMPATIBLE_BIDDING_STRATEGY' }, message: `The campaign's bidding strategy does not have the field ${mask[0]}.` };
      }
      if (expected[1] === 'cpa') {
        if (typeof value !== 'string' || !/^[0-9]+$/.test(value)) return { ok: false, errorCode: { fieldError: 'INVALID_VALUE' }, message: 'The field value is invalid.' };
        if (fake.maxTargetCpaMicros !== null && Number(value) > fake.maxTargetCpaMicros) return { ok: false, errorCode: { rangeError: 'TOO_HIGH' }, message: 'Too high.' };
      } else if (typeof value !== 'number' || !(value > 0)) {
        return { ok: false, errorCode: { rangeError: 'TOO_LOW' }, message: 'Too low.' };
      }
      return {
        ok: true,
        apply: () => {
          const target = ((campaign as unknown as Record<string, Record<string, unknown> | undefined>)[group] ??= {});
          const old = target[field];
          target[field] = expected[1] === 'cpa' ? Number(value) : value;
          account.changeEvents.push(apiChange(fake, account, 'CAMPAIGN', String(update!.resourceName), mask[0]!, { campaign: { [group]: { [field]: old } } }, { campaign: { [group]: { [field]: value } } }, String(update!.resourceName)));
          return String(update!.resourceName);
        },
      };
    }
  }
}

function apiChange(fake: MutateContext, account: FakeAccount, type: string, resourceName: string, changedFields: string, oldResource: Record<string, unknown>, newResource: Record<string, unknown>, campaign: string) {
  return {
    changeDateTime: fake.stamp(),
    changeResourceType: type,
    changeResourceName: resourceName,
    clientType: 'GOOGLE_ADS_API',
    userEmail: 'adsagent-service@example.com',
    resourceChangeOperation: 'UPDATE' as const,
    changedFields,
    oldResource,
    newResource,
    campaign: campaign || `customers/${account.customerId}/campaigns/0`,
  };
}
