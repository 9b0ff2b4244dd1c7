/**
 * Bidirectional control characters: invisible, yet they reorder the text around them, so
 * text from the API could display as something it is not (a keyword "\u202Eeerf" shows as
 * "free"). LRE, RLE, PDF, LRO, RLO (U+202A–U+202E), LRI, RLI, FSI, PDI (U+2066–U+2069),
 * LRM, RLM (U+200E, U+200F) and ALM (U+061C).
 */
export const BIDI_CONTROLS = /[\u061C\u200E\u200F\u202A-\u202E\u2066-\u2069]/g;

/** The marker shown in place of a control character, e.g. ⟨U+202E⟩. */
export function controlMarker(character: string): string {
  return `⟨U+${character.codePointAt(0)!.toString(16).toUpperCase().padStart(4, '0')}⟩`;
}

/** The text with each bidirectional control character replaced by its visible marker. */
export function revealBidiControls(text: string): string {
  return text.replace(BIDI_CONTROLS, controlMarker);
}

/** The text cut into plain runs and control characters, in order (for rendering the markers distinctly). */
export function splitBidiControls(text: string): { readonly text: string; readonly control: boolean }[] {
  const parts: { text: string; control: boolean }[] = [];
  let last = 0;
  for (const match of text.matchAll(BIDI_CONTROLS)) {
    if (match.index > last) parts.push({ text: text.slice(last, match.index), control: false });
    parts.push({ text: match[0], control: true });
    last = match.index + match[0].length;
  }
  if (last < text.length) parts.push({ text: text.slice(last), control: false });
  return parts;
}
