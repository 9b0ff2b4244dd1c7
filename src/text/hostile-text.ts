/**
 * Characters no string of this service may carry: U+0000 and the other C0 controls except
 * tab, newline and carriage return (Postgres `text` refuses U+0000 with 22021, `jsonb`
 * refuses `\u0000` with 22P05, terminals and logs misrender the rest), and UTF-16
 * surrogates that are not part of a pair (they have no UTF-8 encoding: Postgres refuses
 * them with 22P02/22P05 and `TextEncoder` silently turns them into U+FFFD, which would
 * change an event's hash between writer and reader).
 */
// `u` flag off on purpose: with it a regex sees code points and could not find a lone surrogate.
const HOSTILE = /[\u0000-\u0008\u000B\u000C\u000E-\u001F]|[\uD800-\uDBFF](?![\uDC00-\uDFFF])|(?<![\uD800-\uDBFF])[\uDC00-\uDFFF]/;
const HOSTILE_GLOBAL = new RegExp(HOSTILE.source, 'g');
/** A plain character class is several times faster than HOSTILE's look-arounds; paired surrogates (emoji) also match it. */
const MAYBE_HOSTILE = /[\u0000-\u0008\u000B\u000C\u000E-\u001F\uD800-\uDFFF]/;

function isHostile(text: string): boolean {
  return MAYBE_HOSTILE.test(text) && HOSTILE.test(text);
}

/** What kind of bad character a string holds; closed set, used in messages and quarantine codes. */
export const HostileCharacter = {
  Nul: 'nul',
  Control: 'control',
  LoneSurrogate: 'lone-surrogate',
} as const;
export type HostileCharacter = (typeof HostileCharacter)[keyof typeof HostileCharacter];

/** One bad string inside a JSON value: where it is (RFC 6901 pointer) and what it holds. */
export interface HostileTextFinding {
  readonly pointer: string;
  readonly character: HostileCharacter;
  /** True when the bad character is in an object key rather than a value. */
  readonly inKey: boolean;
}

/** The first bad character of a string, or null when the string is clean. */
export function hostileCharacterIn(text: string): HostileCharacter | null {
  if (!MAYBE_HOSTILE.test(text)) return null;
  const match = HOSTILE.exec(text);
  if (!match) return null;
  const code = match[0].charCodeAt(0);
  if (code === 0) return HostileCharacter.Nul;
  return code < 0x20 ? HostileCharacter.Control : HostileCharacter.LoneSurrogate;
}

export function isCleanText(text: string): boolean {
  return !isHostile(text);
}

/** Replaces every bad character with U+FFFD, so text from the model or a platform can be recorded. */
export function sanitizeText(text: string): string {
  return isHostile(text) ? text.replace(HOSTILE_GLOBAL, '\uFFFD') : text;
}

export function escapePointerToken(token: string): string {
  return token.replace(/~/g, '~0').replace(/\//g, '~1');
}

/**
 * Whether any string (or key) of a JSON-shaped value is bad. The fast check the validator
 * runs on every append and every read: no pointers built, no arrays allocated.
 */
export function hasHostileText(value: unknown): boolean {
  if (typeof value === 'string') return isHostile(value);
  if (typeof value !== 'object' || value === null) return false;
  if (Array.isArray(value)) {
    for (const item of value) if (hasHostileText(item)) return true;
    return false;
  }
  for (const key in value) {
    if (!Object.hasOwn(value, key)) continue;
    if (isHostile(key) || hasHostileText((value as Record<string, unknown>)[key])) return true;
  }
  return false;
}

/**
 * Every bad string in a JSON-shaped value, keys included, in document order. Stops after
 * `limit` findings so a hostile body of a million bad strings costs no more than one walk.
 */
export function findHostileText(value: unknown, limit = 20): HostileTextFinding[] {
  const findings: HostileTextFinding[] = [];
  if (!hasHostileText(value)) return findings;
  const visit = (node: unknown, pointer: string): void => {
    if (findings.length >= limit) return;
    if (typeof node === 'string') {
      const character = hostileCharacterIn(node);
      if (character) findings.push({ pointer: pointer || '/', character, inKey: false });
      return;
    }
    if (typeof node !== 'object' || node === null) return;
    if (Array.isArray(node)) {
      node.forEach((item, index) => visit(item, `${pointer}/${index}`));
      return;
    }
    for (const [key, item] of Object.entries(node)) {
      const childPointer = `${pointer}/${escapePointerToken(sanitizeText(key))}`;
      const character = hostileCharacterIn(key);
      if (character && findings.length < limit) findings.push({ pointer: childPointer, character, inKey: true });
      visit(item, childPointer);
    }
  };
  visit(value, '');
  return findings;
}

/** A deep copy of a JSON-shaped value with every string (and key) sanitised; the same object when already clean. */
export function sanitizeDeep<T>(value: T): T {
  if (!hasHostileText(value)) return value;
  const copy = (node: unknown): unknown => {
    if (typeof node === 'string') return sanitizeText(node);
    if (typeof node !== 'object' || node === null) return node;
    if (Array.isArray(node)) return node.map(copy);
    return Object.fromEntries(Object.entries(node).map(([key, item]) => [sanitizeText(key), copy(item)]));
  };
  return copy(value) as T;
}

export function describeHostileCharacter(character: HostileCharacter): string {
  switch (character) {
    case HostileCharacter.Nul:
      return 'contains U+0000';
    case HostileCharacter.Control:
      return 'contains a control character (only tab, newline and carriage return are allowed)';
    case HostileCharacter.LoneSurrogate:
      return 'contains an unpaired UTF-16 surrogate';
  }
}
