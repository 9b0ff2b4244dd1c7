import { expect } from 'chai';
import { generateKeyPairSync } from 'node:crypto';
import { v4 as uuidv4 } from 'uuid';
import { Subjects } from '../../src/event-store/subjects.ts';
import { GENESIS_HASH, type EventEnvelope } from '../../src/events/envelope.ts';
import { EventAdmission, type AdmissionResult, type AuthenticityCheck, type RawEventMessage } from '../../src/events/event-admission.ts';
import { sealEvent } from '../../src/events/event-hash.ts';
import { EventSigner } from '../../src/events/signing/event-signer.ts';
import { EventVerifier } from '../../src/events/signing/event-verifier.ts';
import { knownKeys } from '../../src/events/signing/signing-keys.ts';
import { signedToolCallChain, toolCalled } from '../support/event-factory.ts';

/**
 * Batch admission (projectors, rebuild) verifies one signature per subject and believes the
 * earlier events of that subject through the hash chain. These specifications pin that it
 * refuses exactly what one-at-a-time admission refuses, with far fewer verifications.
 */
const WORKSPACE = 'ws_batch';
const subjects = new Subjects('batchadm');
const signer = new EventSigner(generateKeyPairSync('ed25519').privateKey);
const attacker = new EventSigner(generateKeyPairSync('ed25519').privateKey);

/** The service's verifier, with a count of full checks (each one an Ed25519 verification). */
function countingVerifier(): { check: AuthenticityCheck; fullChecks: () => number } {
  const verifier = new EventVerifier(knownKeys(signer.publicKey, []), { firstSignedSeq: 1, keyId: signer.keyId });
  let full = 0;
  return {
    check: {
      check: (event, subject, seq) => {
        full++;
        verifier.check(event, subject, seq);
      },
      canVouchFor: (event, seq) => verifier.canVouchFor(event, seq),
    },
    fullChecks: () => full,
  };
}

interface Chain {
  readonly subject: string;
  readonly events: EventEnvelope[];
}

/** `length` signed, hash-chained ToolCalled events of one run. */
function runChain(length: number): Chain {
  const runId = uuidv4();
  const subject = subjects.forAggregate({ workspaceId: WORKSPACE, accountId: 'acc', aggregate: { type: 'run', id: runId } });
  return { subject, events: signedToolCallChain(WORKSPACE, runId, length, 40, signer) };
}

/** Interleaves chains into consecutive stream messages, as concurrent writers leave them. */
function interleave(chains: readonly Chain[]): RawEventMessage[] {
  const messages: RawEventMessage[] = [];
  const longest = Math.max(...chains.map((c) => c.events.length));
  for (let i = 0; i < longest; i++) {
    for (const chain of chains) {
      const event = chain.events[i];
      if (event) messages.push({ seq: messages.length + 1, subject: chain.subject, data: JSON.stringify(event) });
    }
  }
  return messages;
}

function verdicts(results: readonly AdmissionResult[]): string[] {
  return results.map((r) => (r.ok ? 'ok' : r.corrupt.code));
}

function oneAtATime(messages: readonly RawEventMessage[]): string[] {
  const admission = new EventAdmission({ authenticity: countingVerifier().check });
  return verdicts(messages.map((m) => admission.tryAdmit(m)));
}

function replaceAt(messages: RawEventMessage[], index: number, event: EventEnvelope): void {
  messages[index] = { ...messages[index]!, data: JSON.stringify(event) };
}

function eventAt(messages: readonly RawEventMessage[], index: number): EventEnvelope {
  return JSON.parse(String(messages[index]!.data)) as EventEnvelope;
}

describe('batch admission: one signature per subject, the chain vouches for the rest', () => {
  it('given three runs of 20 events interleaved, when admitted as a batch, then all 60 are believed after 3 signature checks', () => {
    const messages = interleave([runChain(20), runChain(20), runChain(20)]);
    const { check, fullChecks } = countingVerifier();

    const results = new EventAdmission({ authenticity: check }).tryAdmitBatch(messages);

    expect(verdicts(results)).to.deep.equal(new Array(60).fill('ok'));
    expect(results.map((r) => (r.ok ? r.stored.seq : -1))).to.deep.equal(messages.map((m) => m.seq));
    expect(fullChecks()).to.equal(3);
  });

  it('given an event whose data was altered in the middle of a chain, then exactly that event is refused as untrusted', () => {
    const messages = interleave([runChain(10), runChain(10)]);
    const altered = eventAt(messages, 8);
    replaceAt(messages, 8, { ...altered, data: { ...(altered.data as object), duration_ms: 999 } } as EventEnvelope);

    const batch = verdicts(new EventAdmission({ authenticity: countingVerifier().check }).tryAdmitBatch(messages));

    expect(batch[8]).to.equal('untrusted');
    expect(batch.filter((v) => v !== 'ok')).to.have.length(1);
    expect(batch).to.deep.equal(oneAtATime(messages));
  });

  it('given earlier events stored in other spellings of the same JSON (spaces, an escaped letter, members out of order), then the chain still vouches for them', () => {
    const messages = interleave([runChain(5)]);
    const event = (index: number) => eventAt(messages, index);
    messages[1] = { ...messages[1]!, data: JSON.stringify(event(1), null, 1) };
    messages[2] = { ...messages[2]!, data: JSON.stringify(event(2)).replace('"type"', '"typ\\u0065"') };
    messages[3] = { ...messages[3]!, data: JSON.stringify(Object.fromEntries(Object.entries(event(3)).reverse())) };
    const { check, fullChecks } = countingVerifier();

    const batch = verdicts(new EventAdmission({ authenticity: check }).tryAdmitBatch(messages));

    expect(batch).to.deep.equal(['ok', 'ok', 'ok', 'ok', 'ok']);
    expect(fullChecks()).to.equal(1);
  });

  it('given a copy of its hash member added inside the data of an earlier event, ahead of its own, then exactly that event is refused as untrusted', () => {
    const messages = interleave([runChain(5)]);
    const original = eventAt(messages, 2);
    const data = original.data as { output: object };
    // The tool output is free-form, so the schema lets the copy through and the chain must catch it.
    replaceAt(messages, 2, { ...original, data: { ...data, output: { ...data.output, hash: original.hash } } } as EventEnvelope);

    const batch = verdicts(new EventAdmission({ authenticity: countingVerifier().check }).tryAdmitBatch(messages));

    expect(batch).to.deep.equal(['ok', 'ok', 'untrusted', 'ok', 'ok']);
    expect(batch).to.deep.equal(oneAtATime(messages));
  });

  it('given an event re-hashed after editing (hash and successor link no longer agree), then it is refused and the rest believed', () => {
    const messages = interleave([runChain(6)]);
    const original = eventAt(messages, 2);
    const { hash: _hash, signature: _signature, ...unsealed } = original;
    const resealed = sealEvent({ ...unsealed, data: { ...(original.data as object), duration_ms: 999 } } as never, original.prev_hash, signer);
    // Signed by the real key but not what the next event chained to: a replayed/edited copy.
    replaceAt(messages, 2, { ...resealed, signature: original.signature } as EventEnvelope);

    const batch = verdicts(new EventAdmission({ authenticity: countingVerifier().check }).tryAdmitBatch(messages));

    expect(batch).to.deep.equal(['ok', 'ok', 'untrusted', 'ok', 'ok', 'ok']);
    expect(batch).to.deep.equal(oneAtATime(messages));
  });

  it('given a forged event signed by an unknown key at the head of a chain, then it is refused and the events before it are each checked and believed', () => {
    const chain = runChain(5);
    const last = chain.events[4]!;
    const { hash: _h, signature: _s, key_id: _k, prev_hash: _p, ...unsealed } = last;
    chain.events[4] = sealEvent(unsealed as never, last.prev_hash, attacker);
    const messages = interleave([chain]);
    const { check, fullChecks } = countingVerifier();

    const batch = verdicts(new EventAdmission({ authenticity: check }).tryAdmitBatch(messages));

    expect(batch).to.deep.equal(['ok', 'ok', 'ok', 'ok', 'untrusted']);
    expect(batch).to.deep.equal(oneAtATime(messages));
    // The forged head vouches for nothing: the genuine event before it is checked in full, and vouches for the rest.
    expect(fullChecks()).to.equal(2);
  });

  it('given an unsigned event after signing began, then it is refused in a batch as it is alone', () => {
    const messages = interleave([runChain(4)]);
    const { key_id: _k, signature: _s, ...unsigned } = eventAt(messages, 1);
    replaceAt(messages, 1, unsigned as EventEnvelope);

    const batch = verdicts(new EventAdmission({ authenticity: countingVerifier().check }).tryAdmitBatch(messages));

    expect(batch).to.deep.equal(['ok', 'untrusted', 'ok', 'ok']);
    expect(batch).to.deep.equal(oneAtATime(messages));
  });

  it('given messages that are not JSON or sit on another subject, then they are refused with the same codes as one at a time', () => {
    const messages = interleave([runChain(3), runChain(3)]);
    messages[1] = { ...messages[1]!, data: '{not json' };
    messages[5] = { ...messages[5]!, subject: messages[0]!.subject };

    const batch = verdicts(new EventAdmission({ authenticity: countingVerifier().check }).tryAdmitBatch(messages));

    expect(batch[1]).to.equal('not-json');
    expect(batch[5]).to.equal('subject-mismatch');
    expect(batch).to.deep.equal(oneAtATime(messages));
  });

  it('given an envelope whose address differs from its subject by a token, a dot inside a field or a missing token, then it is refused as subject-mismatch', () => {
    const runId = 'run-x';
    const event = sealEvent(toolCalled(WORKSPACE, runId, 1, 4), GENESIS_HASH, signer);
    const verdictOn = (subject: string, changes: Partial<EventEnvelope> = {}) => {
      const result = new EventAdmission().tryAdmit({ seq: 1, subject, data: JSON.stringify({ ...event, ...changes }) });
      return result.ok ? 'ok' : result.corrupt.code;
    };
    expect(verdictOn(`batchadm.v1.${WORKSPACE}.acc.run.${runId}`)).to.equal('ok');
    expect(verdictOn(`batchadm.v1.${WORKSPACE}.acc.run.other`)).to.equal('subject-mismatch');
    expect(verdictOn(`batchadm.v2.${WORKSPACE}.acc.run.${runId}`)).to.equal('subject-mismatch');
    expect(verdictOn(`v1.${WORKSPACE}.acc.run.${runId}`)).to.equal('subject-mismatch');
    expect(verdictOn(`a.batchadm.v1.${WORKSPACE}.acc.run.${runId}`)).to.equal('subject-mismatch');
    expect(verdictOn(`batchadm.v1.ws.x.acc.run.${runId}`, { workspace_id: 'ws.x' })).to.equal('subject-mismatch');
    expect(verdictOn(`batchadm.v1.${WORKSPACE}.acc.run.${runId}`, { account_id: null })).to.equal('subject-mismatch');
    expect(verdictOn(`batchadm.v1.${WORKSPACE}._.run.${runId}`, { account_id: null })).to.equal('ok');
  });

  it('given a store without an authenticity check, then a batch is admitted on structure alone', () => {
    const messages = interleave([runChain(3)]);
    expect(verdicts(new EventAdmission().tryAdmitBatch(messages))).to.deep.equal(['ok', 'ok', 'ok']);
  });
});

describe('admission remembers verdicts for readers behind each other', () => {
  it('given a batch admitted once, when a second reader admits the same messages, then it gets the same events without another signature check', () => {
    const messages = interleave([runChain(15), runChain(15)]);
    const { check, fullChecks } = countingVerifier();
    const admission = new EventAdmission({ authenticity: check });
    const first = admission.tryAdmitBatch(messages);
    const checksAfterFirst = fullChecks();

    const second = admission.tryAdmitBatch(messages.map((m) => ({ ...m, data: Buffer.from(String(m.data)) })));

    expect(fullChecks()).to.equal(checksAfterFirst);
    expect(second.map((r) => (r.ok ? r.stored.event.hash : r.corrupt.code))).to.deep.equal(first.map((r) => (r.ok ? r.stored.event.hash : r.corrupt.code)));
  });

  it('given other bytes at a sequence already admitted, then they are judged on their own: a forgery is not believed from memory', () => {
    const messages = interleave([runChain(6)]);
    const admission = new EventAdmission({ authenticity: countingVerifier().check });
    expect(verdicts(admission.tryAdmitBatch(messages))).to.deep.equal(new Array(6).fill('ok'));
    const original = eventAt(messages, 5);
    const forged = { ...messages[5]!, data: JSON.stringify({ ...original, data: { ...(original.data as object), duration_ms: 999 } }) };

    expect(verdicts([admission.tryAdmit(forged)])).to.deep.equal(['untrusted']);
  });

  it('given a reader more than the recent window behind the stream head, then its verdicts are not kept: the next reader checks again', () => {
    const messages = interleave([runChain(8), runChain(8)]);
    const { check, fullChecks } = countingVerifier();
    const admission = new EventAdmission({ authenticity: check });
    expect(verdicts(admission.tryAdmitBatch(messages, { behindHead: 50_000 }))).to.deep.equal(new Array(16).fill('ok'));
    const checks = fullChecks();

    expect(verdicts(admission.tryAdmitBatch(messages))).to.deep.equal(new Array(16).fill('ok'));

    expect(fullChecks()).to.equal(checks + 2);
  });

  it('given a reader a batch behind the head, then its verdicts are kept for the readers behind it', () => {
    const messages = interleave([runChain(8), runChain(8)]);
    const { check, fullChecks } = countingVerifier();
    const admission = new EventAdmission({ authenticity: check });
    admission.tryAdmitBatch(messages, { behindHead: 2_000 });
    const checks = fullChecks();

    expect(verdicts(admission.tryAdmitBatch(messages))).to.deep.equal(new Array(16).fill('ok'));

    expect(fullChecks()).to.equal(checks);
  });

  it('given a forgery admitted far behind the head, then it is refused there and again later: nothing is believed without its check', () => {
    const messages = interleave([runChain(4)]);
    const original = eventAt(messages, 3);
    replaceAt(messages, 3, { ...original, data: { ...(original.data as object), duration_ms: 999 } } as EventEnvelope);
    const admission = new EventAdmission({ authenticity: countingVerifier().check });

    expect(verdicts(admission.tryAdmitBatch(messages, { behindHead: 1_000_000 }))).to.deep.equal(['ok', 'ok', 'ok', 'untrusted']);
    expect(verdicts(admission.tryAdmitBatch(messages))).to.deep.equal(['ok', 'ok', 'ok', 'untrusted']);
  });

  it('given a reader 20,000 sequences behind the newest admission, then its verdicts are remembered too (by digest, the event parsed again)', () => {
    const { check, fullChecks } = countingVerifier();
    const admission = new EventAdmission({ authenticity: check });
    const early = interleave([runChain(5)]);
    admission.tryAdmitBatch(early);
    // 20,000 later sequences pass through (same bytes, later sequences): they push the early ones out of the whole-result window.
    const filler = early[0]!;
    for (let seq = 100; seq < 20_100; seq++) admission.tryAdmit({ ...filler, seq });
    const checks = fullChecks();

    const again = admission.tryAdmitBatch(early);

    expect(verdicts(again)).to.deep.equal(new Array(5).fill('ok'));
    expect(fullChecks()).to.equal(checks);
  });
});
