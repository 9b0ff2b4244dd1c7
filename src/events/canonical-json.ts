import canonicalize from 'canonicalize';

/**
 * Deeper than any event (the API's bodies nest 3 levels, tool inputs are flattened past 32):
 * a value nested deeper is refused (TypeError), by every writer and every reader alike. The
 * package's walk recurses once per level, so past a few thousand levels its verdict would
 * depend on how deep the caller's stack already is: one reader could believe an event another
 * refuses.
 */
const MAX_CANONICAL_DEPTH = 64;

/** Thrown inside the fast walk to hand the whole value to the package. */
const FALLBACK = Symbol('canonical-json fallback');

const tooDeep = () => new TypeError(`value nested deeper than ${MAX_CANONICAL_DEPTH} levels`);

/**
 * RFC 8785 canonical JSON, byte for byte what the `canonicalize` package returns and with
 * the same refusals (NaN, Infinity, unpaired surrogates, cycles). Every event hash is taken
 * over this text and readers recompute one for each event they believe by its chain, so it
 * sits on the projectors' hot path. The fast walk copies the value with its keys sorted and
 * lets the engine's JSON.stringify (whose output for strings and numbers is what RFC 8785
 * prescribes) write it in one go: about three times faster than the package's string joins
 * at every level. Anything the copy could not carry faithfully (an integer-like key, which
 * objects always enumerate first; a `toJSON`; `undefined` in an array; a function, symbol or
 * bigint) is handed to the package instead, so the two never disagree. A value nested deeper
 * than {@link MAX_CANONICAL_DEPTH} is refused (TypeError), the same on every stack.
 *
 * @example
 * canonicalJson({ b: 1, a: [true, 'x'] }); // '{"a":[true,"x"],"b":1}'
 */
export function canonicalJson(value: unknown): string | undefined {
  // What the store writes is already in canonical order (see inCanonicalOrder): then the
  // engine writes it as it is, without a sorted copy.
  if (isInCanonicalOrder(value, 0)) return JSON.stringify(value);
  let copy: unknown;
  try {
    copy = sortedCopy(value, 0);
  } catch (error) {
    if (error !== FALLBACK) throw error;
    // The package recurses: only a value it can walk in a bounded stack is handed to it.
    assertNestedWithin(value, MAX_CANONICAL_DEPTH);
    return canonicalize(value);
  }
  return JSON.stringify(copy);
}

/**
 * @throws TypeError when arrays and objects in `value` nest deeper than `maxDepth` (walked
 * without recursion). Depth is counted along each path, so an object shared by two paths is
 * measured on the deeper one too; a cycle (an object on its own path) is the package's to refuse.
 */
function assertNestedWithin(value: unknown, maxDepth: number): void {
  const onPath = new Set<object>();
  // 'leave' entries take a node off the path once its children were walked.
  const pending: ({ node: unknown; depth: number } | { leave: object })[] = [{ node: value, depth: 0 }];
  while (pending.length > 0) {
    const next = pending.pop()!;
    if ('leave' in next) {
      onPath.delete(next.leave);
      continue;
    }
    const { node, depth } = next;
    if (typeof node !== 'object' || node === null || onPath.has(node)) continue;
    if (depth >= maxDepth) throw tooDeep();
    onPath.add(node);
    pending.push({ leave: node });
    for (const child of Array.isArray(node) ? node : Object.values(node)) pending.push({ node: child, depth: depth + 1 });
  }
}

/**
 * A deep copy of a JSON value whose objects list their members in canonical order, so that
 * JSON.stringify of it is its canonical JSON and so are the bytes a writer stores (a reader
 * then canonicalizes it without sorting: see {@link canonicalJson}). A value the fast walk
 * cannot copy faithfully (see above) is returned as it is: the order is a speed-up, never
 * a meaning. Refuses what canonicalJson refuses.
 */
export function inCanonicalOrder<T>(value: T): T {
  try {
    return sortedCopy(value, 0) as T;
  } catch (error) {
    if (error === FALLBACK) return value;
    throw error;
  }
}

/**
 * Whether JSON.stringify(value) is already its canonical JSON: every object enumerates its
 * members in strictly increasing UTF-16 order (JSON.stringify writes them in that order,
 * integer-like keys included), and nothing needs the package or a refusal (a lone surrogate,
 * NaN, Infinity, undefined, toJSON, a function, a value nested too deep). It allocates
 * nothing but each object's key list.
 */
function isInCanonicalOrder(value: unknown, depth: number): boolean {
  switch (typeof value) {
    case 'string':
      return isWellFormed(value);
    case 'number':
      return Number.isFinite(value);
    case 'boolean':
      return true;
    case 'object':
      break;
    default:
      return false;
  }
  if (value === null) return true;
  if (depth >= MAX_CANONICAL_DEPTH || typeof (value as { toJSON?: unknown }).toJSON === 'function') return false;
  if (Array.isArray(value)) {
    for (let i = 0; i < value.length; i++) {
      if (!isInCanonicalOrder(value[i], depth + 1)) return false;
    }
    return true;
  }
  const object = value as Record<string, unknown>;
  const keys = Object.keys(object);
  let previous: string | undefined;
  for (let i = 0; i < keys.length; i++) {
    const key = keys[i]!;
    if ((previous !== undefined && !(previous < key)) || !isWellFormed(key) || !isInCanonicalOrder(object[key], depth + 1)) return false;
    previous = key;
  }
  return true;
}

function sortedCopy(value: unknown, depth: number): unknown {
  switch (typeof value) {
    case 'string':
      if (!isWellFormed(value)) throw new Error('Lone surrogate is not allowed');
      return value;
    case 'number':
      if (Number.isNaN(value)) throw new Error('NaN is not allowed');
      if (!Number.isFinite(value)) throw new Error('Infinity is not allowed');
      return value;
    case 'boolean':
      return value;
    case 'object':
      break;
    default:
      throw FALLBACK;
  }
  if (value === null) return null;
  // Past the bound the package decides (a cycle is its to refuse), after the bounded walk of canonicalJson.
  if (depth >= MAX_CANONICAL_DEPTH || typeof (value as { toJSON?: unknown }).toJSON === 'function') throw FALLBACK;
  if (Array.isArray(value)) {
    const copy = new Array<unknown>(value.length);
    for (let i = 0; i < value.length; i++) {
      if (value[i] === undefined) throw FALLBACK;
      copy[i] = sortedCopy(value[i], depth + 1);
    }
    return copy;
  }
  const object = value as Record<string, unknown>;
  const copy: Record<string, unknown> = {};
  for (const key of Object.keys(object).sort()) {
    if (!isWellFormed(key)) throw new Error('Lone surrogate is not allowed');
    if (isIntegerLike(key)) throw FALLBACK;
    const item = object[key];
    if (item !== undefined) copy[key] = sortedCopy(item, depth + 1);
  }
  return copy;
}

/** Keys an object enumerates before all others, whatever order they were added in. */
function isIntegerLike(key: string): boolean {
  const first = key.charCodeAt(0);
  return first >= 0x30 && first <= 0x39 && /^(?:0|[1-9][0-9]*)$/.test(key);
}

/** String.prototype.isWellFormed (Node 20+; the project's TypeScript lib predates it): no unpaired surrogate. */
function isWellFormed(text: string): boolean {
  return (text as string & { isWellFormed(): boolean }).isWellFormed();
}
