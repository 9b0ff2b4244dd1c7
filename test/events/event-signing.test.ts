import { expect } from 'chai';
import { createPublicKey, generateKeyPairSync, verify } from 'node:crypto';
import { mkdtempSync, readFileSync, statSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import canonicalize from 'canonicalize';
import { jetstream, jetstreamManager } from '@nats-io/jetstream';
import { Kvm } from '@nats-io/kv';
import { connect } from '@nats-io/transport-node';
import { loadConfig, type Config } from '../../src/config/config.ts';
import { JetStreamEventStore as EventStore } from '../../src/event-store/jetstream-event-store.ts';
import { ensureEventStream } from '../../src/event-store/stream-setup.ts';
import { Subjects } from '../../src/event-store/subjects.ts';
import type { EventEnvelope } from '../../src/events/envelope.ts';
import { computeEventHash, sealEvent } from '../../src/events/event-hash.ts';
import { EventSigner } from '../../src/events/signing/event-signer.ts';
import { loadSigningKeys, signingBucketName } from '../../src/events/signing/event-signing.ts';
import { EventVerifier } from '../../src/events/signing/event-verifier.ts';
import { ACTIVATION_KEY } from '../../src/events/signing/signing-activation.ts';
import { DEFAULT_SIGNING_KEY_FILE, keyIdOf, knownKeys, publicKeyPem, readPrivateKeyFile, SigningKeyError } from '../../src/events/signing/signing-keys.ts';
import { UntrustedEventError } from '../../src/events/signing/untrusted-event-error.ts';
import type { Infrastructure } from '../../src/runtime/infrastructure.ts';
import { createLogger } from '../../src/log/logger.ts';
import { startService, type RunningService } from '../../src/runtime/service.ts';
import { ChainedAppender } from '../support/chained-appender.ts';
import { runCli } from '../support/cli.ts';
import { workspaceCreated } from '../support/event-factory.ts';
import { forgeAdminKey } from '../support/forged-events.ts';
import { dropIsolated, isolatedConfig, writeTestSigningKey } from '../support/isolation.ts';
import { startTestService, type TestService, type TestTenant } from '../support/test-service.ts';

/** Infrastructure plus running projectors (which create the read-model tables `audit verify` compares). */
async function openWithProjectors(config: Config): Promise<RunningService> {
  return startService({ ...config, roles: ['projectors'] }, createLogger('silent'));
}

const tempDir = () => mkdtempSync(join(tmpdir(), 'adsagent-signing-'));

/** A PEM file of the public keys of the given private key files, as an auditor would keep it. */
function publicKeyFile(...privateKeyFiles: string[]): string {
  const path = join(tempDir(), 'public.pem');
  writeFileSync(path, privateKeyFiles.map((file) => publicKeyPem(createPublicKey(readPrivateKeyFile(file)))).join(''));
  return path;
}

async function allEvents(infra: Infrastructure): Promise<{ seq: number; subject: string; event: EventEnvelope }[]> {
  const head = await infra.store.lastSequence();
  const events = [];
  for await (const stored of infra.store.readFiltered(infra.subjects.all, 1, head)) events.push(stored);
  return events;
}

function untrustedCode(run: () => void): string {
  try {
    run();
  } catch (error) {
    if (error instanceof UntrustedEventError) return error.code;
    throw error;
  }
  return 'trusted';
}

describe('signed events', function () {
  this.timeout(120_000);

  describe('appended by the service', () => {
    let svc: TestService;
    let tenant: TestTenant;

    before(async () => {
      svc = await startTestService('signing');
      tenant = await svc.tenant();
    });
    after(async () => svc?.stop());

    it('carry key_id and a signature that verifies with the served public key alone (canonical JSON without `signature`)', async () => {
      const listed = await svc.request('GET', '/api/v1/event-signing-keys');
      expect(listed.status).to.equal(200);
      const [current] = ((await listed.json()) as { data: { key_id: string; public_key_pem: string }[] }).data;
      const publicKey = createPublicKey(current!.public_key_pem);
      const events = await allEvents(svc.service.infrastructure);
      expect(events.length).to.be.greaterThan(6);
      for (const { event } of events) {
        expect(event.key_id).to.equal(current!.key_id);
        // What an auditor in another language does: RFC 8785 of the envelope minus `signature`, Ed25519 verify.
        const { signature, ...signed } = event;
        expect(verify(null, Buffer.from(canonicalize(signed)!, 'utf8'), publicKey, Buffer.from(signature!, 'base64url'))).to.equal(true);
        // The hash covers key_id (everything but hash, prev_hash and signature).
        expect(computeEventHash(event, event.prev_hash)).to.equal(event.hash);
      }
    });

    it('serves GET /api/v1/event-signing-keys without authentication: key id, PEM and RFC 8037 JWK, status and activation time', async () => {
      const response = await svc.request('GET', '/api/v1/event-signing-keys');
      expect(response.status).to.equal(200);
      expect(response.headers.get('cache-control')).to.equal('public, max-age=60');
      const body = (await response.json()) as { object: string; data: any[] };
      expect(body.object).to.equal('list');
      expect(body.data).to.have.length(1);
      const [key] = body.data;
      const signer = svc.service.infrastructure.signing.signer!;
      expect(key).to.include({ key_id: signer.keyId, algorithm: 'Ed25519', status: 'current' });
      expect(Date.parse(key.activated_at)).to.be.within(Date.now() - 120_000, Date.now());
      expect(keyIdOf(createPublicKey(key.public_key_pem))).to.equal(key.key_id);
      const fromJwk = createPublicKey({ key: { kty: 'OKP', crv: 'Ed25519', x: key.public_key_jwk.x }, format: 'jwk' });
      expect(publicKeyPem(fromJwk)).to.equal(key.public_key_pem);
      expect(key.public_key_jwk).to.include({ kty: 'OKP', crv: 'Ed25519', kid: key.key_id, use: 'sig', alg: 'EdDSA' });
      // The private key appears nowhere.
      expect(JSON.stringify(body)).to.not.match(/PRIVATE KEY|"d":/);
    });

    it('exports the public keys with `adsagent keys export-public` (PEM, and --json like the endpoint)', async () => {
      const pem = await runCli(svc.config, ['keys', 'export-public']);
      expect(pem.code, pem.stderr).to.equal(0);
      expect(pem.stdout).to.include('-----BEGIN PUBLIC KEY-----');
      expect(pem.stdout).to.not.include('PRIVATE');
      expect(keyIdOf(createPublicKey(pem.stdout.slice(pem.stdout.indexOf('-----BEGIN'))))).to.equal(svc.service.infrastructure.signing.signer!.keyId);
      const json = await runCli(svc.config, ['keys', 'export-public', '--json']);
      expect(json.code, json.stderr).to.equal(0);
      const served = (await (await svc.request('GET', '/api/v1/event-signing-keys')).json()) as unknown;
      expect(JSON.parse(json.stdout)).to.deep.equal(served);
    });

    it('audit verify --public-key passes the untouched log, then names a forged, correctly chained ApiKeyIssued (admin) by its sequence, exit 1', async () => {
      const exported = await runCli(svc.config, ['keys', 'export-public']);
      const file = join(tempDir(), 'auditor.pem');
      writeFileSync(file, exported.stdout);

      const clean = await runCli(svc.config, ['audit', 'verify', '--public-key', file, '--json']);
      expect(clean.code, clean.stderr + clean.stdout).to.equal(0);
      const report = JSON.parse(clean.stdout);
      expect(report.ok).to.equal(true);
      expect(report.signedEvents).to.equal(report.events);
      expect(report.legacyEvents).to.equal(0);

      const forged = await forgeAdminKey(svc.service.infrastructure, tenant.workspaceId);
      // The forgery is internally consistent: only the missing signature gives it away.
      expect(computeEventHash(forged.event, forged.event.prev_hash)).to.equal(forged.event.hash);
      const caught = await runCli(svc.config, ['audit', 'verify', '--public-key', file, '--json']);
      expect(caught.code).to.equal(1);
      expect(JSON.parse(caught.stdout).discrepancy).to.include({ kind: 'unsigned', seq: forged.seq, subject: forged.subject });
      const human = await runCli(svc.config, ['audit', 'verify', '--public-key', file]);
      expect(human.code).to.equal(1);
      expect(human.stdout).to.include(`DISCREPANCY at stream sequence ${forged.seq} (unsigned)`);
    });
  });

  describe('EventVerifier', () => {
    const serviceSigner = new EventSigner(generateKeyPairSync('ed25519').privateKey);
    const attacker = new EventSigner(generateKeyPairSync('ed25519').privateKey);
    const keys = knownKeys(serviceSigner.publicKey, []);
    const subject = 'ads.v1.ws._.workspace.ws';
    const signed = sealEvent(workspaceCreated('ws'), '0'.repeat(64), serviceSigner);
    const unsigned = sealEvent(workspaceCreated('ws'), '0'.repeat(64));

    it('believes an event signed by a known key', () => {
      expect(new EventVerifier(keys, { firstSignedSeq: 1, keyId: serviceSigner.keyId }).verdict(signed, subject, 5)).to.deep.equal({ kind: 'signed', keyId: serviceSigner.keyId });
    });

    it('refuses a key it does not know (unknown-key), an altered event and a malformed signature (bad-signature)', () => {
      const verifier = new EventVerifier(keys, { firstSignedSeq: 1, keyId: serviceSigner.keyId });
      expect(untrustedCode(() => verifier.check(sealEvent(workspaceCreated('ws'), '0'.repeat(64), attacker), subject, 5))).to.equal('unknown-key');
      const altered = { ...signed, data: { name: 'renamed' } };
      expect(untrustedCode(() => verifier.check(altered, subject, 5))).to.equal('bad-signature');
      // Once the genuine event verified (and is remembered), its signature on altered content still fails.
      verifier.check(signed, subject, 5);
      expect(untrustedCode(() => verifier.check(altered, subject, 6))).to.equal('bad-signature');
      verifier.check(signed, subject, 7);
      // The attacker's signature under the service's key id.
      const borrowed = { ...sealEvent(workspaceCreated('ws'), '0'.repeat(64), attacker), key_id: serviceSigner.keyId };
      expect(untrustedCode(() => verifier.check(borrowed, subject, 5))).to.equal('bad-signature');
      expect(untrustedCode(() => verifier.check({ ...signed, signature: 'x' }, subject, 5))).to.equal('bad-signature');
      expect(untrustedCode(() => verifier.check({ ...signed, signature: 42 } as unknown as EventEnvelope, subject, 5))).to.equal('bad-signature');
      expect(untrustedCode(() => verifier.check({ ...unsigned, key_id: serviceSigner.keyId }, subject, 5))).to.equal('bad-signature');
    });

    it('accepts an unsigned event below the activation point as legacy and refuses one at or after it (unsigned)', () => {
      const verifier = new EventVerifier(keys, { firstSignedSeq: 10, keyId: serviceSigner.keyId });
      expect(verifier.verdict(unsigned, subject, 9)).to.deep.equal({ kind: 'legacy', beforeKeyId: serviceSigner.keyId });
      expect(untrustedCode(() => verifier.check(unsigned, subject, 10))).to.equal('unsigned');
      expect(untrustedCode(() => verifier.check(unsigned, subject, 11))).to.equal('unsigned');
    });

    it('without an activation point, learns it from the first validly signed event (a read from sequence 1)', () => {
      const verifier = new EventVerifier(keys, null);
      expect(verifier.verdict(unsigned, subject, 1).kind).to.equal('legacy');
      expect(untrustedCode(() => verifier.check(sealEvent(workspaceCreated('ws'), '0'.repeat(64), attacker), subject, 2))).to.equal('unknown-key');
      expect(verifier.verdict(unsigned, subject, 3).kind).to.equal('legacy');
      verifier.check(signed, subject, 4);
      expect(verifier.activation).to.deep.equal({ firstSignedSeq: 4, keyId: serviceSigner.keyId });
      expect(untrustedCode(() => verifier.check(unsigned, subject, 5))).to.equal('unsigned');
    });

    it('off the event loop (verdictOffThread), reaches the same verdicts as verdict, one event after the other', async () => {
      const altered = { ...signed, data: { name: 'renamed' } };
      const borrowed = { ...sealEvent(workspaceCreated('ws'), '0'.repeat(64), attacker), key_id: serviceSigner.keyId };
      const cases: [EventEnvelope, number][] = [
        [signed, 12],
        [altered, 13],
        [borrowed, 14],
        [sealEvent(workspaceCreated('ws'), '0'.repeat(64), attacker), 15],
        [{ ...signed, signature: 'x' }, 16],
        [unsigned, 9],
        [unsigned, 17],
      ];
      for (const rememberVerified of [true, false]) {
        const onLoop = new EventVerifier(keys, { firstSignedSeq: 10, keyId: serviceSigner.keyId }, { rememberVerified });
        const offLoop = new EventVerifier(keys, { firstSignedSeq: 10, keyId: serviceSigner.keyId }, { rememberVerified });
        const expected = cases.map(([event, seq]) => untrustedCode(() => onLoop.verdict(event, subject, seq)));
        const actual = await Promise.all(cases.map(([event, seq]) => offLoop.verdictOffThread(event, subject, seq).then(() => 'trusted', (error: unknown) => (error instanceof UntrustedEventError ? error.code : 'other'))));
        expect(actual).to.deep.equal(expected);
        expect(expected).to.deep.equal(['trusted', 'bad-signature', 'bad-signature', 'unknown-key', 'bad-signature', 'trusted', 'unsigned']);
      }
    });

    it('off the event loop without an activation point, takes the first signed event as it at once, before its signature is settled', async () => {
      const verifier = new EventVerifier(keys, null);
      const checks = [verifier.verdictOffThread(unsigned, subject, 1), verifier.verdictOffThread(signed, subject, 2), verifier.verdictOffThread(unsigned, subject, 3)];
      expect(verifier.activation).to.deep.equal({ firstSignedSeq: 2, keyId: serviceSigner.keyId });
      const settled = await Promise.allSettled(checks);
      expect(settled.map((s) => (s.status === 'fulfilled' ? s.value.kind : (s.reason as UntrustedEventError).code))).to.deep.equal(['legacy', 'signed', 'unsigned']);
    });
  });

  describe('a stream whose signing began with a key this process does not hold', () => {
    let config: Config | undefined;
    after(async () => {
      if (config) await dropIsolated(config);
    });

    it('is said at start in one warning naming that key and what to set (another checkout\'s development key, say); the next start of the same key says nothing', async () => {
      config = isolatedConfig('foreignkey');
      const first = writeTestSigningKey();
      const lines: Record<string, unknown>[] = [];
      const logger = createLogger('info', {}, { write: (line: string) => void lines.push(JSON.parse(line) as Record<string, unknown>) });
      const started = async (keyFile: string) => {
        lines.length = 0;
        const service = await startService({ ...config!, eventSigningKeyFile: keyFile, roles: ['projectors'] }, logger);
        const appender = new ChainedAppender(service.infrastructure);
        await appender.append(appender.workspaceSubject(`ws-${lines.length}-${Date.now()}`), workspaceCreated('ws'));
        await service.stop();
        return lines.filter((line) => line.level === 'warn' && String(line.msg).startsWith('signing of this event stream began with key'));
      };
      expect(await started(first)).to.deep.equal([]);
      const second = writeTestSigningKey();
      const warned = await started(second);
      const firstKeyId = keyIdOf(createPublicKey(readPrivateKeyFile(first)));
      expect(warned).to.have.length(1);
      expect(warned[0]!.key_id).to.equal(firstKeyId);
      expect(String(warned[0]!.msg)).to.include(`began with key ${firstKeyId}, which this process does not hold`).and.include('EVENT_SIGNING_KEY_FILE');
      expect(await started(second)).to.deep.equal([]);
    });
  });

  describe('legacy events written before signing existed', () => {
    let config: Config;
    let service: RunningService | undefined;
    after(async () => {
      await service?.stop();
      if (config) await dropIsolated(config);
    });

    it('verify as "unsigned, before key X"; an unsigned event after activation does not, even after the activation record is deleted', async () => {
      config = isolatedConfig('legacy');
      const subjects = new Subjects(config.subjectPrefix);
      const nc = await connect({ servers: config.natsUrl });
      try {
        const jsm = await jetstreamManager(nc);
        await ensureEventStream(jsm, { name: config.eventStream, subjects: [subjects.all], replicas: 1 });
        // A store from before signing: appends without a signer.
        const legacy = new EventStore(jetstream(nc), jsm, config.eventStream);
        for (const id of ['legacy-a', 'legacy-b', 'legacy-c']) {
          await legacy.append(subjects.forAggregate({ workspaceId: id, accountId: null, aggregate: { type: 'workspace', id } }), [workspaceCreated(id)], { lastSequence: 0, lastHash: '0'.repeat(64) });
        }

        service = await openWithProjectors(config);
        let infra = service.infrastructure;
        const keyId = infra.signing.signer!.keyId;
        expect(infra.signing.verifier.activation).to.deep.equal({ firstSignedSeq: 4, keyId });
        const appender = new ChainedAppender(infra);
        const signed = await appender.append(appender.workspaceSubject('signed-a'), workspaceCreated('signed-a'));
        expect(signed.seq).to.equal(4);

        const ok = await runCli(config, ['audit', 'verify', '--json']);
        expect(ok.code, ok.stderr + ok.stdout).to.equal(0);
        expect(JSON.parse(ok.stdout)).to.include({ ok: true, events: 4, signedEvents: 1, legacyEvents: 3, legacyBeforeKeyId: keyId });
        const human = await runCli(config, ['audit', 'verify']);
        expect(human.stdout).to.include(`1 signatures valid, 3 unsigned legacy (before key ${keyId})`);

        // A record moved by whoever can write to the bucket does not verify and is rewritten at the true point.
        const kv = await new Kvm(nc).open(signingBucketName(config.eventStream));
        const genuine = JSON.parse((await kv.get(ACTIVATION_KEY))!.string()) as Record<string, unknown>;
        await kv.put(ACTIVATION_KEY, JSON.stringify({ ...genuine, first_signed_seq: 1000 }));
        await service.stop();
        service = await openWithProjectors(config);
        infra = service.infrastructure;
        expect(infra.signing.verifier.activation).to.deep.equal({ firstSignedSeq: 4, keyId });

        // Deleting the activation record does not move the point: the next start finds the first signed event.
        await kv.delete(ACTIVATION_KEY);
        await service.stop();
        service = await openWithProjectors(config);
        infra = service.infrastructure;
        expect(infra.signing.verifier.activation).to.deep.equal({ firstSignedSeq: 4, keyId });

        const late = await legacy.append(subjects.forAggregate({ workspaceId: 'late', accountId: null, aggregate: { type: 'workspace', id: 'late' } }), [workspaceCreated('late')], { lastSequence: 0, lastHash: '0'.repeat(64) });
        expect(untrustedCode(() => infra.signing.verifier.check(late[0]!.event, late[0]!.subject, late[0]!.seq))).to.equal('unsigned');
        const caught = await runCli(config, ['audit', 'verify', '--json']);
        expect(caught.code).to.equal(1);
        expect(JSON.parse(caught.stdout).discrepancy).to.include({ kind: 'unsigned', seq: late[0]!.seq });
      } finally {
        await nc.close();
      }
    });
  });

  describe('key rotation', () => {
    let config: Config;
    after(async () => {
      if (config) await dropIsolated(config);
    });

    it('events of the retired key and of the new key both verify; an auditor without the retired key is told which event it cannot check', async () => {
      config = isolatedConfig('rotation');
      const oldKey = config.eventSigningKeyFile!;
      const firstService = await openWithProjectors(config);
      const first = firstService.infrastructure;
      const before = new ChainedAppender(first);
      await before.append(before.workspaceSubject('old-1'), workspaceCreated('old-1'));
      await before.append(before.workspaceSubject('old-2'), workspaceCreated('old-2'));
      const oldKeyId = first.signing.signer!.keyId;
      await firstService.stop();

      const newKey = writeTestSigningKey();
      const rotated: Config = { ...config, eventSigningKeyFile: newKey, eventSigningRetiredPublicKeys: publicKeyFile(oldKey) };
      const secondService = await openWithProjectors(rotated);
      const second = secondService.infrastructure;
      try {
        const newKeyId = second.signing.signer!.keyId;
        expect(newKeyId).to.not.equal(oldKeyId);
        const after = new ChainedAppender(second);
        await after.append(after.workspaceSubject('new-1'), workspaceCreated('new-1'));
        await after.append(after.workspaceSubject('old-1'), workspaceCreated('old-1', 'again'));
        const keyIds = (await allEvents(second)).map((s) => s.event.key_id);
        expect(keyIds).to.deep.equal([oldKeyId, oldKeyId, newKeyId, newKeyId]);
        // Signing began with the old key; rotation does not move that point.
        expect(second.signing.verifier.activation).to.deep.equal({ firstSignedSeq: 1, keyId: oldKeyId });
        const described = await second.signing.describeKeys();
        expect(described.map((k) => [k.key_id, k.status])).to.deep.equal([
          [newKeyId, 'current'],
          [oldKeyId, 'retired'],
        ]);
        for (const key of described) expect(key.activated_at).to.be.a('string');

        const withConfiguredKeys = await runCli(rotated, ['audit', 'verify', '--json']);
        expect(withConfiguredKeys.code, withConfiguredKeys.stderr + withConfiguredKeys.stdout).to.equal(0);
        expect(JSON.parse(withConfiguredKeys.stdout)).to.include({ signedEvents: 4, legacyEvents: 0 });

        const exported = await runCli(rotated, ['keys', 'export-public']);
        const both = join(tempDir(), 'both.pem');
        writeFileSync(both, exported.stdout);
        const offline = await runCli(rotated, ['audit', 'verify', '--public-key', both, '--json']);
        expect(offline.code, offline.stderr + offline.stdout).to.equal(0);

        const onlyNew = await runCli(rotated, ['audit', 'verify', '--public-key', publicKeyFile(newKey), '--json']);
        expect(onlyNew.code).to.equal(1);
        expect(JSON.parse(onlyNew.stdout).discrepancy).to.include({ kind: 'unknown_key', seq: 1 });

        // The old key alone, as the current key's auditor would not have it: the new events are unknown.
        const onlyOld = await runCli(rotated, ['audit', 'verify', '--public-key', publicKeyFile(oldKey), '--json']);
        expect(onlyOld.code).to.equal(1);
        expect(JSON.parse(onlyOld.stdout).discrepancy).to.include({ kind: 'unknown_key', seq: 3 });
      } finally {
        await secondService.stop();
      }
    });
  });

  describe('key files', () => {
    it('with EVENT_SIGNING_KEY_FILE unset, generates a key once (mode 0600) with one notice, and reuses it', () => {
      const cwd = tempDir();
      const notices: string[] = [];
      const first = loadSigningKeys({ eventSigningKeyFile: undefined, eventSigningRetiredPublicKeys: undefined }, cwd, (m) => notices.push(m));
      const path = join(cwd, DEFAULT_SIGNING_KEY_FILE);
      expect(statSync(path).mode & 0o777).to.equal(0o600);
      expect(readFileSync(path, 'utf8')).to.match(/^-----BEGIN PRIVATE KEY-----/);
      expect(notices).to.have.length(1);
      expect(notices[0]).to.include(path).and.include(first.signer!.keyId).and.include('EVENT_SIGNING_KEY_FILE');
      const second = loadSigningKeys({ eventSigningKeyFile: undefined, eventSigningRetiredPublicKeys: undefined }, cwd, (m) => notices.push(m));
      expect(second.signer!.keyId).to.equal(first.signer!.keyId);
      expect(notices).to.have.length(1);
    });

    it('refuses a configured key file that is missing, not Ed25519, or a retired-keys file holding a private key', () => {
      const dir = tempDir();
      const missing = join(dir, 'missing.pem');
      expect(() => loadSigningKeys({ eventSigningKeyFile: missing, eventSigningRetiredPublicKeys: undefined }, dir, () => undefined)).to.throw(SigningKeyError, /cannot be read/);
      const ec = join(dir, 'ec.pem');
      writeFileSync(ec, generateKeyPairSync('ec', { namedCurve: 'P-256' }).privateKey.export({ format: 'pem', type: 'pkcs8' }));
      expect(() => loadSigningKeys({ eventSigningKeyFile: ec, eventSigningRetiredPublicKeys: undefined }, dir, () => undefined)).to.throw(SigningKeyError, /not Ed25519/);
      const key = writeTestSigningKey();
      expect(() => loadSigningKeys({ eventSigningKeyFile: key, eventSigningRetiredPublicKeys: key }, dir, () => undefined)).to.throw(SigningKeyError, /PRIVATE KEY/);
    });

    it('audit verify --public-key with a missing file or a private key: one line, exit 1', async () => {
      const config = isolatedConfig('pubkeyfile');
      const missing = await runCli(config, ['audit', 'verify', '--public-key', join(tempDir(), 'none.pem')]);
      expect(missing.code).to.equal(1);
      expect(missing.stderr).to.match(/adsagent: public key path .*none\.pem cannot be read: ENOENT/);
      const privateKey = await runCli(config, ['audit', 'verify', '--public-key', writeTestSigningKey()]);
      expect(privateKey.code).to.equal(1);
      expect(privateKey.stderr).to.include("holds a 'PRIVATE KEY' block; only PUBLIC KEY blocks belong there");
    });

    it('are validated at start: the CLI reports a bad key file in one line, exit 1', async () => {
      const config = loadConfig({ ...process.env, EVENT_SIGNING_KEY_FILE: join(tempDir(), 'typo.pem') });
      const result = await runCli(config, ['keys', 'export-public']);
      expect(result.code).to.equal(1);
      expect(result.stderr).to.match(/adsagent: event signing key .*typo\.pem cannot be read: ENOENT/);
    });
  });
});
