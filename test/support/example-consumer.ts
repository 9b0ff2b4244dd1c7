import { createPublicKey } from 'node:crypto';
import { ApprovalsPerDayConsumer, type ApprovalsPerDayOptions, type SigningKey } from '../../examples/analytics-consumer/approvals-per-day.ts';
import type { Config } from '../../src/config/config.ts';
import { keyIdOf, publicKeyPem, readPrivateKeyFile } from '../../src/events/signing/signing-keys.ts';

/** The public half of the key a test service signs with, as GET /api/v1/event-signing-keys lists it. */
export function testServiceSigningKey(config: Config): SigningKey {
  if (!config.eventSigningKeyFile) throw new Error('the test service has no signing key file');
  const publicKey = createPublicKey(readPrivateKeyFile(config.eventSigningKeyFile));
  return { key_id: keyIdOf(publicKey), public_key_pem: publicKeyPem(publicKey) };
}

/**
 * The example analytics consumer on a test service's stream, with its own tables in
 * `schema`, believing only what the service signed (as `fromEnv` sets it up), and the quick
 * ack wait and retry delay the tests want.
 */
export function exampleConsumerOn(config: Config, schema: string, options: Partial<ApprovalsPerDayOptions> = {}): ApprovalsPerDayConsumer {
  return new ApprovalsPerDayConsumer({
    natsUrl: config.natsUrl,
    databaseUrl: config.databaseUrl,
    stream: config.eventStream,
    subjectPrefix: config.subjectPrefix,
    schema,
    trust: { kind: 'signatures', keys: [testServiceSigningKey(config)] },
    ackWaitMs: 2000,
    retryDelayMs: 100,
    ...options,
  });
}
