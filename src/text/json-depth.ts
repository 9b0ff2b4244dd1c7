/**
 * How deep a request body's (or a model's tool input's) arrays and objects may nest. The API's
 * bodies nest three levels at most (an approval's `edit.keywords[]`); every walk after the parse
 * (the hostile-text check, the schema, canonical JSON for the idempotency fingerprint or an
 * event's hash) recurses once per level, and a few kilobytes of `[` would otherwise overflow the
 * stack: a 500 for any key holder, or a run failed by the text a model was shown.
 */
export const MAX_JSON_DEPTH = 32;

const OPEN_ARRAY = 0x5b;
const OPEN_OBJECT = 0x7b;
const CLOSE_ARRAY = 0x5d;
const CLOSE_OBJECT = 0x7d;
const QUOTE = 0x22;
const BACKSLASH = 0x5c;

/**
 * The deepest nesting of arrays and objects in JSON text, read without parsing it (brackets
 * inside strings do not count). For text that is not JSON the figure is meaningless but
 * finite; the parse refuses such text anyway.
 *
 * @example
 * jsonNestingDepth('{"edit":{"keywords":["a"]}}'); // 3
 */
export function jsonNestingDepth(text: string): number {
  let depth = 0;
  let deepest = 0;
  let inString = false;
  for (let i = 0; i < text.length; i++) {
    const code = text.charCodeAt(i);
    if (inString) {
      if (code === BACKSLASH) i++;
      else if (code === QUOTE) inString = false;
    } else if (code === QUOTE) {
      inString = true;
    } else if (code === OPEN_ARRAY || code === OPEN_OBJECT) {
      if (++depth > deepest) deepest = depth;
    } else if (code === CLOSE_ARRAY || code === CLOSE_OBJECT) {
      depth--;
    }
  }
  return deepest;
}
