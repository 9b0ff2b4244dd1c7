import { expect } from 'chai';
import { jetstream, jetstreamManager, type JetStreamClient, type JetStreamManager } from '@nats-io/jetstream';
import type { NatsConnection } from '@nats-io/nats-core';
import { connect } from '@nats-io/transport-node';
import { JetStreamEventStore } from '../../src/event-store/jetstream-event-store.ts';
import type { ReadStall } from '../../src/event-store/ordered-read.ts';
import { PrivateNatsCluster } from '../support/private-nats-cluster.ts';

const STREAM = 'ORDERED_READ_FAILOVER';
const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

/**
 * A follow of the stream (the HTTP processes' run-state follower, SSE, `events tail`) reads
 * through an ordered consumer, which lives on one server. This kills exactly that server
 * while the cluster keeps the R3 stream, and asserts the follow goes on: every message, in
 * order, none twice.
 */
describe('event store: a follow survives the loss of the server its consumer lives on', function () {
  this.timeout(180_000);
  let cluster: PrivateNatsCluster;
  let nc: NatsConnection;
  let js: JetStreamClient;
  let jsm: JetStreamManager;

  before(async () => {
    cluster = await PrivateNatsCluster.start(3);
    nc = await connect({ servers: cluster.url.split(','), maxReconnectAttempts: -1, reconnectTimeWait: 100 });
    jsm = await jetstreamManager(nc, { timeout: 2000 });
    js = jetstream(nc, { timeout: 2000 });
    // As ensureEventStream creates the event stream: direct gets on (the stall check uses them).
    await jsm.streams.add({ name: STREAM, subjects: ['ordered.>'], num_replicas: 3, allow_direct: true });
  });

  after(async () => {
    await nc?.close().catch(() => undefined);
    await cluster?.dispose();
  });

  /** Publishes until the cluster takes it (an election after a kill refuses for a few seconds). */
  async function publish(n: number): Promise<number> {
    const deadline = Date.now() + 60_000;
    for (;;) {
      try {
        return (await js.publish(`ordered.m.${n % 3}`, JSON.stringify({ n }), { msgID: `m-${n}` })).seq;
      } catch (error) {
        if (Date.now() > deadline) throw error;
        await sleep(200);
      }
    }
  }

  it('delivers every message after the node holding its consumer is killed, in order, once each', async () => {
    const stalls: ReadStall[] = [];
    const store = new JetStreamEventStore(js, jsm, STREAM, { readStallCheckMs: 500, onReadStall: (stall) => stalls.push(stall) });
    const controller = new AbortController();
    const received: number[] = [];
    const following = (async () => {
      for await (const message of store.followRaw('ordered.>', 1, controller.signal)) received.push((JSON.parse(message.text) as { n: number }).n);
    })();
    try {
      for (let n = 1; n <= 5; n++) await publish(n);
      await waitFor(() => received.length === 5, 10_000, () => `before the kill: ${received.join(',')}`);

      // The follow's ordered consumer is the stream's only consumer: kill the server it lives on.
      const host = await consumerHost(jsm);
      await cluster.kill(Number(host.replace(/^n/, '')) - 1);
      for (let n = 6; n <= 10; n++) await publish(n);

      await waitFor(() => received.length >= 10, 30_000, () => `after killing ${host}: ${received.join(',')}; stalls ${JSON.stringify(stalls)}`);
      await sleep(500);
      expect(received).to.deep.equal([1, 2, 3, 4, 5, 6, 7, 8, 9, 10]);
    } finally {
      controller.abort();
      await following;
    }
  });
});

async function consumerHost(jsm: JetStreamManager): Promise<string> {
  const consumers = await jsm.consumers.list(STREAM).next();
  expect(consumers, 'consumers of the stream').to.have.length(1);
  const host = consumers[0]!.cluster?.leader;
  expect(host, 'the server the ordered consumer lives on').to.match(/^n\d$/);
  return host!;
}

async function waitFor(done: () => boolean, timeoutMs: number, describe: () => string): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!done()) {
    if (Date.now() > deadline) throw new Error(`timed out: ${describe()}`);
    await sleep(100);
  }
}
