/**
 * A small, deterministic YAML 1.2 emitter for plain JSON values (objects, arrays, strings,
 * numbers, booleans, null): enough for generated documents such as docs/asyncapi.yaml,
 * without a YAML dependency. Keys keep their insertion order. Strings that could be read as
 * anything but the same string are written as JSON strings, which are valid YAML
 * double-quoted scalars; multi-line strings become literal block scalars.
 */
export function toYaml(value: unknown, header: readonly string[] = []): string {
  const lines = [...header.map((line) => (line === '' ? '#' : `# ${line}`)), ...block(value, 0)];
  return `${lines.join('\n')}\n`;
}

const RESERVED = /^(true|false|null|yes|no|on|off|y|n|~)$/i;
const PLAIN = /^[A-Za-z_$][A-Za-z0-9_$ .,()/'+-]*$/;

function isPlainSafe(text: string): boolean {
  return PLAIN.test(text) && !/\s$/.test(text) && !RESERVED.test(text) && !text.includes('  ');
}

function scalar(value: unknown): string {
  if (value === null) return 'null';
  if (typeof value === 'boolean') return String(value);
  if (typeof value === 'number') {
    if (!Number.isFinite(value)) throw new TypeError(`cannot write ${value} as YAML`);
    return String(value);
  }
  if (typeof value === 'string') return isPlainSafe(value) ? value : JSON.stringify(value);
  throw new TypeError(`not a scalar: ${typeof value}`);
}

function key(name: string): string {
  return isPlainSafe(name) && !name.includes(' ') ? name : JSON.stringify(name);
}

/** A multi-line string that a literal block scalar keeps byte for byte. */
function literalBlock(text: string): boolean {
  return (
    text.includes('\n') &&
    !text.endsWith('\n') &&
    !/^[ \t]/.test(text) &&
    // eslint-disable-next-line no-control-regex
    !/[\t\r\u0000-\u0008\u000b-\u001f\u007f]/.test(text) &&
    text.split('\n').every((line) => !/[ ]$/.test(line))
  );
}

function isContainer(value: unknown): value is Record<string, unknown> | unknown[] {
  return typeof value === 'object' && value !== null;
}

function isEmpty(value: Record<string, unknown> | unknown[]): boolean {
  return Array.isArray(value) ? value.length === 0 : Object.keys(value).length === 0;
}

function emptyOf(value: Record<string, unknown> | unknown[]): string {
  return Array.isArray(value) ? '[]' : '{}';
}

/** Lines of a value written as a block at `indent` spaces. */
function block(value: unknown, indent: number): string[] {
  const pad = ' '.repeat(indent);
  if (!isContainer(value)) return [`${pad}${scalar(value)}`];
  if (isEmpty(value)) return [`${pad}${emptyOf(value)}`];
  const lines: string[] = [];
  if (Array.isArray(value)) {
    for (const item of value) {
      if (isContainer(item) && !isEmpty(item)) {
        const nested = block(item, indent + 2);
        lines.push(`${pad}- ${nested[0]!.slice(indent + 2)}`, ...nested.slice(1));
      } else if (typeof item === 'string' && literalBlock(item)) {
        lines.push(`${pad}- |-`, ...item.split('\n').map((line) => (line === '' ? '' : `${pad}  ${line}`)));
      } else {
        lines.push(`${pad}- ${isContainer(item) ? emptyOf(item) : scalar(item)}`);
      }
    }
    return lines;
  }
  for (const [name, item] of Object.entries(value)) {
    if (item === undefined) continue;
    if (isContainer(item) && !isEmpty(item)) {
      lines.push(`${pad}${key(name)}:`, ...block(item, indent + 2));
    } else if (typeof item === 'string' && literalBlock(item)) {
      lines.push(`${pad}${key(name)}: |-`, ...item.split('\n').map((line) => (line === '' ? '' : `${pad}  ${line}`)));
    } else {
      lines.push(`${pad}${key(name)}: ${isContainer(item) ? emptyOf(item) : scalar(item)}`);
    }
  }
  return lines;
}
