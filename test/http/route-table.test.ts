import { expect } from 'chai';
import { ValidationError } from '../../src/errors/common-errors.ts';
import { responsesByKind } from '../../src/http/route-table/openapi-paths.ts';
import { bodyValidator, queryValidator } from '../../src/http/route-table/request-validators.ts';
import { defineRoute } from '../../src/http/route-table/route-definition.ts';

/** The registrar's validators and the generator's rules, without a server. */
describe('route table', () => {
  describe('query validation', () => {
    const validate = queryValidator<{ limit: number; cursor?: number }>({
      limit: { description: 'Page size.', schema: { type: 'integer', minimum: 1, maximum: 200, default: 50 } },
      cursor: { description: 'Cursor.', schema: { type: 'integer', minimum: 0, maximum: Number.MAX_SAFE_INTEGER } },
    });
    const refusal = (query: Record<string, unknown>): ValidationError => {
      try {
        validate(query);
      } catch (error) {
        if (error instanceof ValidationError) return error;
        throw error;
      }
      throw new Error(`accepted ${JSON.stringify(query)}`);
    };

    it('takes plain decimal digits and fills in defaults', () => {
      expect(validate({ limit: '7', cursor: '9007199254740991' })).to.deep.equal({ limit: 7, cursor: 9007199254740991 });
      expect(validate({})).to.deep.equal({ limit: 50 });
    });

    for (const raw of ['0x10', '1e3', '+5', ' 5', '5 ', '1.5', '-1', '', 'Infinity', '9007199254740993', '99999999999999999999']) {
      it(`refuses cursor=${JSON.stringify(raw)} naming /cursor`, () => {
        expect(refusal({ cursor: raw }).errors.map((e) => e.pointer)).to.deep.equal(['/cursor']);
      });
    }

    it('refuses a repeated parameter and an unknown one, by name, in plain words', () => {
      const error = refusal({ limit: ['5', '6'], limt: '5' });
      expect(error.errors).to.deep.equal([
        { pointer: '/limt', message: 'limt: is not a query parameter of this endpoint; it takes limit or cursor' },
        { pointer: '/limit', message: 'limit: must be an integer from 1 to 200, in plain decimal digits' },
      ]);
      expect(error.kind).to.equal('validation');
    });
  });

  describe('body validation', () => {
    const validate = bodyValidator<{ reason: string; auto_apply: boolean }>(
      {
        type: 'object',
        additionalProperties: false,
        required: ['reason'],
        properties: { reason: { type: 'string', minLength: 1, maxLength: 5, pattern: '\\S' }, auto_apply: { type: 'boolean', default: false } },
      },
      { '/reason': { maxLength: 'must be at most 5 characters; shorten it' } },
    );

    it('fills in defaults, so a body that spells one out equals one that leaves it out', () => {
      expect(validate({ reason: 'why' })).to.deep.equal(validate({ reason: 'why', auto_apply: false }));
    });

    it('uses the override declared beside the schema, and the generic sentence elsewhere', () => {
      expect(() => validate({ reason: 'too long' })).to.throw(ValidationError).with.property('errors').that.deep.equals([
        { pointer: '/reason', message: 'reason: must be at most 5 characters; shorten it' },
      ]);
      expect(() => validate({ reason: ' ' })).to.throw(ValidationError).with.property('errors').that.deep.equals([
        { pointer: '/reason', message: 'reason: must contain at least one non-space character' },
      ]);
    });
  });

  describe('answers declared by route kind', () => {
    const route = defineRoute<unknown>();
    const base = { operationId: 'x', tags: [], summary: 'x', description: 'x', responses: {}, handler: () => () => undefined } as const;

    it('a public probe: only 429', () => {
      expect(Object.keys(responsesByKind(route({ ...base, method: 'get', path: '/healthz', access: 'public' }))).sort()).to.deep.equal(['429']);
    });

    it('a read route: 401, 422 for its query, 429, 500 and 503 (its key is looked up in Postgres)', () => {
      expect(Object.keys(responsesByKind(route({ ...base, method: 'get', path: '/api/v1/x', access: 'read' }))).sort()).to.deep.equal(['401', '422', '429', '500', '503']);
    });

    it('an admin route with a body: 400, 401, 403, 413, 415, 422, 429, 500, 503', () => {
      const declared = route({ ...base, method: 'post', path: '/api/v1/x', access: 'admin', body: { component: 'X', required: false, schema: { type: 'object' } } });
      expect(Object.keys(responsesByKind(declared)).sort()).to.deep.equal(['400', '401', '403', '413', '415', '422', '429', '500', '503']);
    });

    it('a public route backed by the event log: 503 too', () => {
      expect(responsesByKind(route({ ...base, method: 'get', path: '/api/v1/keys', access: 'public', backedBy: ['event-log'] }))).to.have.property('503');
    });
  });
});
