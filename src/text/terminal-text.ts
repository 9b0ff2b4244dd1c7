import { clipText } from './clip-text.ts';

// `u` flag off on purpose: a lone surrogate must be matched as the code unit it is.
const NOT_PRINTABLE = /[\u0000-\u0008\u000B-\u001F\u007F-\u009F]|[\uD800-\uDBFF](?![\uDC00-\uDFFF])|(?<![\uD800-\uDBFF])[\uDC00-\uDFFF]/g;

/**
 * Text from the event log (a subject, a claimed event type, a refusal's detail) made safe to
 * print on a terminal: C0 controls but tab and newline, DEL and the C1 controls (ESC and CSI
 * start escape sequences that retitle a window, clear the screen or hide what follows) and
 * unpaired surrogates become U+FFFD, and it is cut to `max` characters. Anyone who can
 * publish to a subject chooses these bytes.
 *
 * @example
 * terminalText('x\u001b]0;PWNED\u0007'); // 'x\uFFFD]0;PWNED\uFFFD'
 */
export function terminalText(text: string, max = 500): string {
  const clipped = clipText(text, max);
  const printable = clipped.replace(NOT_PRINTABLE, '\uFFFD');
  return clipped.length < text.length ? `${printable}…` : printable;
}
