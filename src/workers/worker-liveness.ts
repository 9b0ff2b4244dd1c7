import { RequestError, TimeoutError, type NatsConnection, type Subscription } from '@nats-io/nats-core';

/**
 * Whether the worker that claimed a run is still working on it, asked over core NATS
 * request/reply (nothing is stored). A redelivered run message alone does not prove its
 * worker died: a NATS failover or a long pause can drop the heartbeats of a healthy worker.
 */
export const Liveness = {
  /** The owner answered and is working on the run. */
  Working: 'working',
  /** The owner answered and is not working on it (it lost the run). */
  NotWorking: 'not-working',
  /** Nobody listens for the owner (NATS says no responders): its process is gone. */
  Gone: 'gone',
  /** No answer in time, or NATS itself is in trouble: decide later. */
  Unknown: 'unknown',
} as const;
export type Liveness = (typeof Liveness)[keyof typeof Liveness];

const ASK_TIMEOUT_MS = 2000;

/**
 * The subject a worker answers on. Outside the event subjects (`<prefix>.>` is the event
 * stream's), and the worker id, which holds a host name with dots, is one base64url token.
 */
export function livenessSubject(subjectPrefix: string, workerId: string): string {
  return `${subjectPrefix}_workers.${Buffer.from(workerId).toString('base64url')}`;
}

/**
 * A worker's answering side: replies to liveness questions with the runs it is working on.
 *
 * @example
 * ```ts
 * const liveness = WorkerLiveness.answer(nc, 'ads', workerId, () => inFlight.keys());
 * const answer = await askLiveness(nc, 'ads', ownerId, runId); // 'working' | 'not-working' | 'gone' | 'unknown'
 * liveness.stop();
 * ```
 */
export class WorkerLiveness {
  private readonly subscription: Subscription;

  private constructor(subscription: Subscription) {
    this.subscription = subscription;
  }

  static answer(nc: NatsConnection, subjectPrefix: string, workerId: string, runsInFlight: () => Iterable<string>): WorkerLiveness {
    const subscription = nc.subscribe(livenessSubject(subjectPrefix, workerId), {
      callback: (error, message) => {
        if (error) return;
        message.respond(JSON.stringify({ runs: [...runsInFlight()] }));
      },
    });
    return new WorkerLiveness(subscription);
  }

  stop(): void {
    this.subscription.unsubscribe();
  }
}

/** Asks the worker `workerId` whether it is working on `runId`. Never throws. */
export async function askLiveness(nc: NatsConnection, subjectPrefix: string, workerId: string, runId: string, timeoutMs = ASK_TIMEOUT_MS): Promise<Liveness> {
  try {
    const reply = await nc.request(livenessSubject(subjectPrefix, workerId), '', { timeout: timeoutMs });
    const { runs } = reply.json<{ runs?: unknown }>();
    return Array.isArray(runs) && runs.includes(runId) ? Liveness.Working : Liveness.NotWorking;
  } catch (error) {
    if (error instanceof RequestError && error.isNoResponders()) return Liveness.Gone;
    if (error instanceof TimeoutError) return Liveness.Unknown;
    return Liveness.Unknown;
  }
}
