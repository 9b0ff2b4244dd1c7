import { expect } from 'chai';
import { JetStreamApiError } from '@nats-io/jetstream';
import { TimeoutError } from '@nats-io/nats-core';
import { retryWhileNatsUnavailable } from '../../src/event-store/nats-retry.ts';

/** Start-up steps and restarted reads retry only what "no server can answer" means. */
describe('retryWhileNatsUnavailable', () => {
  const failing = (failures: readonly Error[], value = 'done') => {
    let calls = 0;
    return {
      get calls() {
        return calls;
      },
      attempt: async () => {
        const failure = failures[calls++];
        if (failure) throw failure;
        return value;
      },
    };
  };

  it('given two timeouts, when retried, then the third attempt answers', async () => {
    const step = failing([new TimeoutError(), new TimeoutError()]);
    expect(await retryWhileNatsUnavailable(step.attempt, { deadline: Date.now() + 5000 })).to.equal('done');
    expect(step.calls).to.equal(3);
  });

  it('given a refusal (not an outage), then it is thrown at once', async () => {
    const refusal = new JetStreamApiError({ code: 400, err_code: 10058, description: 'stream name already in use with a different configuration' });
    const step = failing([refusal]);
    const error = await retryWhileNatsUnavailable(step.attempt, { deadline: Date.now() + 5000 }).catch((e: unknown) => e);
    expect(error).to.equal(refusal);
    expect(step.calls).to.equal(1);
  });

  it('given JetStream 503 past the deadline, then the last failure is thrown', async () => {
    const unavailable = () => new JetStreamApiError({ code: 503, err_code: 10008, description: 'JetStream system temporarily unavailable' });
    const step = failing(Array.from({ length: 100 }, unavailable));
    const error = await retryWhileNatsUnavailable(step.attempt, { deadline: Date.now() + 300 }).catch((e: unknown) => e);
    expect(error).to.be.instanceOf(JetStreamApiError);
    expect(step.calls).to.be.within(2, 5);
  });

  it('given an abort, then it stops and answers undefined', async () => {
    const controller = new AbortController();
    controller.abort();
    const step = failing([]);
    expect(await retryWhileNatsUnavailable(step.attempt, { deadline: Infinity, signal: controller.signal })).to.equal(undefined);
    expect(step.calls).to.equal(0);
  });
});
