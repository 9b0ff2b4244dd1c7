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

/** What stands in for an array or object nested deeper than a cut allows. */
export const nestedTooDeep = (maxDepth: number): string => `[nested deeper than ${maxDepth} levels]`;

/**
 * A copy of a JSON-shaped value (parsed JSON: plain objects, arrays, primitives) in which
 * every array or object below `maxDepth` levels is replaced by {@link nestedTooDeep}'s text.
 * Iterative, so a value nested 100,000 levels deep (a model's function call, say) is cut
 * without a stack overflow; every recursive walk after it (hostile text, finite numbers,
 * JSON.stringify, which fails near 5,000 levels) then stays shallow.
 *
 * @example
 * cutDeeperThan({ a: [[1]] }, 2); // { a: ['[nested deeper than 2 levels]'] }
 */
export function cutDeeperThan(value: unknown, maxDepth: number): unknown {
  if (typeof value !== 'object' || value === null) return value;
  const copyOf = (source: object): Record<string, unknown> | unknown[] => (Array.isArray(source) ? [] : {});
  const root = copyOf(value);
  const pending: { source: object; target: Record<string, unknown> | unknown[]; depth: number }[] = [{ source: value, target: root, depth: 1 }];
  while (pending.length > 0) {
    const { source, target, depth } = pending.pop()!;
    for (const [key, item] of Object.entries(source)) {
      let copied: unknown = item;
      if (typeof item === 'object' && item !== null) {
        if (depth >= maxDepth) copied = nestedTooDeep(maxDepth);
        else {
          copied = copyOf(item);
          pending.push({ source: item, target: copied as Record<string, unknown> | unknown[], depth: depth + 1 });
        }
      }
      // defineProperty: a key "__proto__" (JSON.parse makes it an own property) stays a key.
      Object.defineProperty(target, key, { value: copied, enumerable: true, writable: true, configurable: true });
    }
  }
  return root;
}
