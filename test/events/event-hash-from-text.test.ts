import { expect } from 'chai';
import { generateKeyPairSync } from 'node:crypto';
import { GENESIS_HASH, type EventEnvelope } from '../../src/events/envelope.ts';
import { computeEventHash, eventHashFromText, sealEvent } from '../../src/events/event-hash.ts';
import { EventSigner } from '../../src/events/signing/event-signer.ts';
import { toolCalled, workspaceCreated } from '../support/event-factory.ts';

/**
 * Readers that believe an event by its chain recompute its hash from the text it was stored as
 * (eventHashFromText) instead of canonicalizing the parsed event. These specifications pin that
 * the two agree on what the store writes, and that the text's answer can never vouch for a
 * parsed event other than the one that was hashed.
 */
const signer = new EventSigner(generateKeyPairSync('ed25519').privateKey);

/** Text that JSON.stringify must escape or write as it is: quotes, backslashes, control characters, non-ASCII, astral characters. */
const AWKWARD_TEXT = 'say "hi"\\ back\nnew line\ttab é 漢字 😀 \u2028 </script>';

function stored(event: EventEnvelope): { text: string; parsed: EventEnvelope } {
  const text = JSON.stringify(event);
  return { text, parsed: JSON.parse(text) as EventEnvelope };
}

describe('eventHashFromText: an event hash taken from its stored text', () => {
  it('given events the store wrote (signed and unsigned, with text that needs escapes), then the hash from the text is the event hash', () => {
    const events = [
      sealEvent(workspaceCreated('ws_text', AWKWARD_TEXT), GENESIS_HASH),
      sealEvent(workspaceCreated('ws_text', AWKWARD_TEXT), 'a'.repeat(64), signer),
      sealEvent(toolCalled('ws_text', '7d5e0f9e-36f8-4a55-9f0c-6a7f5d1f2b3c', 3, 500), 'b'.repeat(64), signer),
    ];
    for (const event of events) {
      const { text, parsed } = stored(event);
      expect(eventHashFromText(text, parsed)).to.equal(event.hash);
      expect(computeEventHash(parsed, parsed.prev_hash)).to.equal(event.hash);
    }
  });

  it('given the same JSON spelled otherwise (spaces, an escaped letter, members out of order), then the text gives no hash or another one, never a wrong match', () => {
    const event = sealEvent(workspaceCreated('ws_text', 'plain'), GENESIS_HASH, signer);
    const spellings = [
      JSON.stringify(event, null, 1),
      JSON.stringify(event).replace('"type"', '"typ\\u0065"'),
      JSON.stringify(Object.fromEntries(Object.entries(event).reverse())),
    ];
    for (const text of spellings) {
      const parsed = JSON.parse(text) as EventEnvelope;
      expect(parsed).to.deep.equal(event);
      expect(eventHashFromText(text, parsed)).to.not.equal(event.hash);
    }
  });

  it('given a copy of the hash member inside the data, ahead of the real one, then the text does not hash to the event hash', () => {
    const event = sealEvent(workspaceCreated('ws_text', 'plain'), GENESIS_HASH, signer);
    const tampered = { ...event, data: { ...(event.data as object), hash: event.hash } };
    const text = JSON.stringify(tampered);
    expect(text.indexOf(`,"hash":"${event.hash}"`)).to.be.below(text.lastIndexOf(`,"hash":"${event.hash}"`));

    expect(eventHashFromText(text, JSON.parse(text) as EventEnvelope)).to.not.equal(event.hash);
  });

  it('given a lone surrogate where the sealed event holds U+FFFD (the same bytes once encoded), then the text gives no hash', () => {
    const event = sealEvent(workspaceCreated('ws_text', 'a\uFFFDb'), GENESIS_HASH, signer);
    const text = JSON.stringify(event).replace('a\uFFFDb', 'a\uD800b');
    expect(text).to.contain('\uD800');

    expect(eventHashFromText(text, { ...event, data: { name: 'a\uD800b' } } as EventEnvelope)).to.equal(undefined);
  });

  it('given an envelope without a hash or prev_hash, or with one that is not a string, then there is no hash from its text', () => {
    const event = sealEvent(workspaceCreated('ws_text', 'plain'), GENESIS_HASH);
    const { hash: _hash, ...withoutHash } = event;
    for (const broken of [withoutHash, { ...event, prev_hash: 7 }, { ...event, signature: null }]) {
      const text = JSON.stringify(broken);
      expect(eventHashFromText(text, JSON.parse(text) as EventEnvelope)).to.equal(undefined);
    }
  });
});
