import { expect } from 'chai';
import { jetstream, jetstreamManager, type JetStreamManager } from '@nats-io/jetstream';
import { connect } from '@nats-io/transport-node';
import type { NatsConnection } from '@nats-io/nats-core';
import { ensureEventStream, eventStreamConfig, streamConfigDifferences, UnsafeEventStreamError } from '../../src/event-store/stream-setup.ts';
import { isolatedConfig } from '../support/isolation.ts';

/**
 * The event stream's set-up at every start. With the shipped NATS permissions the service may
 * not update the stream (test/deploy/nats-access.test.ts shows the refusal and the one-line
 * error); these show what it does where it may: nothing when the stream is as it wants it,
 * and its own limits back when someone changed them.
 */
describe('ensureEventStream', function () {
  this.timeout(20_000);
  const config = isolatedConfig('streamsetup');
  const name = config.eventStream;
  const options = { name, subjects: [`${config.subjectPrefix}.>`], replicas: 1 };
  let nc: NatsConnection;
  let jsm: JetStreamManager;

  before(async () => {
    nc = await connect({ servers: config.natsUrl });
    jsm = await jetstreamManager(nc);
  });
  after(async () => {
    await jsm.streams.delete(name).catch(() => undefined);
    await nc.close();
  });

  it('given no stream, creates it with the limits that keep every event', async () => {
    await ensureEventStream(jsm, options);

    const stored = (await jsm.streams.info(name)).config;
    expect(stored).to.include({ max_msgs: -1, max_bytes: -1, max_age: 0, deny_delete: true, deny_purge: true, discard: 'new' });
    const { name: _name, storage: _storage, ...wanted } = eventStreamConfig(options);
    expect(streamConfigDifferences(stored, wanted)).to.deep.equal([]);
  });

  it('given the stream as it wants it, changes nothing and loses nothing', async () => {
    const js = jetstream(nc);
    for (let i = 0; i < 5; i++) await js.publish(`${config.subjectPrefix}.probe`, `event ${i}`);
    const before = await jsm.streams.info(name);

    await ensureEventStream(jsm, options);

    const after = await jsm.streams.info(name);
    expect(after.state.messages).to.equal(5);
    expect(after.config).to.deep.equal(before.config);
  });

  it('given limits someone shrank, names each difference and sets its own limits again', async () => {
    await jsm.streams.update(name, { max_msgs: 1_000_000, max_msg_size: 1024 });
    const { name: _name, storage: _storage, ...wanted } = eventStreamConfig(options);
    expect(streamConfigDifferences((await jsm.streams.info(name)).config, wanted)).to.deep.equal(['max_msgs: 1000000 → -1', 'max_msg_size: 1024 → 1048576']);

    await ensureEventStream(jsm, options);

    const after = await jsm.streams.info(name);
    expect(after.config).to.include({ max_msgs: -1, max_msg_size: 1024 * 1024 });
    expect(after.state.messages).to.equal(5);
  });

  describe('given a stream someone made before the service\'s first start', () => {
    const other = isolatedConfig('streamsetuppre');
    const preOptions = { name: other.eventStream, subjects: [`${other.subjectPrefix}.>`], replicas: 1 };
    afterEach(async () => {
      await jsm.streams.delete(other.eventStream).catch(() => undefined);
    });

    it('keeping one event per subject or honouring rollup headers, then it sets its own values again (where the user may update)', async () => {
      await jsm.streams.add({ name: other.eventStream, subjects: preOptions.subjects, max_msgs_per_subject: 1, allow_rollup_hdrs: true });

      await ensureEventStream(jsm, preOptions);

      expect((await jsm.streams.info(other.eventStream)).config).to.include({ max_msgs_per_subject: -1, allow_rollup_hdrs: false, deny_delete: true, deny_purge: true });
    });

    it('with a republish, then it refuses the stream in one error naming it, and nothing is republished', async () => {
      await jsm.streams.add({
        name: other.eventStream,
        subjects: preOptions.subjects,
        republish: { src: `${other.subjectPrefix}.>`, dest: `${other.subjectPrefix}_republished.>` },
      });

      const error = await ensureEventStream(jsm, preOptions).then(
        () => null,
        (e: unknown) => e,
      );

      expect(error).to.be.instanceOf(UnsafeEventStreamError);
      expect((error as Error).message).to.include(`the event stream ${other.eventStream} has republish set`);
      expect((await jsm.streams.info(other.eventStream)).config.republish).to.deep.include({ dest: `${other.subjectPrefix}_republished.>` });
    });
  });
});
