/**
 * A small GAQL parser: SELECT fields FROM resource [WHERE cond AND cond ...]
 * [ORDER BY field [ASC|DESC], ...] [LIMIT n] [PARAMETERS ...]. Conditions: = != > >= < <=
 * IN (...) NOT IN (...) BETWEEN a AND b, LIKE, IS NULL / IS NOT NULL, and DURING LAST_30_DAYS-style
 * ranges. Enough of the grammar (developers.google.com/google-ads/api/docs/query/grammar)
 * that the adapter's queries are parsed as Google parses them; anything else is a query error.
 */
export type Literal = string | number;

export type Condition =
  | { readonly field: string; readonly op: '=' | '!=' | '>' | '>=' | '<' | '<=' | 'LIKE' | 'NOT LIKE'; readonly value: Literal }
  | { readonly field: string; readonly op: 'IN' | 'NOT IN'; readonly values: readonly Literal[] }
  | { readonly field: string; readonly op: 'BETWEEN'; readonly low: Literal; readonly high: Literal }
  | { readonly field: string; readonly op: 'IS NULL' | 'IS NOT NULL' }
  | { readonly field: string; readonly op: 'DURING'; readonly range: string };

export interface GaqlQuery {
  readonly select: readonly string[];
  readonly from: string;
  readonly where: readonly Condition[];
  readonly orderBy: readonly { readonly field: string; readonly descending: boolean }[];
  readonly limit: number | null;
}

export class GaqlError extends Error {
  readonly code: string;
  readonly family: 'queryError' | 'changeEventError' | 'dateRangeError';

  constructor(
    code: string,
    message: string,
    /** The GoogleAdsFailure errorCode family the code belongs to. */
    family: 'queryError' | 'changeEventError' | 'dateRangeError' = 'queryError',
  ) {
    super(message);
    this.code = code;
    this.family = family;
  
  }
}

type Token = { kind: 'word' | 'string' | 'number' | 'symbol'; text: string };

function tokenize(query: string): Token[] {
  const tokens: Token[] = [];
  let i = 0;
  while (i < query.length) {
    const c = query[i]!;
    if (/\s/.test(c)) {
      i++;
    } else if (c === "'" || c === '"') {
      let j = i + 1;
      let text = '';
      while (j < query.length && query[j] !== c) {
        if (query[j] === '\\' && j + 1 < query.length) j++;
        text += query[j];
        j++;
      }
      if (j >= query.length) throw new GaqlError('UNEXPECTED_END_OF_QUERY', 'Error in query: unexpected end of query (unclosed string).');
      tokens.push({ kind: 'string', text });
      i = j + 1;
    } else if (/[0-9-]/.test(c) && /[0-9]/.test(query[i + 1] ?? c)) {
      const match = /^-?[0-9]+(\.[0-9]+)?/.exec(query.slice(i))!;
      tokens.push({ kind: 'number', text: match[0] });
      i += match[0].length;
    } else if (/[A-Za-z_]/.test(c)) {
      const match = /^[A-Za-z_][A-Za-z0-9_.]*/.exec(query.slice(i))!;
      tokens.push({ kind: 'word', text: match[0] });
      i += match[0].length;
    } else {
      const two = query.slice(i, i + 2);
      if (['!=', '>=', '<='].includes(two)) {
        tokens.push({ kind: 'symbol', text: two });
        i += 2;
      } else if ('=<>(),'.includes(c)) {
        tokens.push({ kind: 'symbol', text: c });
        i++;
      } else {
        throw new GaqlError('UNEXPECTED_INPUT', `Error in query: unexpected input ${c}.`);
      }
    }
  }
  return tokens;
}

export function parseGaql(query: string): GaqlQuery {
  const tokens = tokenize(query);
  let p = 0;
  const peek = () => tokens[p];
  const keyword = (word: string) => peek()?.kind === 'word' && peek()!.text.toUpperCase() === word;
  const expectKeyword = (word: string) => {
    if (!keyword(word)) throw new GaqlError('EXPECTED_' + word.replace(' ', '_'), `Error in query: expected ${word}.`);
    p++;
  };
  const field = (): string => {
    const token = tokens[p++];
    if (token?.kind !== 'word') throw new GaqlError('INVALID_ARGUMENT', 'Error in query: expected a field name.');
    return token.text;
  };
  const literal = (): Literal => {
    const token = tokens[p++];
    if (token?.kind === 'string') return token.text;
    if (token?.kind === 'number') return Number(token.text);
    if (token?.kind === 'word') return token.text; // enum literal, e.g. ENABLED
    throw new GaqlError('INVALID_VALUE_WITH_OPERATOR', 'Error in query: expected a value.');
  };

  expectKeyword('SELECT');
  const select = [field()];
  while (peek()?.text === ',') {
    p++;
    select.push(field());
  }
  expectKeyword('FROM');
  const from = field();
  const where: Condition[] = [];
  if (keyword('WHERE')) {
    p++;
    do {
      if (where.length > 0) p++; // AND
      const name = field();
      const op = tokens[p++];
      if (!op) throw new GaqlError('UNEXPECTED_END_OF_QUERY', 'Error in query: unexpected end of query.');
      const opText = op.text.toUpperCase();
      if (op.kind === 'symbol' && ['=', '!=', '>', '>=', '<', '<='].includes(op.text)) {
        where.push({ field: name, op: op.text as '=', value: literal() });
      } else if (opText === 'LIKE') {
        where.push({ field: name, op: 'LIKE', value: literal() });
      } else if (opText === 'IN' || (opText === 'NOT' && keyword('IN'))) {
        if (opText === 'NOT') p++;
        if (peek()?.text !== '(') throw new GaqlError('EXPECTED_OPEN_PAREN', 'Error in query: expected (.');
        p++;
        const values: Literal[] = [literal()];
        while (peek()?.text === ',') {
          p++;
          values.push(literal());
        }
        if (tokens[p++]?.text !== ')') throw new GaqlError('EXPECTED_CLOSE_PAREN', 'Error in query: expected ).');
        where.push({ field: name, op: opText === 'NOT' ? 'NOT IN' : 'IN', values });
      } else if (opText === 'BETWEEN') {
        const low = literal();
        expectKeyword('AND');
        where.push({ field: name, op: 'BETWEEN', low, high: literal() });
      } else if (opText === 'IS') {
        const not = keyword('NOT');
        if (not) p++;
        expectKeyword('NULL');
        where.push({ field: name, op: not ? 'IS NOT NULL' : 'IS NULL' });
      } else if (opText === 'DURING') {
        where.push({ field: name, op: 'DURING', range: String(literal()) });
      } else {
        throw new GaqlError('INVALID_OPERATOR', `Error in query: invalid operator ${op.text}.`);
      }
    } while (keyword('AND'));
  }
  const orderBy: { field: string; descending: boolean }[] = [];
  if (keyword('ORDER')) {
    p++;
    expectKeyword('BY');
    do {
      if (orderBy.length > 0) p++;
      const name = field();
      let descending = false;
      if (keyword('DESC') || keyword('ASC')) descending = tokens[p++]!.text.toUpperCase() === 'DESC';
      orderBy.push({ field: name, descending });
    } while (peek()?.text === ',');
  }
  let limit: number | null = null;
  if (keyword('LIMIT')) {
    p++;
    const value = literal();
    if (typeof value !== 'number' || !Number.isInteger(value) || value <= 0) throw new GaqlError('INVALID_LIMIT', 'Error in query: LIMIT must be a positive integer.');
    limit = value;
  }
  if (keyword('PARAMETERS')) p = tokens.length;
  if (p < tokens.length) throw new GaqlError('UNEXPECTED_INPUT', `Error in query: unexpected input ${tokens[p]!.text}.`);
  return { select, from, where, orderBy, limit };
}
