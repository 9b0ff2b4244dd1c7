import { expect } from 'chai';
import { EMPTY_POSITION } from '../../src/event-store/event-store.ts';
import { randomInt } from 'node:crypto';
import { Subjects } from '../../src/event-store/subjects.ts';
import { GENESIS_HASH } from '../../src/events/envelope.ts';
import { EventAdmission } from '../../src/events/event-admission.ts';
import { sealEvent } from '../../src/events/event-hash.ts';
import { EventTextError, eventValidator, jsonTextMayHoldHostileText } from '../../src/events/event-validator.ts';
import { hasHostileText } from '../../src/text/hostile-text.ts';
import { openInfrastructure, type Infrastructure } from '../../src/runtime/infrastructure.ts';
import { findHostileText, sanitizeDeep, sanitizeText } from '../../src/text/hostile-text.ts';
import { ChainedAppender } from '../support/chained-appender.ts';
import { toolCalled, workspaceCreated } from '../support/event-factory.ts';
import { dropIsolated, isolatedConfig } from '../support/isolation.ts';

describe('hostile text: the checker', () => {
  it('finds U+0000, C0 controls and unpaired surrogates with their JSON pointers, keys included', () => {
    const value = { ok: 'tab\tnl\nret\r emoji \ud83d\ude00', a: ['fine', 'nul\u0000'], 'k/~\u0001': { deep: '\udc00x' }, hi: 'x\ud800' };
    expect(findHostileText(value)).to.deep.equal([
      { pointer: '/a/1', character: 'nul', inKey: false },
      { pointer: '/k~1~0\uFFFD', character: 'control', inKey: true },
      { pointer: '/k~1~0\uFFFD/deep', character: 'lone-surrogate', inKey: false },
      { pointer: '/hi', character: 'lone-surrogate', inKey: false },
    ]);
    expect(findHostileText('\u007f DEL and U+0085 NEL \u0085 are not C0')).to.deep.equal([]);
  });

  it('replaces each bad character with U+FFFD and keeps good pairs', () => {
    expect(sanitizeText('a\u0000b\ud800c\udc00d\ud83d\ude00\u001b')).to.equal('a\uFFFDb\uFFFDc\uFFFDd\ud83d\ude00\uFFFD');
    const clean = { a: ['x'] };
    expect(sanitizeDeep(clean)).to.equal(clean);
    expect(sanitizeDeep({ 'k\u0000': ['\ud800'] })).to.deep.equal({ 'k\uFFFD': ['\uFFFD'] });
  });
});

describe('hostile text: the event validator and the store refuse it whatever the source', () => {
  const config = isolatedConfig('eventtext');
  let infra: Infrastructure;

  before(async () => {
    infra = await openInfrastructure(config, 'test-event-text');
  });
  after(async () => {
    await infra.close();
    await dropIsolated(config);
  });

  for (const [label, mutate, pointer] of [
    ['a data field', (e: any) => ({ ...e, data: { name: 'a\u0000' } }), '/data/name'],
    ['an envelope field', (e: any) => ({ ...e, correlation_id: 'c\ud800' }), '/correlation_id'],
    ['a nested key of free-form data', (e: any) => ({ ...e, data: { ...e.data, output: { ['k\u0002']: 1 } } }), '/data/output/k\uFFFD'],
  ] as const) {
    it(`refuses ${label} and stores nothing`, async () => {
      const base = label.includes('free-form') ? toolCalled('ws-text', 'run-1', 1, 10) : workspaceCreated('ws-text');
      const event = mutate(base);
      expect(() => eventValidator().assertValid(event)).to.throw(EventTextError, pointer);
      const subject = new ChainedAppender(infra).workspaceSubject(`ws-text-${label.length}`);
      let refused: unknown;
      try {
        await infra.store.append(subject, [event], EMPTY_POSITION);
      } catch (error) {
        refused = error;
      }
      expect(refused).to.be.instanceOf(EventTextError);
      expect(await infra.store.lastOf(subject)).to.equal(null);
    });
  }
});

/**
 * Admission skips the walk over every string when the stored JSON text cannot hold a bad
 * character (no \b, \f or \u escape, no surrogate): the verdicts must not change.
 */
describe('hostile text: admission of stored bytes', () => {
  const subjects = new Subjects('hostileadm');
  const runId = 'run-h';
  const subject = subjects.forAggregate({ workspaceId: 'ws-h', accountId: 'acc', aggregate: { type: 'run', id: runId } });
  /** The JSON text of a sealed ToolCalled whose output holds `output`, with `raw` spliced in as written. */
  const stored = (output: string) => JSON.stringify(sealEvent(toolCalled('ws-h', runId, 1, 1), GENESIS_HASH)).replace('"blob":"x"', `"blob":${output}`);
  const verdictOf = (text: string, asBytes: boolean) => {
    const result = new EventAdmission().tryAdmit({ seq: 1, subject, data: asBytes ? Buffer.from(text, 'utf8') : text });
    return result.ok ? 'ok' : result.corrupt.code;
  };

  for (const [label, output] of [
    ['an escaped NUL', '"a\\u0000"'],
    ['a backspace escape', '"a\\b"'],
    ['a form feed escape', '"a\\f"'],
    ['an escaped lone surrogate', '"a\\ud800"'],
    ['an escaped C0 control in a key', '{"k\\u0002":1}'],
  ] as const) {
    it(`refuses ${label} as bad-text, from bytes and from a string`, () => {
      expect(verdictOf(stored(output), true)).to.equal('bad-text');
      expect(verdictOf(stored(output), false)).to.equal('bad-text');
    });
  }

  it('refuses a lone surrogate written as it is in a string message, and believes clean escapes and emoji', () => {
    expect(verdictOf(stored('"a\ud800"'), false)).to.equal('bad-text');
    expect(verdictOf(stored('"tab\\t nl\\n cr\\r \\"q\\" \\\\ \\/ \\u00e9 😀 \\ud83d\\ude00"'), true)).to.equal('ok');
  });

  it('never calls text clean that the walk finds bad (random strings of escapes and controls)', () => {
    const pieces = ['a', ' ', '\t', '\n', '\r', '\u0000', '\u0008', '\u000c', '\u001f', '\u007f', '\\', '"', 'é', '\ud83d\ude00', '\ud800', '\udc00', 'u'];
    for (let i = 0; i < 5000; i++) {
      const value = { [pieces[randomInt(pieces.length)]!]: Array.from({ length: randomInt(1, 6) }, () => pieces[randomInt(pieces.length)]).join('') };
      const text = JSON.stringify(value);
      if (hasHostileText(JSON.parse(text))) expect(jsonTextMayHoldHostileText(text), text).to.equal(true);
    }
  });
});
