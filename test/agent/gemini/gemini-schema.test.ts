import { expect } from 'chai';
import { GeminiSchemaError, toFunctionDeclaration, toGeminiSchema } from '../../../src/agent/model/gemini/gemini-schema.ts';

describe('Gemini schema conversion', () => {
  it('maps every type and drops keywords Gemini rejects', () => {
    expect(
      toGeminiSchema({
        type: 'object',
        additionalProperties: false,
        description: 'root',
        required: ['s', 'missing'],
        properties: {
          s: { type: 'string', minLength: 1, maxLength: 9, pattern: 'x', format: 'email', default: 'a' },
          d: { type: 'string', format: 'date-time' },
          n: { type: 'number', minimum: 0, exclusiveMaximum: 9, format: 'double' },
          i: { type: 'integer', maximum: 5, format: 'int64', enum: [1, 2] },
          b: { type: 'boolean' },
          a: { type: 'array', uniqueItems: true, maxItems: 3, items: { type: 'string', enum: ['x', 'y'] } },
        },
      }),
    ).to.deep.equal({
      type: 'object',
      description: 'root',
      required: ['s'],
      properties: {
        s: { type: 'string' },
        d: { type: 'string', format: 'date-time' },
        n: { type: 'number', format: 'double' },
        i: { type: 'integer', format: 'int64' },
        b: { type: 'boolean' },
        a: { type: 'array', maxItems: 3, items: { type: 'string', format: 'enum', enum: ['x', 'y'] } },
      },
    });
  });

  it('turns "X or null" into nullable X', () => {
    expect(toGeminiSchema({ type: ['integer', 'null'] })).to.deep.equal({ type: 'integer', nullable: true });
    expect(toGeminiSchema({ anyOf: [{ type: 'string', description: 'd' }, { type: 'null' }] })).to.deep.equal({
      type: 'string',
      description: 'd',
      nullable: true,
    });
  });

  it('infers a missing type from the keywords present', () => {
    expect(toGeminiSchema({ properties: { a: { enum: ['x'] } } })).to.deep.equal({
      type: 'object',
      properties: { a: { type: 'string', format: 'enum', enum: ['x'] } },
    });
  });

  it('refuses what Gemini cannot express', () => {
    expect(() => toGeminiSchema({ type: ['string', 'number'] }, 'p')).to.throw(GeminiSchemaError, /^p: type/);
    expect(() => toGeminiSchema({ anyOf: [{ type: 'string' }, { type: 'number' }] }, 'p')).to.throw(GeminiSchemaError);
    expect(() => toGeminiSchema({ type: 'array' }, 'p')).to.throw(GeminiSchemaError, /items/);
    expect(() => toGeminiSchema({}, 'p')).to.throw(GeminiSchemaError, /no 'type'/);
    expect(() => toFunctionDeclaration({ name: 't', description: '', parameters: { type: 'string' } })).to.throw(GeminiSchemaError, /object/);
  });

  it('declares an argument-less tool without parameters', () => {
    expect(toFunctionDeclaration({ name: 't', description: 'd', parameters: { type: 'object', properties: {} } })).to.deep.equal({
      name: 't',
      description: 'd',
    });
  });
});
