import { spawn, type ChildProcess } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { jetstreamManager } from '@nats-io/jetstream';
import { connect } from '@nats-io/transport-node';
import { freePort } from './private-nats.ts';

interface ClusterNode {
  readonly name: string;
  readonly clientPort: number;
  readonly routePort: number;
  readonly storeDir: string;
  readonly configFile: string;
  process: ChildProcess | undefined;
}

/**
 * A JetStream cluster of local nats-server processes (ports and store directories of the
 * test's own), the shape deploy/nats/cluster describes for production: every node routes to
 * every other, and a stream created with 3 replicas keeps a copy on each.
 *
 * @example
 * ```ts
 * const cluster = await PrivateNatsCluster.start(3);
 * const config = isolatedConfig('scale', { NATS_URL: cluster.url, EVENT_STREAM_REPLICAS: '3' });
 * await cluster.kill(0); // a node crashes; the others keep a quorum
 * ```
 */
export class PrivateNatsCluster {
  private readonly nodes: ClusterNode[];
  private readonly root: string;

  private constructor(nodes: ClusterNode[], root: string) {
    this.nodes = nodes;
    this.root = root;
  }

  static async start(size = 3): Promise<PrivateNatsCluster> {
    const root = mkdtempSync(join(tmpdir(), 'nats-cluster-'));
    const ports: number[] = [];
    while (ports.length < size * 2) {
      const port = await freePort();
      if (!ports.includes(port)) ports.push(port);
    }
    const nodes: ClusterNode[] = [];
    for (let i = 0; i < size; i++) {
      nodes.push({
        name: `n${i + 1}`,
        clientPort: ports[i]!,
        routePort: ports[size + i]!,
        storeDir: join(root, `n${i + 1}`),
        configFile: join(root, `n${i + 1}.conf`),
        process: undefined,
      });
    }
    for (const node of nodes) {
      const routes = nodes.filter((other) => other !== node).map((other) => `nats-route://127.0.0.1:${other.routePort}`);
      writeFileSync(
        node.configFile,
        [
          `server_name: ${node.name}`,
          `listen: 127.0.0.1:${node.clientPort}`,
          `jetstream { store_dir: "${node.storeDir}" }`,
          `cluster { name: adsagent-test, listen: 127.0.0.1:${node.routePort}, routes: [${routes.join(', ')}] }`,
          '',
        ].join('\n'),
      );
    }
    const cluster = new PrivateNatsCluster(nodes, root);
    for (let i = 0; i < size; i++) cluster.launch(i);
    // Electing the JetStream meta leader takes a few seconds, longer on a loaded machine.
    await cluster.waitForJetStream(90_000);
    return cluster;
  }

  /** Every node's client URL, comma separated, as NATS_URL takes them. */
  get url(): string {
    return this.nodes.map((n) => `nats://127.0.0.1:${n.clientPort}`).join(',');
  }

  get size(): number {
    return this.nodes.length;
  }

  nodeUrl(index: number): string {
    return `nats://127.0.0.1:${this.nodes[index]!.clientPort}`;
  }

  /** SIGKILL one node: a crash, nothing flushed. */
  async kill(index: number): Promise<void> {
    const child = this.nodes[index]!.process;
    if (!child || child.exitCode !== null || child.signalCode !== null) return;
    const exited = new Promise((resolve) => child.once('exit', resolve));
    child.kill('SIGKILL');
    await exited;
  }

  /** Starts a killed node again on its store; it catches up from the others. */
  restart(index: number): void {
    this.launch(index);
  }

  /** Waits until the cluster has a JetStream meta leader (the API answers through any live node). */
  async waitForJetStream(timeoutMs: number): Promise<void> {
    const deadline = Date.now() + timeoutMs;
    let lastError: unknown;
    while (Date.now() < deadline) {
      try {
        const nc = await connect({ servers: this.url.split(','), timeout: 1000, reconnect: false });
        try {
          const jsm = await jetstreamManager(nc, { timeout: 2000 });
          await jsm.getAccountInfo();
          return;
        } finally {
          await nc.close();
        }
      } catch (error) {
        lastError = error;
        await new Promise((resolve) => setTimeout(resolve, 250));
      }
    }
    throw new Error(`the NATS cluster had no JetStream leader within ${timeoutMs} ms: ${String(lastError)}`);
  }

  async dispose(): Promise<void> {
    for (let i = 0; i < this.nodes.length; i++) await this.kill(i);
    rmSync(this.root, { recursive: true, force: true });
  }

  private launch(index: number): void {
    const node = this.nodes[index]!;
    const binary = process.env.NATS_SERVER_BIN ?? '/usr/sbin/nats-server';
    node.process = spawn(binary, ['-c', node.configFile], { stdio: 'ignore' });
  }
}
