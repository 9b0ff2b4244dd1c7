import { expect } from 'chai';
import type { AdmissionResult } from '../../src/events/event-admission.ts';
import type { EventEnvelope } from '../../src/events/envelope.ts';
import { createLogger } from '../../src/log/logger.ts';
import { RunStateFollower, type FollowableStore } from '../../src/runtime/run-state-follower.ts';
import { eventually } from '../support/eventually.ts';

/** A RunQueued as the store would admit it, at stream sequence `seq`. */
function runQueued(seq: number, runId: string): AdmissionResult {
  const event = {
    id: `e${seq}`,
    type: 'RunQueued',
    version: 1,
    time: new Date().toISOString(),
    workspace_id: 'ws',
    account_id: 'acc',
    aggregate: { type: 'account', id: 'acc' },
    actor: { kind: 'api_key', id: 'k' },
    correlation_id: runId,
    data: { run_id: runId, brief: 'b', auto_apply: false, key_id: 'k', scope: 'write' },
    prev_hash: '0'.repeat(64),
    hash: '0'.repeat(64),
  } as unknown as EventEnvelope;
  return { ok: true, stored: { seq, subject: 'x.v1.ws.acc.account.acc', event } };
}

/**
 * The store side of a NATS failover: the first follow ends without an error (its consumer was
 * closed); the next one delivers what is appended from then on.
 */
class FollowThatEndsOnce implements FollowableStore {
  follows = 0;
  head = 0;
  private readonly queue: AdmissionResult[] = [];
  private wake: (() => void) | undefined;

  append(result: AdmissionResult): void {
    if (result.ok) this.head = result.stored.seq;
    this.queue.push(result);
    this.wake?.();
  }

  async lastSequence(): Promise<number> {
    return this.head;
  }

  async *followChecked(_filter: string, _fromSeq: number, signal: AbortSignal): AsyncGenerator<AdmissionResult> {
    this.follows++;
    if (this.follows === 1) return; // ended, unasked
    while (!signal.aborted) {
      const next = this.queue.shift();
      if (next) yield next;
      else await new Promise<void>((resolve) => ((this.wake = resolve), signal.addEventListener('abort', () => resolve(), { once: true })));
    }
  }
}

describe('run state follower (GET of live runs from memory)', () => {
  it('given a follow that ends unasked (a closed consumer in a failover), then it follows again instead of serving frozen runs', async () => {
    const store = new FollowThatEndsOnce();
    const follower = new RunStateFollower({ store, filter: 'x.>', logger: createLogger('silent'), retryMs: 10 });
    await follower.start();
    try {
      await eventually(() => expect(store.follows).to.equal(2), 5000);
      store.append(runQueued(1, 'r1'));
      await eventually(() => expect(follower.get('r1')?.row.status).to.equal('queued'), 5000);
    } finally {
      await follower.stop();
    }
  });
});
