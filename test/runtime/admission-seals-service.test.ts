import { expect } from 'chai';
import { EMPTY_POSITION } from '../../src/event-store/event-store.ts';
import { SEAL_BLOCK } from '../../src/events/sealing/admission-seal.ts';
import { workspaceCreated } from '../support/event-factory.ts';
import { eventually } from '../support/eventually.ts';
import { sampleOf } from '../support/prometheus.ts';
import { startTestService, type TestService } from '../support/test-service.ts';

/** The service's projectors seal what they admitted: the write path of docs/operations.md, "Admission seals", wired in. */
describe('the service seals the blocks its projectors admitted', function () {
  this.timeout(60_000);
  let svc: TestService;

  before(async () => {
    svc = await startTestService('seals-service');
  });
  after(async () => svc?.stop());

  it('signs and stores a seal once the first block of the stream is admitted, and counts it in /metrics', async () => {
    const infra = svc.service.infrastructure;
    const pending: Promise<unknown>[] = [];
    for (let i = 0; i < SEAL_BLOCK + 20; i++) {
      const workspace = `ws-seal-${i}`;
      const subject = infra.subjects.forAggregate({ workspaceId: workspace, accountId: null, aggregate: { type: 'workspace', id: workspace } });
      pending.push(infra.store.append(subject, [workspaceCreated(workspace)], EMPTY_POSITION));
      if (pending.length === 50) await Promise.all(pending.splice(0));
    }
    await Promise.all(pending);
    await eventually(async () => {
      const text = await (await svc.request('GET', '/metrics')).text();
      expect(sampleOf(text, 'admission_seals_total{outcome="written"}')).to.be.at.least(1);
      expect(sampleOf(text, 'admission_seals_total{outcome="rejected"}')).to.equal(0);
    }, 20_000);
    const seal = await infra.database.db
      .selectFrom('admission_seals')
      .select(['first_seq', 'last_seq', 'key_id'])
      .where('stream', '=', svc.config.eventStream)
      .orderBy('first_seq')
      .executeTakeFirstOrThrow();
    expect([Number(seal.first_seq), Number(seal.last_seq)]).to.deep.equal([1, SEAL_BLOCK]);
    expect(seal.key_id).to.equal(infra.signing.signer!.keyId);
  });
});
