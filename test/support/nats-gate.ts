import { connect, createServer, type Server, type Socket } from 'node:net';

/**
 * A TCP relay between one process and its nats-server, so a test can cut that process off
 * while the server stays up for everyone else. Point the process's NATS_URL at {@link url}.
 *
 * - `hold()`: every connection offered from now on is closed at once (a reconnect attempt that
 *   fails); connections already through stay up until their server end closes.
 * - `cut()`: `hold()`, and every connection through it is destroyed now.
 * - `open()`: connections are relayed again.
 *
 * @example
 * const gate = new NatsGate(nats.port);
 * await gate.listen();
 * const service = await startService({ ...config, natsUrl: gate.url }, logger);
 * gate.cut(); // the service sees `disconnect`, then fails to reconnect until gate.open()
 */
export class NatsGate {
  private readonly server: Server;
  private readonly sockets = new Set<Socket>();
  private held = false;
  port = 0;
  private readonly upstreamPort: number;

  constructor(upstreamPort: number) {
    this.upstreamPort = upstreamPort;
    this.server = createServer((client) => {
      this.sockets.add(client);
      client.once('close', () => this.sockets.delete(client));
      if (this.held) {
        client.destroy();
        return;
      }
      const upstream = connect(this.upstreamPort, '127.0.0.1');
      this.sockets.add(upstream);
      upstream.once('close', () => this.sockets.delete(upstream));
      const end = () => {
        client.destroy();
        upstream.destroy();
      };
      client.on('error', end).on('close', end);
      upstream.on('error', end).on('close', end);
      client.pipe(upstream);
      upstream.pipe(client);
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

  hold(): void {
    this.held = true;
  }

  cut(): void {
    this.held = true;
    for (const socket of this.sockets) socket.destroy();
  }

  open(): void {
    this.held = false;
  }

  async close(): Promise<void> {
    this.held = true;
    for (const socket of this.sockets) socket.destroy();
    await new Promise((resolve) => this.server.close(resolve));
  }
}
