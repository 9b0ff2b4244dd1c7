import { spawn, type ChildProcess } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { createServer } from 'node:net';
import { tmpdir } from 'node:os';
import { dirname, join, relative } from 'node:path';

/** Runs the server with shipped configuration files included (e.g. deploy/nats/auth.conf, tls.conf). */
export interface PrivateNatsOptions {
  /** Absolute paths of config files included after the test's own listen/jetstream settings. */
  readonly include?: readonly string[];
  /** Working directory of the server (relative tls paths of an included file resolve against it). */
  readonly cwd?: string;
  /** Added to the server's environment ($VARIABLES of the config files). */
  readonly env?: Readonly<Record<string, string>>;
}

/** A nats-server of the test's own (port, store dir), so it can be killed without disturbing anything else. */
export class PrivateNats {
  private process: ChildProcess | undefined;
  readonly storeDir = mkdtempSync(join(tmpdir(), 'nats-test-'));

  readonly port: number;
  private readonly options: PrivateNatsOptions;

  private constructor(port: number, options: PrivateNatsOptions) {
    this.port = port;
    this.options = options;
  }

  static async start(options: PrivateNatsOptions = {}): Promise<PrivateNats> {
    const nats = new PrivateNats(await freePort(), options);
    await nats.restart();
    return nats;
  }

  get url(): string {
    return `nats://127.0.0.1:${this.port}`;
  }

  /** Starts the server again (killing it first if it still runs: a second one could not take the port, and the first would outlive the test). */
  async restart(): Promise<void> {
    await this.kill();
    const binary = process.env.NATS_SERVER_BIN ?? '/usr/sbin/nats-server';
    const { include, cwd, env } = this.options;
    let args = ['-a', '127.0.0.1', '-p', String(this.port), '-js', '-sd', this.storeDir];
    if (include) {
      // nats-server resolves includes relative to the including file, and refuses a store_dir
      // given both as a flag and in a file: the test's own settings go in a file beside the store.
      const configFile = `${this.storeDir}.conf`;
      const lines = [`listen: 127.0.0.1:${this.port}`, `jetstream { store_dir: "${this.storeDir}" }`];
      for (const file of include) lines.push(`include "${relative(dirname(configFile), file)}"`);
      writeFileSync(configFile, `${lines.join('\n')}\n`);
      args = ['-c', configFile];
    }
    this.process = spawn(binary, args, { stdio: 'ignore', cwd, env: { ...process.env, ...env } });
    await waitForPort(this.port, 10_000);
  }

  /** SIGKILL: no shutdown, no flush — a crash. */
  async kill(): Promise<void> {
    const child = this.process;
    // A process ended by a signal keeps exitCode null: signalCode says it is gone.
    if (!child || child.exitCode !== null || child.signalCode !== null) return;
    const exited = new Promise((resolve) => child.once('exit', resolve));
    child.kill('SIGKILL');
    await exited;
  }

  async dispose(): Promise<void> {
    await this.kill();
    rmSync(this.storeDir, { recursive: true, force: true });
    rmSync(`${this.storeDir}.conf`, { force: true });
  }
}

export async function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const server = createServer();
    server.once('error', reject);
    server.listen(0, '127.0.0.1', () => {
      const address = server.address();
      server.close(() => resolve(typeof address === 'object' && address ? address.port : 0));
    });
  });
}

async function waitForPort(port: number, timeoutMs: number): Promise<void> {
  const { connect } = await import('node:net');
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const open = await new Promise<boolean>((resolve) => {
      const socket = connect(port, '127.0.0.1');
      socket.once('connect', () => {
        socket.destroy();
        resolve(true);
      });
      socket.once('error', () => resolve(false));
    });
    if (open) return;
    if (Date.now() > deadline) throw new Error(`nats-server did not listen on ${port}`);
    await new Promise((resolve) => setTimeout(resolve, 50));
  }
}
