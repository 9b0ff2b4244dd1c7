import { connect, createServer, type Server, type Socket } from 'node:net';

interface RelayPair {
  readonly client: Socket;
  readonly upstream: Socket;
  /** From the trigger on, everything nats-server sends to this client is dropped. */
  swallowing: boolean;
  swallowedBytes: number;
  /** The end of the previous client chunk, so a marker split across two chunks is still seen. */
  tail: string;
}

export interface LostAckTrigger {
  readonly at: number;
  /** Bytes of the client chunk that held the markers (it was forwarded whole). */
  readonly chunkBytes: number;
}

/**
 * A TCP relay between one process and its nats-server that can lose exactly the server→client
 * direction after a chosen publish, so the publish is stored but its acknowledgement is lost:
 * the "did my write land?" case of a network fault or a NATS leader failover. Point the
 * process's NATS_URL at {@link url}.
 *
 * @example
 * ```ts
 * const relay = new LostAckRelay(nats.port);
 * await relay.listen();
 * const triggered = relay.arm(['"type":"RunQueued"', accountId]); // the chunk must hold every marker
 * // ... the process publishes; nats-server stores it; the PubAck never comes back
 * await triggered;
 * relay.heal(); // the swallowing connection is destroyed; the process reconnects through the relay
 * ```
 */
export class LostAckRelay {
  private readonly server: Server;
  private readonly pairs = new Set<RelayPair>();
  private armed: { readonly markers: readonly string[]; readonly resolve: (trigger: LostAckTrigger) => void } | undefined;
  private readonly upstreamPort: number;
  port = 0;
  /** Times the markers were seen and the connection started swallowing. */
  triggers = 0;
  /** Connections relayed in all (the first, plus one per reconnect). */
  connections = 0;

  constructor(upstreamPort: number) {
    this.upstreamPort = upstreamPort;
    this.server = createServer((client) => this.relay(client));
  }

  private relay(client: Socket): void {
    this.connections++;
    const upstream = connect(this.upstreamPort, '127.0.0.1');
    const pair: RelayPair = { client, upstream, swallowing: false, swallowedBytes: 0, tail: '' };
    this.pairs.add(pair);
    const end = () => {
      client.destroy();
      upstream.destroy();
      this.pairs.delete(pair);
    };
    client.on('error', end).on('close', end);
    upstream.on('error', end).on('close', end);
    client.on('data', (chunk: Buffer) => {
      const armed = this.armed;
      if (armed && !pair.swallowing) {
        const text = pair.tail + chunk.toString('latin1');
        const longest = Math.max(...armed.markers.map((m) => m.length));
        pair.tail = text.slice(-(longest - 1));
        if (armed.markers.every((marker) => text.includes(marker))) {
          // The publish reaches nats-server and is stored; from this instant on nothing the
          // server sends reaches the client, its PubAck included. Synchronous with the write,
          // so no reply to this chunk can slip through.
          upstream.write(chunk);
          pair.swallowing = true;
          this.armed = undefined;
          this.triggers++;
          armed.resolve({ at: performance.now(), chunkBytes: chunk.length });
          return;
        }
      }
      upstream.write(chunk);
    });
    upstream.on('data', (chunk: Buffer) => {
      if (pair.swallowing) {
        pair.swallowedBytes += chunk.length;
        return;
      }
      client.write(chunk);
    });
  }

  async listen(): Promise<void> {
    await new Promise<void>((resolve) => this.server.listen(0, '127.0.0.1', resolve));
    const address = this.server.address();
    this.port = typeof address === 'object' && address ? address.port : 0;
  }

  get url(): string {
    return `nats://127.0.0.1:${this.port}`;
  }

  /** Arms the relay: the next client chunk holding every one of `markers` triggers the loss. */
  arm(markers: readonly string[]): Promise<LostAckTrigger> {
    if (this.armed) throw new Error('the relay is armed already');
    return new Promise<LostAckTrigger>((resolve) => {
      this.armed = { markers, resolve };
    });
  }

  disarm(): void {
    this.armed = undefined;
  }

  /** Bytes dropped so far on the connections that are swallowing. */
  swallowedBytes(): number {
    let total = 0;
    for (const pair of this.pairs) if (pair.swallowing) total += pair.swallowedBytes;
    return total;
  }

  /** The fault ends: every swallowing connection is destroyed; the client reconnects through the relay, relayed normally. */
  heal(): number {
    let healed = 0;
    for (const pair of [...this.pairs]) {
      if (!pair.swallowing) continue;
      healed++;
      pair.client.destroy();
      pair.upstream.destroy();
      this.pairs.delete(pair);
    }
    return healed;
  }

  async close(): Promise<void> {
    this.armed = undefined;
    for (const pair of this.pairs) {
      pair.client.destroy();
      pair.upstream.destroy();
    }
    await new Promise((resolve) => this.server.close(resolve));
  }
}
