import { expect } from 'chai';
import { generateKeyPairSync } from 'node:crypto';
import { v4 as uuidv4 } from 'uuid';
import { verifyEventLog, type VerifyReport } from '../../src/audit/verify-event-log.ts';
import type { EventEnvelope } from '../../src/events/envelope.ts';
import { sealEvent } from '../../src/events/event-hash.ts';
import { GENESIS_HASH } from '../../src/events/envelope.ts';
import { EventSigner } from '../../src/events/signing/event-signer.ts';
import { EventVerifier } from '../../src/events/signing/event-verifier.ts';
import { knownKeys } from '../../src/events/signing/signing-keys.ts';
import { openInfrastructure, type Infrastructure } from '../../src/runtime/infrastructure.ts';
import { signedToolCallChain } from '../support/event-factory.ts';
import { dropIsolated, isolatedConfig } from '../support/isolation.ts';

/**
 * `audit verify` checks signatures in libuv's thread pool, many at once, while it reads on.
 * These pin that it still reports what a check of one event after the other would: the first
 * discrepancy of the log, whichever check finds it, with the counts as they were there.
 */
const WORKSPACE = 'ws_auditsig';
const signer = new EventSigner(generateKeyPairSync('ed25519').privateKey);
const attacker = new EventSigner(generateKeyPairSync('ed25519').privateKey);

/** `length` signed, chained events of one run, as the service would have appended them. */
function runChain(length: number): EventEnvelope[] {
  return signedToolCallChain(WORKSPACE, uuidv4(), length, 20, signer);
}

/** Its hash and chain intact, its signature made by another key under the service's key id: only the signature check can see it. */
function withForgedSignature(event: EventEnvelope): EventEnvelope {
  const { signature: _signature, key_id: _keyId, hash: _hash, prev_hash: prevHash, ...unsealed } = event;
  const forged = sealEvent(unsealed as never, prevHash, attacker);
  return { ...event, signature: forged.signature };
}

/** One run's chain: `legacy` unsigned events from before signing, then `signed` ones signed by the service's key. */
function legacyThenSigned(legacy: number, signed: number): EventEnvelope[] {
  let prev = GENESIS_HASH;
  return runChain(legacy + signed).map((event, index) => {
    const { signature: _signature, key_id: _keyId, hash: _hash, prev_hash: _prev, ...unsealed } = event;
    const sealed = sealEvent(unsealed as never, prev, index < legacy ? undefined : signer);
    prev = sealed.hash;
    return sealed;
  });
}

describe('audit verify: signatures checked in the thread pool, discrepancies reported in stream order', function () {
  this.timeout(60_000);

  async function auditOf(events: readonly EventEnvelope[], activation: { firstSignedSeq: number; keyId: string } | null = { firstSignedSeq: 1, keyId: signer.keyId }): Promise<VerifyReport> {
    const config = isolatedConfig('auditsig');
    const infra: Infrastructure = await openInfrastructure(config, 'test-audit-signatures');
    try {
      for (const event of events) {
        await infra.js.publish(infra.subjects.forAggregate({ workspaceId: WORKSPACE, accountId: 'acc', aggregate: event.aggregate }), JSON.stringify(event));
      }
      const verifier = new EventVerifier(knownKeys(signer.publicKey, []), activation, { rememberVerified: false });
      return await verifyEventLog({ store: infra.store, subjects: infra.subjects, verifier });
    } finally {
      await infra.close();
      await dropIsolated(config);
    }
  }

  it('given legacy events, then a forged first signature and no activation record (an offline audit), then it reports the forgery and names no key for the legacy events', async () => {
    // The first signed event forged, under the service's key id.
    const events = legacyThenSigned(5, 3);
    events[5] = withForgedSignature(events[5]!);

    const report = await auditOf(events, null);

    expect(report.discrepancy).to.include({ kind: 'bad_signature', seq: 6 });
    expect(report).to.include({ legacyEvents: 5, signedEvents: 0, legacyBeforeKeyId: null });
  });

  it('given legacy events, then genuine signed ones and no activation record, then the legacy events are named as before the first signing key', async () => {
    const events = legacyThenSigned(5, 3);

    const report = await auditOf(events, null);

    expect(report.discrepancy).to.equal(null);
    expect(report).to.include({ legacyEvents: 5, signedEvents: 3, legacyBeforeKeyId: signer.keyId });
  });

  it('given no activation record and a forged first signature, then a genuine signature checked after it failed is not taken as the activation point either', async () => {
    // What the audit's reader may do: it reads on while checks run, and begins later checks after the first one failed.
    const events = legacyThenSigned(5, 3);
    events[5] = withForgedSignature(events[5]!);
    const verifier = new EventVerifier(knownKeys(signer.publicKey, []), null, { rememberVerified: false });
    const subject = 'any';
    const forged = verifier.verdictOffThread(events[5]!, subject, 6);
    expect(verifier.activation).to.deep.equal({ firstSignedSeq: 6, keyId: signer.keyId });
    await forged.then(
      () => expect.fail('the forged signature verified'),
      (error: Error) => expect(error.message).to.include('does not verify'),
    );
    expect(verifier.activation).to.equal(null);
    expect(await verifier.verdictOffThread(events[6]!, subject, 7)).to.deep.equal({ kind: 'signed', keyId: signer.keyId });
    expect(verifier.activation).to.equal(null);
  });

  it('given 300 genuine events, then every signature is counted valid and nothing is reported', async () => {
    const report = await auditOf(runChain(300));

    expect(report.discrepancy).to.equal(null);
    expect(report).to.include({ events: 300, signedEvents: 300, lastSeq: 300 });
  });

  it('given a forged signature at sequence 40 and an altered event at 45, then the signature at 40 is reported, with the counts as they were there', async () => {
    const events = runChain(120);
    events[39] = withForgedSignature(events[39]!);
    events[44] = { ...events[44]!, data: { ...(events[44]!.data as object), duration_ms: 999 } } as EventEnvelope;

    const report = await auditOf(events);

    expect(report.discrepancy).to.include({ kind: 'bad_signature', seq: 40 });
    expect(report).to.include({ events: 40, lastSeq: 40, signedEvents: 39 });
  });

  it('given two runs interleaved, a forged signature at sequence 25 and an altered event at 35, then the signature at 25 is reported first', async () => {
    const first = runChain(30);
    const second = runChain(30);
    second[14] = withForgedSignature(second[14]!);
    first[19] = { ...first[19]!, data: { ...(first[19]!.data as object), duration_ms: 999 } } as EventEnvelope;

    const report = await auditOf([...first.slice(0, 10), ...second.slice(0, 15), ...first.slice(10)]);

    // Stream order: first[0..9] at 1-10, second[0..14] at 11-25 (the forged one at 25), then first[10..] from 26 (the altered one at 35).
    expect(report.discrepancy).to.include({ kind: 'bad_signature', seq: 25 });
    expect(report).to.include({ events: 25, signedEvents: 24 });
  });

  it('given an altered event before a forged signature, then the altered event is reported', async () => {
    const events = runChain(100);
    events[9] = { ...events[9]!, data: { ...(events[9]!.data as object), duration_ms: 999 } } as EventEnvelope;
    events[10] = withForgedSignature(events[10]!);

    const report = await auditOf(events);

    expect(report.discrepancy).to.include({ kind: 'hash_mismatch', seq: 10 });
    expect(report).to.include({ events: 10, signedEvents: 9 });
  });

  it('given a forged signature on the last event, then it is reported after the read ends', async () => {
    const events = runChain(50);
    events[49] = withForgedSignature(events[49]!);

    const report = await auditOf(events);

    expect(report.discrepancy).to.include({ kind: 'bad_signature', seq: 50 });
    expect(report).to.include({ events: 50, signedEvents: 49 });
  });
});
