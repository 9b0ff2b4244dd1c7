import type { Kysely } from 'kysely';
import { CopyCapableConnection } from './copy-capable-dialect.ts';

/** Column types {@link copyRows} writes; Postgres parses each from its text form, as for any insert. */
export const CopyColumnType = {
  Text: 'text',
  Boolean: 'boolean',
  Integer: 'integer',
  Bigint: 'bigint',
  Timestamptz: 'timestamptz',
  Jsonb: 'jsonb',
} as const;
export type CopyColumnType = (typeof CopyColumnType)[keyof typeof CopyColumnType];

/** A table's columns as `[name, type]`, in the order they are copied. */
export type CopyColumns<R> = readonly (readonly [keyof R & string, CopyColumnType])[];

/**
 * A string that cannot be written as UTF-8 without changing it (a lone surrogate): Buffer
 * encoding would silently store U+FFFD instead. Carries the SQLSTATE Postgres gives a
 * character it cannot store (22021), so callers treat it like Postgres refusing the row.
 */
export class UnencodableTextError extends Error {
  readonly code = '22021';

  constructor(column: string) {
    super(`column ${column} holds text that is not well-formed Unicode (a lone surrogate); it cannot be stored`);
    this.name = 'UnencodableTextError';
  }
}

export class CopyUnavailableError extends Error {
  constructor() {
    super('COPY needs a connection of CopyCapablePostgresDialect (src/db/copy-capable-dialect.ts); open the database with openDatabase');
    this.name = 'CopyUnavailableError';
  }
}

/** Backslash, newline, carriage return and tab: what COPY's text format must escape in a value. */
const COPY_SPECIAL = /[\\\n\r\t]/;
const COPY_SPECIAL_ALL = /[\\\n\r\t]/g;
const COPY_ESCAPES: Record<string, string> = { '\\': '\\\\', '\n': '\\n', '\r': '\\r', '\t': '\\t' };

function copyText(value: string, column: string): string {
  if (!value.isWellFormed()) throw new UnencodableTextError(column);
  return COPY_SPECIAL.test(value) ? value.replace(COPY_SPECIAL_ALL, (c) => COPY_ESCAPES[c]!) : value;
}

function copyValue(value: unknown, type: CopyColumnType, column: string): string {
  if (value === null || value === undefined) return '\\N';
  switch (type) {
    case CopyColumnType.Jsonb:
      return copyText(JSON.stringify(value), column);
    case CopyColumnType.Boolean:
      return value ? 't' : 'f';
    case CopyColumnType.Integer:
    case CopyColumnType.Bigint:
      // Postgres refuses anything but an integer (22P02), as it would a bad parameter.
      return String(value);
    default:
      return copyText(String(value), column);
  }
}

/**
 * The rows in COPY's text format: one line a row, tab between columns, `\N` for null.
 *
 * @example
 * encodeCopyText([{ id: 'a\tb', n: null }], [['id', 'text'], ['n', 'integer']]) // 'a\\tb\t\\N\n'
 */
export function encodeCopyText<R>(rows: readonly R[], columns: CopyColumns<R>): string {
  let data = '';
  for (const row of rows) {
    for (let i = 0; i < columns.length; i++) {
      const [name, type] = columns[i]!;
      data += (i === 0 ? '' : '\t') + copyValue(row[name], type, name);
    }
    data += '\n';
  }
  return data;
}

/**
 * Inserts rows with `COPY … FROM STDIN` in the caller's transaction. Postgres parses COPY's
 * text about twice as cheaply as the same rows unpacked from a JSON parameter
 * (json_to_recordset), which is what a projector catching up spends most of its Postgres
 * time on. Like a plain insert it fails as a whole on a conflict (23505): wrap it in a
 * savepoint where rows may exist.
 *
 * @example
 * await copyRows(trx, 'runs', [['id', 'text'], ['created_at', 'timestamptz']], rows);
 * @returns the rows copied.
 */
export async function copyRows<R>(trx: Kysely<any>, table: string, columns: CopyColumns<R>, rows: readonly R[]): Promise<number> {
  if (rows.length === 0) return 0;
  const data = encodeCopyText(rows, columns);
  const names = columns.map(([name]) => `"${name}"`).join(', ');
  return trx.getExecutor().provideConnection(async (connection) => {
    if (!(connection instanceof CopyCapableConnection)) throw new CopyUnavailableError();
    return connection.copyFrom(`copy "${table}" (${names}) from stdin`, data);
  });
}
