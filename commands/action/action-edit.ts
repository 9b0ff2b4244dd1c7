import { ValidationError } from '../../src/errors/common-errors.ts';
import type { ActionKind, EditableVersion } from '../../src/events/catalogue/index.ts';
import { MATCH_TYPES, normaliseNegativeKeyword, type MatchType } from '../../src/platform/ads-platform.ts';
import { clipText } from '../../src/text/clip-text.ts';

/**
 * What an approver may change on a queued action before approving it. The field named is the
 * field of the action's params it replaces: `keywords` for negative keywords (a subset of the
 * proposed ones, each with a match type), `daily_budget`, `target_cpa` or `target_roas_pct`
 * for budget and target changes. Exactly one field per edit.
 */
export interface ActionEdit {
  readonly keywords?: readonly { readonly text: string; readonly match_type: MatchType }[];
  readonly daily_budget?: number;
  readonly target_cpa?: number;
  readonly target_roas_pct?: number;
}

/** The one field of the params each editable kind lets an approver change; pause_keywords is not editable. */
export const EDITABLE_FIELD = {
  add_negative_keywords: 'keywords',
  set_campaign_budget: 'daily_budget',
  set_target_cpa: 'target_cpa',
  set_target_roas: 'target_roas_pct',
} as const satisfies Partial<Record<ActionKind, keyof ActionEdit>>;

export type EditableKind = keyof typeof EDITABLE_FIELD;

export const isEditableKind = (kind: string | null): kind is EditableKind => kind !== null && kind in EDITABLE_FIELD;

type Keyword = { readonly text: string; readonly match_type: MatchType };

/** Keywords are compared the way the propose tool stores them and the platforms compare them. */
const normalText = normaliseNegativeKeyword;

function editedKeywords(proposed: readonly Keyword[], edited: readonly Keyword[]): Keyword[] {
  const known = new Set(proposed.map((k) => normalText(k.text)));
  const errors = edited.flatMap((keyword, index) =>
    known.has(normalText(keyword.text))
      ? []
      : [
          {
            pointer: `/edit/keywords/${index}`,
            message:
              `"${clipText(keyword.text, 80)}" is not one of the proposed keywords: an edit can only drop proposed keywords or change their match type, never add one. ` +
              `Send a subset of the action's params.keywords (${[...known].map((t) => `"${t}"`).join(', ')}); to block another term, propose a new action.`,
          },
        ],
  );
  const seen = new Set<string>();
  edited.forEach((keyword, index) => {
    const text = normalText(keyword.text);
    if (seen.has(text)) errors.push({ pointer: `/edit/keywords/${index}`, message: `"${text}" is listed twice: send each kept keyword once, with the match type it should have.` });
    seen.add(text);
  });
  edited.forEach((keyword, index) => {
    if (!MATCH_TYPES.includes(keyword.match_type)) errors.push({ pointer: `/edit/keywords/${index}/match_type`, message: `match_type must be one of ${MATCH_TYPES.join(', ')}.` });
  });
  if (edited.length === 0) {
    errors.push({ pointer: '/edit/keywords', message: 'keep at least one keyword; to apply none of them, reject the action instead.' });
  }
  if (errors.length > 0) throw new ValidationError('The edit may only drop proposed keywords or change their match type.', errors);
  return edited.map((keyword) => ({ text: normalText(keyword.text), match_type: keyword.match_type }));
}

/**
 * The params an edit leads to, from the params the action has now. Refuses (ValidationError,
 * naming the field and what to send instead) an edit of a kind that cannot be edited, a field
 * that is not the kind's, an added keyword, or a value that is not a positive number. Pure.
 *
 * @example
 * ```ts
 * editedParams('set_campaign_budget', { campaign_id: 'c1', daily_budget: 100 }, { daily_budget: 110 });
 * // { campaign_id: 'c1', daily_budget: 110 }
 * ```
 */
export function editedParams(kind: ActionKind | null, params: Record<string, unknown>, edit: ActionEdit): Record<string, unknown> {
  if (!isEditableKind(kind)) {
    throw new ValidationError(`An action of kind ${String(kind)} cannot be edited; approve or reject it as proposed.`, [
      { pointer: '/edit', message: `only negative keyword, budget and target actions can be edited; send no edit for ${String(kind)}.` },
    ]);
  }
  const field = EDITABLE_FIELD[kind];
  const sent = Object.keys(edit).filter((key) => (edit as Record<string, unknown>)[key] !== undefined);
  const others = sent.filter((key) => key !== field);
  if (others.length > 0 || !sent.includes(field)) {
    throw new ValidationError(`An edit of a ${kind} action changes ${field} and nothing else.`, [
      { pointer: others.length > 0 ? `/edit/${others[0]}` : '/edit', message: `send {"${field}": …} as the edit of a ${kind} action.` },
    ]);
  }
  if (field === 'keywords') return { ...params, keywords: editedKeywords((params.keywords ?? []) as Keyword[], edit.keywords!) };
  const value = edit[field]!;
  if (typeof value !== 'number' || !Number.isFinite(value) || Math.round(value * PRECISION[field]) <= 0) {
    throw new ValidationError(`The edited ${field} must be a positive number.`, [{ pointer: `/edit/${field}`, message: `send a number above 0 as ${field}.` }]);
  }
  return { ...params, [field]: Math.round(value * PRECISION[field]) / PRECISION[field] };
}

/** Values are kept to the platform's precision (as the propose tools and the target endpoint do): money in cents, ROAS in tenths of a percent. */
const PRECISION = { daily_budget: 100, target_cpa: 100, target_roas_pct: 10 } as const;

/**
 * An edit after the policy looked at it (src/policy/edit-review.ts): what the approver sent,
 * and the edited action measured against the platform and classified again. The decider
 * records it as ActionEdited before the approval.
 */
export interface ReviewedEdit {
  readonly edit: ActionEdit;
  readonly after: EditableVersion;
}

/** The edited version's policy verdict forbids it: a blocked action is never applied, edited or not. */
export class EditBlockedByPolicyError extends ValidationError {
  constructor(reasons: readonly string[]) {
    super(`The policy blocks the edited action: ${reasons.join('; ')}. Send a smaller change, or approve the action as proposed.`, [
      { pointer: '/edit', message: `blocked by policy: ${reasons.join('; ')}` },
    ]);
  }
}
