/**
 * Characters that show as nothing, yet change what a text is or how it reads, so text from
 * the API could display as something it is not:
 * - bidirectional controls reorder the text around them (a keyword "\u202Eeerf" shows as
 *   "free"): LRE, RLE, PDF, LRO, RLO (U+202A–U+202E), LRI, RLI, FSI, PDI (U+2066–U+2069),
 *   LRM, RLM (U+200E, U+200F) and ALM (U+061C);
 * - zero-width and invisible characters make two texts that look alike differ (a negative
 *   keyword "fr\u200Bee" shows as "free" and never matches the search term free): zero-width
 *   space U+200B, soft hyphen U+00AD, Mongolian vowel separator U+180E, word joiner and the
 *   invisible operators U+2060–U+2064, zero-width no-break space U+FEFF;
 * - tag characters U+E0000–U+E007F spell invisible ASCII, a known way to hide instructions
 *   to a model inside a text a person approves.
 * Zero-width joiner and non-joiner (U+200C, U+200D) are left as they are: scripts such as
 * Persian and Hindi and emoji sequences need them.
 */
export const HIDDEN_CHARACTERS = /[\u00AD\u061C\u180E\u200B\u200E\u200F\u202A-\u202E\u2060-\u2064\u2066-\u2069\uFEFF\u{E0000}-\u{E007F}]/gu;

/** The marker shown in place of a hidden character, e.g. ⟨U+202E⟩. */
export function hiddenCharacterMarker(character: string): string {
  return `⟨U+${character.codePointAt(0)!.toString(16).toUpperCase().padStart(4, '0')}⟩`;
}

/** The text with each hidden character replaced by its visible marker. */
export function revealHiddenCharacters(text: string): string {
  return text.replace(HIDDEN_CHARACTERS, hiddenCharacterMarker);
}

/** The text cut into plain runs and hidden characters, in order (for rendering the markers distinctly). */
export function splitHiddenCharacters(text: string): { readonly text: string; readonly hidden: boolean }[] {
  const parts: { text: string; hidden: boolean }[] = [];
  let last = 0;
  for (const match of text.matchAll(HIDDEN_CHARACTERS)) {
    if (match.index > last) parts.push({ text: text.slice(last, match.index), hidden: false });
    parts.push({ text: match[0], hidden: true });
    last = match.index + match[0].length;
  }
  if (last < text.length) parts.push({ text: text.slice(last), hidden: false });
  return parts;
}
