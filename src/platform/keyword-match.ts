import type { MatchType } from './ads-platform.ts';

/** Lower-cased words of a keyword or search term, punctuation dropped. */
export function tokensOf(text: string): string[] {
  return text.toLowerCase().split(/[^a-z0-9äöüß]+/).filter(Boolean);
}

/**
 * Whether a negative keyword blocks a search term, after the platforms' match types:
 * exact = the same words in the same order; phrase = the words appear together, in order,
 * inside the term; broad = every word appears somewhere in the term.
 *
 * @example
 * negativeBlocks({ text: 'second hand', match_type: 'phrase' }, 'second hand tent') // true
 * negativeBlocks({ text: 'free', match_type: 'phrase' }, 'gluten freeze')          // false
 */
export function negativeBlocks(keyword: { text: string; match_type: MatchType }, searchTerm: string): boolean {
  const words = tokensOf(keyword.text);
  const term = tokensOf(searchTerm);
  if (words.length === 0) return false;
  switch (keyword.match_type) {
    case 'exact':
      return words.length === term.length && words.every((w, i) => w === term[i]);
    case 'phrase':
      return term.some((_, start) => words.every((w, i) => term[start + i] === w));
    case 'broad':
      return words.every((w) => term.includes(w));
  }
}
