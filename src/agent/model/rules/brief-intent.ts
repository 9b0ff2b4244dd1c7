/** What a brief asks for, as far as the rules agent can tell from its words. */
export const INTENTS = ['waste', 'keywords', 'budget', 'targets', 'health', 'question'] as const;
export type Intent = (typeof INTENTS)[number];

const PATTERNS: readonly [Intent, RegExp][] = [
  ['waste', /\b(wast\w*|negative\w*|irrelevant|search terms?|junk|spend without|zero.conversion|non.converting)\b/i],
  ['keywords', /\b(keywords?|pause\w*|underperform\w*|poor(ly)? perform\w*|worst)\b/i],
  ['budget', /\b(budgets?|limited by budget|spend (more|less)|scale|daily spend)\b/i],
  ['targets', /\b(target\s*(cpa|roas)|t(cpa|roas)|bidding|bid strateg\w*|targets?)\b/i],
  ['health', /\b(health|audit|overview|review|check.?up|how (is|are) .* doing|summar\w*)\b/i],
  ['question', /\b(how (did|do|does|are|is|was|were)|perform\w*|results?|last \d+ days|which|what)\b/i],
];

/** Every intent the brief mentions, in a stable order; `question` (performance figures) when none does. */
export function intentsOf(brief: string): Intent[] {
  const found = PATTERNS.filter(([, pattern]) => pattern.test(brief)).map(([intent]) => intent);
  // "keywords" inside "negative keywords" is the waste intent, not keyword pausing.
  const keywordsOnlyAsNegatives = /negative keywords?/i.test(brief) && !/\b(pause|underperform|poor|worst)/i.test(brief);
  const intents = found.filter((i) => !(i === 'keywords' && keywordsOnlyAsNegatives));
  return intents.length > 0 ? intents : ['question'];
}
