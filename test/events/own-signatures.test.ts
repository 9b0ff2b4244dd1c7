import { expect } from 'chai';
import { generateKeyPairSync } from 'node:crypto';
import { streams } from '../../src/event-store/subjects.ts';
import { EMPTY_POSITION, type StoredEvent } from '../../src/event-store/event-store.ts';
import { sealEvent } from '../../src/events/event-hash.ts';
import { EventSigner } from '../../src/events/signing/event-signer.ts';
import { EventVerifier } from '../../src/events/signing/event-verifier.ts';
import { knownKeys } from '../../src/events/signing/signing-keys.ts';
import { UntrustedEventError } from '../../src/events/signing/untrusted-event-error.ts';
import { openInfrastructure, type Infrastructure } from '../../src/runtime/infrastructure.ts';
import { workspaceCreated } from '../support/event-factory.ts';
import { dropIsolated, isolatedConfig } from '../support/isolation.ts';

/**
 * A process believes what its own signer signed without verifying the signature again: its
 * readers (run follower, projectors, workers) admit each event it appends, and Ed25519
 * verification costs several times the signing. Only the exact signed bytes are believed.
 */
describe('signatures made in this process', () => {
  const subject = 'ads.v1.ws._.workspace.ws';
  const activation = (signer: EventSigner) => ({ firstSignedSeq: 1, keyId: signer.keyId });
  const code = (work: () => void) => {
    try {
      work();
    } catch (error) {
      return error instanceof UntrustedEventError ? error.code : String(error);
    }
    return 'believed';
  };

  it('given a verifier told of its signer, an event that signer sealed is believed without an Ed25519 verification', () => {
    const signer = new EventSigner(generateKeyPairSync('ed25519').privateKey);
    const verifier = new EventVerifier(knownKeys(signer.publicKey, []), activation(signer));
    signer.onSigned((signature, bytes) => verifier.rememberSignedHere(signer.keyId, signature, bytes));
    const event = sealEvent(workspaceCreated('ws'), '0'.repeat(64), signer);
    expect(code(() => verifier.check(event, subject, 1))).to.equal('believed');
    expect(verifier.ed25519Verifications).to.equal(0);
    // Another process's verifier (not told) verifies it.
    const elsewhere = new EventVerifier(knownKeys(signer.publicKey, []), activation(signer));
    expect(code(() => elsewhere.check(event, subject, 1))).to.equal('believed');
    expect(elsewhere.ed25519Verifications).to.equal(1);
  });

  it('given the remembered signature on altered content, the event is verified in full and refused', () => {
    const signer = new EventSigner(generateKeyPairSync('ed25519').privateKey);
    const verifier = new EventVerifier(knownKeys(signer.publicKey, []), activation(signer));
    signer.onSigned((signature, bytes) => verifier.rememberSignedHere(signer.keyId, signature, bytes));
    const event = sealEvent(workspaceCreated('ws'), '0'.repeat(64), signer);
    const altered = { ...event, data: { name: 'renamed' } };
    expect(code(() => verifier.check(altered, subject, 1))).to.equal('bad-signature');
    expect(verifier.ed25519Verifications).to.equal(1);
  });

  it('given a signer whose key the verifier does not know, nothing is remembered and its events are refused (unknown-key)', () => {
    const known = new EventSigner(generateKeyPairSync('ed25519').privateKey);
    const stranger = new EventSigner(generateKeyPairSync('ed25519').privateKey);
    const verifier = new EventVerifier(knownKeys(known.publicKey, []), activation(known));
    stranger.onSigned((signature, bytes) => verifier.rememberSignedHere(stranger.keyId, signature, bytes));
    expect(code(() => verifier.check(sealEvent(workspaceCreated('ws'), '0'.repeat(64), stranger), subject, 1))).to.equal('unknown-key');
  });

  describe('through the event store of a process', () => {
    const config = isolatedConfig('ownsigs');
    let writer: Infrastructure;
    let reader: Infrastructure;
    before(async () => {
      writer = await openInfrastructure(config, 'own-signatures-writer');
      reader = await openInfrastructure(config, 'own-signatures-reader');
    });
    after(async () => {
      await writer?.close();
      await reader?.close();
      await dropIsolated(config);
    });

    it('admits its own appends without Ed25519 verifications, while another process verifies them', async () => {
      const subjectOf = (ws: string) => writer.subjects.forAggregate(streams.workspace(ws));
      const appended: StoredEvent[] = [];
      for (let i = 0; i < 5; i++) appended.push(...(await writer.store.append(subjectOf(`ws${i}`), [workspaceCreated(`ws${i}`)], EMPTY_POSITION)));
      const head = appended[appended.length - 1]!.seq;
      const read = async (infra: Infrastructure) => {
        const seqs: number[] = [];
        for await (const result of infra.store.readFilteredChecked(infra.subjects.all, appended[0]!.seq, head)) {
          expect(result.ok, JSON.stringify(result)).to.equal(true);
          if (result.ok) seqs.push(result.stored.seq);
        }
        return seqs;
      };
      const before = { writer: writer.signing.verifier.ed25519Verifications, reader: reader.signing.verifier.ed25519Verifications };
      expect(await read(writer)).to.deep.equal(appended.map((s) => s.seq));
      expect(await read(reader)).to.deep.equal(appended.map((s) => s.seq));
      expect(writer.signing.verifier.ed25519Verifications - before.writer).to.equal(0);
      expect(reader.signing.verifier.ed25519Verifications - before.reader).to.equal(5);
    });
  });
});
