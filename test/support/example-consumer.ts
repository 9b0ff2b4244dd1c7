import { ApprovalsPerDayConsumer, type ApprovalsPerDayOptions } from '../../examples/analytics-consumer/approvals-per-day.ts';
import type { Config } from '../../src/config/config.ts';

/**
 * The example analytics consumer on a test service's stream, with its own tables in
 * `schema`, and the quick ack wait and retry delay the tests want.
 */
export function exampleConsumerOn(config: Config, schema: string, options: Partial<ApprovalsPerDayOptions> = {}): ApprovalsPerDayConsumer {
  return new ApprovalsPerDayConsumer({
    natsUrl: config.natsUrl,
    databaseUrl: config.databaseUrl,
    stream: config.eventStream,
    subjectPrefix: config.subjectPrefix,
    schema,
    ackWaitMs: 2000,
    retryDelayMs: 100,
    ...options,
  });
}
