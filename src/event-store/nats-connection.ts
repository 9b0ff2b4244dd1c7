import { connect, type NatsConnection } from '@nats-io/transport-node';

export class NatsUnreachableError extends Error {
  constructor(readonly url: string, cause: unknown) {
    super(
      `cannot reach NATS at ${url} (${cause instanceof Error ? cause.message : String(cause)}); ` +
        'start it with `bash deploy/ensure-services.sh` or set NATS_URL',
      { cause },
    );
    this.name = 'NatsUnreachableError';
  }
}

/**
 * Connects with unlimited reconnects: after the first connection, an outage of the NATS
 * server pauses work instead of ending the process.
 */
export async function connectNats(url: string, name: string): Promise<NatsConnection> {
  try {
    return await connect({
      servers: url.split(',').map((s) => s.trim()),
      name,
      maxReconnectAttempts: -1,
      reconnectTimeWait: 250,
      timeout: 3000,
    });
  } catch (error) {
    throw new NatsUnreachableError(url, error);
  }
}
