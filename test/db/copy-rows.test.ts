import { expect } from 'chai';
import { Kysely, PostgresDialect, sql } from 'kysely';
import pg from 'pg';
import { ApplyFailureKind, classifyApplyFailure } from '../../projections/runtime/apply-failure.ts';
import { openDatabase, type DatabaseHandle } from '../../src/db/database.ts';
import { copyRows, CopyUnavailableError, encodeCopyText, UnencodableTextError, type CopyColumns } from '../../src/db/copy-rows.ts';
import { dropIsolated, isolatedConfig } from '../support/isolation.ts';

interface Row {
  id: string;
  body: string | null;
  flag: boolean | null;
  small: number | null;
  big: number | null;
  at: string | null;
  doc: unknown;
}

const COLUMNS: CopyColumns<Row> = [
  ['id', 'text'], ['body', 'text'], ['flag', 'boolean'], ['small', 'integer'], ['big', 'bigint'], ['at', 'timestamptz'], ['doc', 'jsonb'],
];

/**
 * copyRows writes rows with COPY's text format, where a tab ends a column, a newline a row,
 * a backslash starts an escape and `\N` is null: every string from a client, the model or
 * the platform must come back exactly as it went in, whatever it holds.
 */
describe('copyRows: COPY … FROM STDIN of rows in the caller’s transaction', () => {
  const config = isolatedConfig('copy-rows');
  let handle: DatabaseHandle;
  let db: Kysely<any>;

  before(async () => {
    handle = await openDatabase(config.databaseUrl, config.databaseSchema);
    db = handle.db as unknown as Kysely<any>;
    await sql`create table copied (id text primary key, body text, flag boolean, small integer, big bigint, at timestamptz, doc jsonb)`.execute(db);
  });
  after(async () => {
    await handle.close();
    await dropIsolated(config);
  });
  beforeEach(async () => {
    await sql`truncate copied`.execute(db);
  });

  const stored = async () =>
    (await sql<Row & { at: Date | null }>`select * from copied order by id`.execute(db)).rows.map((row) => ({ ...row, at: row.at?.toISOString() ?? null }));

  it('stores every string exactly: delimiters, escapes, the end-of-data marker, the null marker, separators and long text', async () => {
    const hostile = ['a\tb', 'line\nbreak', 'cr\rlf\r\n', 'back\\slash', '\\.', '\\N', '\\t literally', '', '"quoted" \'single\'', '\u2028\u2029', '😀 emoji', 'x'.repeat(100_000)];
    const rows: Row[] = hostile.map((body, i) => ({
      id: `row-${String(i).padStart(2, '0')}`,
      body,
      flag: i % 2 === 0,
      small: i - 50,
      big: 2 ** 53 - 1 - i,
      at: new Date(Date.UTC(2026, 10, 26, 12, 0, i)).toISOString(),
      doc: { body, nested: [body, null, true, 1.5], [body]: 'as a key' },
    }));
    rows.push({ id: 'row-nulls', body: null, flag: null, small: null, big: null, at: null, doc: null });
    expect(await db.transaction().execute((trx) => copyRows(trx, 'copied', COLUMNS, rows))).to.equal(rows.length);
    expect(await stored()).to.deep.equal(rows);
  });

  it('refuses a lone surrogate as Postgres refuses a character it cannot store (22021, the event’s fault) and writes nothing', async () => {
    const rows: Row[] = [
      { id: 'fine', body: 'fine', flag: true, small: 1, big: 1, at: null, doc: null },
      { id: 'lone', body: 'half \ud800 a pair', flag: true, small: 1, big: 1, at: null, doc: null },
    ];
    const failure = await db.transaction().execute((trx) => copyRows(trx, 'copied', COLUMNS, rows)).catch((error: unknown) => error);
    expect(failure).to.be.instanceOf(UnencodableTextError);
    expect(classifyApplyFailure(failure)).to.equal(ApplyFailureKind.Deterministic);
    expect(await stored()).to.deep.equal([]);
  });

  it('fails as a whole when Postgres refuses one row (a NUL byte, a stored key), with an SQLSTATE the projector classifies', async () => {
    const row = (id: string, body: string): Row => ({ id, body, flag: null, small: null, big: null, at: null, doc: null });
    const nul = await db.transaction().execute((trx) => copyRows(trx, 'copied', COLUMNS, [row('a', 'ok'), row('b', 'nul \u0000 byte')])).catch((e: unknown) => e);
    expect((nul as { code?: string }).code).to.match(/^22/);
    expect(classifyApplyFailure(nul)).to.equal(ApplyFailureKind.Deterministic);
    expect(await stored()).to.deep.equal([]);

    await db.transaction().execute((trx) => copyRows(trx, 'copied', COLUMNS, [row('a', 'first')]));
    const duplicate = await db.transaction().execute((trx) => copyRows(trx, 'copied', COLUMNS, [row('c', 'new'), row('a', 'again')])).catch((e: unknown) => e);
    expect((duplicate as { code?: string }).code).to.equal('23505');
    expect((await stored()).map((r) => [r.id, r.body])).to.deep.equal([['a', 'first']]);
  });

  it('encodes one line a row, tab-separated, \\N for null, escapes only what COPY would misread', () => {
    expect(encodeCopyText([{ id: 'a\tb\\', body: null }], [['id', 'text'], ['body', 'text']])).to.equal('a\\tb\\\\\t\\N\n');
  });

  it('tells which dialect it needs when the connection cannot COPY', async () => {
    const plain = new Kysely<any>({ dialect: new PostgresDialect({ pool: new pg.Pool({ connectionString: config.databaseUrl, max: 1 }) }) });
    try {
      const failure = await plain.transaction().execute((trx) => copyRows(trx, 'copied', COLUMNS, [{ id: 'x', body: null, flag: null, small: null, big: null, at: null, doc: null }])).catch((e: unknown) => e);
      expect(failure).to.be.instanceOf(CopyUnavailableError);
    } finally {
      await plain.destroy();
    }
  });
});
