/**
 * `text` cut to at most `max` UTF-16 code units without splitting a surrogate pair: when the
 * cut would fall between the two halves of one character (an emoji, say), the whole
 * character is left out. A bare `slice(0, max)` would leave a lone high surrogate, which the
 * event schema, Postgres and every reader refuse (src/text/hostile-text.ts), so one emoji
 * at the wrong offset of a model's answer or a campaign name would make its event unwritable.
 *
 * @example
 * clipText('ab😀', 3); // 'ab' (not 'ab\uD83D')
 * clipText('ab😀', 4); // 'ab😀'
 */
export function clipText(text: string, max: number): string {
  if (text.length <= max) return text;
  if (max <= 0) return '';
  const last = text.charCodeAt(max - 1);
  return text.slice(0, last >= 0xd800 && last <= 0xdbff ? max - 1 : max);
}
