import type { MatchType } from './ads-platform.ts';

/**
 * Runs of letters, digits and combining marks of any script. Marks belong to the word so
 * that Devanagari, Thai or decomposed accents are not cut into pieces or dropped.
 */
const WORD = /[\p{L}\p{N}\p{M}]+/gu;

/**
 * Words of a keyword or search term, in any script: Unicode NFKC (full-width and
 * compatibility forms fold to their plain letters, e.g. "ＦＲＥＥ" → "free"), lower-cased,
 * punctuation and symbols dropped. A text of only punctuation or emoji has no words.
 */
export function tokensOf(text: string): string[] {
  // Lower-casing can leave a string that is no longer NFKC (e.g. "İ"); normalise again.
  return text.normalize('NFKC').toLowerCase().normalize('NFKC').match(WORD) ?? [];
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
