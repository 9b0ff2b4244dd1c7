import { AckPolicy, DeliverPolicy, JetStreamApiCodes, JetStreamApiError, type Consumer, type ConsumerInfo, type JetStreamClient, type JetStreamManager } from '@nats-io/jetstream';
import { duringStartup } from '../event-store/nats-retry.ts';

/** The durable pull consumer a worker role shares across its processes. */
export interface DurableConsumerSpec {
  readonly stream: string;
  readonly durableName: string;
  readonly filterSubject: string;
  /** A message is redelivered when its handler neither acked nor heartbeated for this long. */
  readonly ackWaitMs: number;
  readonly maxAckPending: number;
}

/** The settings a running consumer can be changed to without losing its position. */
function wanted(spec: DurableConsumerSpec) {
  return { filter_subject: spec.filterSubject, ack_wait: spec.ackWaitMs * 1_000_000, max_ack_pending: spec.maxAckPending };
}

function drifted(info: ConsumerInfo, spec: DurableConsumerSpec): boolean {
  const want = wanted(spec);
  const { config } = info;
  return config.filter_subject !== want.filter_subject || config.ack_wait !== want.ack_wait || config.max_ack_pending !== want.max_ack_pending;
}

/**
 * Creates the worker role's durable consumer when it is missing, or updates it in place when
 * its settings drifted from `spec` (a release changed the ack wait, a configuration changed
 * the subject prefix): without that, a consumer created by an older release would keep its
 * old settings for ever. Explicit acks, delivery from the start. Safe when many processes
 * start at once: whoever creates it first wins, the others find it.
 *
 * @example
 * ```ts
 * const consumer = await ensureDurableConsumer(js, jsm, { stream, durableName: 'apply_workers', filterSubject, ackWaitMs: 30_000, maxAckPending: 10_000 });
 * ```
 */
export async function ensureDurableConsumer(js: JetStreamClient, jsm: JetStreamManager, spec: DurableConsumerSpec): Promise<Consumer> {
  // An R3 consumer on a loaded cluster (or one electing a leader) can take longer than one API timeout to create.
  return duringStartup(() => ensureOnce(js, jsm, spec));
}

async function ensureOnce(js: JetStreamClient, jsm: JetStreamManager, spec: DurableConsumerSpec): Promise<Consumer> {
  let info: ConsumerInfo | null = null;
  try {
    info = await jsm.consumers.info(spec.stream, spec.durableName);
  } catch (error) {
    if (!(error instanceof JetStreamApiError && error.code === JetStreamApiCodes.ConsumerNotFound)) throw error;
  }
  if (!info) {
    try {
      await jsm.consumers.add(spec.stream, {
        durable_name: spec.durableName,
        ack_policy: AckPolicy.Explicit,
        deliver_policy: DeliverPolicy.All,
        ...wanted(spec),
      });
    } catch (error) {
      // Another process created it first (with its settings: checked below).
      if (!(error instanceof JetStreamApiError)) throw error;
      info = await jsm.consumers.info(spec.stream, spec.durableName);
    }
  }
  if (info && drifted(info, spec)) await jsm.consumers.update(spec.stream, spec.durableName, wanted(spec));
  return js.consumers.get(spec.stream, spec.durableName);
}
