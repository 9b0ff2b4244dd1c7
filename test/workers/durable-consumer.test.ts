import { expect } from 'chai';
import { AckPolicy, DeliverPolicy } from '@nats-io/jetstream';
import { openInfrastructure, type Infrastructure } from '../../src/runtime/infrastructure.ts';
import { ensureDurableConsumer, type DurableConsumerSpec } from '../../src/workers/durable-consumer.ts';
import { dropIsolated, isolatedConfig } from '../support/isolation.ts';

/** The consumer set-up both workers share (src/workers/durable-consumer.ts), on a real server. */
describe('worker durable consumer set-up', () => {
  const config = isolatedConfig('durable');
  let infra: Infrastructure;
  let spec: DurableConsumerSpec;

  before(async () => {
    infra = await openInfrastructure(config, 'test-durable-consumer');
    spec = { stream: config.eventStream, durableName: 'durable_test', filterSubject: infra.subjects.filter('*', '*', 'action'), ackWaitMs: 30_000, maxAckPending: 10_000 };
  });
  after(async () => {
    await infra.close();
    await dropIsolated(config);
  });

  it('creates a missing consumer with explicit acks from the start of the stream', async () => {
    await ensureDurableConsumer(infra.js, infra.jsm, spec);
    const { config: created } = await infra.jsm.consumers.info(config.eventStream, spec.durableName);
    expect(created).to.include({ durable_name: 'durable_test', ack_policy: AckPolicy.Explicit, deliver_policy: DeliverPolicy.All, filter_subject: spec.filterSubject });
    expect(created).to.include({ ack_wait: 30_000 * 1_000_000, max_ack_pending: 10_000 });
  });

  it('updates a consumer whose settings drifted, keeping its position', async () => {
    const name = 'durable_drifted';
    await infra.jsm.consumers.add(config.eventStream, {
      durable_name: name,
      ack_policy: AckPolicy.Explicit,
      deliver_policy: DeliverPolicy.All,
      filter_subject: infra.subjects.filter('*', '*', 'account'),
      ack_wait: 5_000_000_000,
      max_ack_pending: 100,
    });
    const before = await infra.jsm.consumers.info(config.eventStream, name);
    await ensureDurableConsumer(infra.js, infra.jsm, { ...spec, durableName: name });
    const after = await infra.jsm.consumers.info(config.eventStream, name);
    expect(after.config).to.include({ filter_subject: spec.filterSubject, ack_wait: 30_000 * 1_000_000, max_ack_pending: 10_000 });
    expect(after.created).to.equal(before.created);
  });

  it('lets many processes set it up at once', async () => {
    const racing = { ...spec, durableName: 'durable_race' };
    const consumers = await Promise.all(Array.from({ length: 8 }, () => ensureDurableConsumer(infra.js, infra.jsm, racing)));
    expect(consumers).to.have.length(8);
    const { config: created } = await infra.jsm.consumers.info(config.eventStream, racing.durableName);
    expect(created.filter_subject).to.equal(spec.filterSubject);
  });
});
