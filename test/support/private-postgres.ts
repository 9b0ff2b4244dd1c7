import { execFileSync, spawn, type ChildProcess } from 'node:child_process';
import { chmodSync, chownSync, existsSync, mkdtempSync, readdirSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import pg from 'pg';
import { freePort } from './private-nats.ts';

const BIN = process.env.PG_BIN_DIR ?? '/usr/lib/postgresql/15/bin';

/**
 * A PostgreSQL server of the test's own (data dir, port), so it can be killed and
 * restarted without disturbing anything else. initdb refuses to run as root, so when the
 * tests run as root the server runs as the `postgres` user.
 */
export class PrivatePostgres {
  private process: ChildProcess | undefined;
  private readonly dataDir: string;

  readonly port: number;
  private readonly root: string;

  /** Server settings given as `-c name=value` at every start. */
  private readonly settings: Readonly<Record<string, string>>;

  private constructor(
    port: number,
    root: string,
    settings: Readonly<Record<string, string>>,
  ) {
    this.port = port;
    this.root = root;
    this.settings = settings;
    this.dataDir = join(root, 'data');
  }

  static available(): boolean {
    try {
      execFileSync(join(BIN, 'postgres'), ['--version'], { stdio: 'ignore' });
      return true;
    } catch {
      return false;
    }
  }

  /** @param options.settings server settings, e.g. `{ wal_writer_delay: '10s' }` */
  static async start(options: { readonly settings?: Readonly<Record<string, string>> } = {}): Promise<PrivatePostgres> {
    const root = mkdtempSync(join(tmpdir(), 'pg-test-'));
    chmodSync(root, 0o777);
    const server = new PrivatePostgres(await freePort(), root, options.settings ?? {});
    server.asServerUser(join(BIN, 'initdb'), ['-D', server.dataDir, '-U', 'postgres', '--auth=trust', '-E', 'UTF8']);
    await server.restart();
    return server;
  }

  get url(): string {
    return `postgres://postgres@127.0.0.1:${this.port}/postgres`;
  }

  async restart(): Promise<void> {
    const [command, args] = this.serverCommand(join(BIN, 'postgres'), [
      '-D', this.dataDir, '-p', String(this.port), '-k', this.root, '-h', '127.0.0.1',
      ...Object.entries(this.settings).flatMap(([name, value]) => ['-c', `${name}=${value}`]),
    ]);
    this.process = spawn(command, args, { stdio: 'ignore' });
    const deadline = Date.now() + 20_000;
    for (;;) {
      const client = new pg.Client({ connectionString: this.url });
      try {
        await client.connect();
        await client.end();
        return;
      } catch {
        await client.end().catch(() => undefined);
        if (Date.now() > deadline) throw new Error(`private postgres on ${this.port} did not start`);
        await new Promise((resolve) => setTimeout(resolve, 100));
      }
    }
  }

  /**
   * SIGKILL of the postmaster (by the pid in its pid file, not the runuser wrapper): an outage
   * with no clean shutdown. With `everyProcess`, its backends and the WAL writer are killed in
   * the same instant, as a crash of the machine would stop them: WAL still in Postgres's
   * buffers (commits made with `synchronous_commit = off`) is lost; without it, they may
   * write it out as they notice the postmaster is gone.
   */
  async kill(options: { readonly everyProcess?: boolean } = {}): Promise<void> {
    const pidFile = join(this.dataDir, 'postmaster.pid');
    if (!existsSync(pidFile)) return;
    const pid = Number(readFileSync(pidFile, 'utf8').split('\n')[0]);
    const children = options.everyProcess ? childPids(pid) : [];
    for (const target of [...children, pid]) {
      try {
        process.kill(target, 'SIGKILL');
      } catch {
        // already gone
      }
    }
    const alive = () => {
      try {
        process.kill(pid, 0);
        return true;
      } catch {
        return false;
      }
    };
    // Backends exit once they notice their postmaster died; a restart must wait for them.
    for (let waited = 0; alive() && waited < 5000; waited += 50) await new Promise((resolve) => setTimeout(resolve, 50));
    await new Promise((resolve) => setTimeout(resolve, 500));
    rmSync(pidFile, { force: true });
  }

  async dispose(): Promise<void> {
    await this.kill();
    rmSync(this.root, { recursive: true, force: true });
  }

  private serverCommand(command: string, args: string[]): [string, string[]] {
    if (process.getuid?.() !== 0) return [command, args];
    const uid = Number(execFileSync('id', ['-u', 'postgres']).toString().trim());
    const gid = Number(execFileSync('id', ['-g', 'postgres']).toString().trim());
    chownSync(this.root, uid, gid);
    return ['runuser', ['-u', 'postgres', '--', command, ...args]];
  }

  private asServerUser(command: string, args: string[]): void {
    const [cmd, fullArgs] = this.serverCommand(command, args);
    execFileSync(cmd, fullArgs, { stdio: 'ignore' });
  }
}

/** The processes whose parent is `parent`, from /proc (Linux). */
function childPids(parent: number): number[] {
  const children: number[] = [];
  for (const entry of readdirSync('/proc')) {
    if (!/^\d+$/.test(entry)) continue;
    try {
      // pid (comm) state ppid …: comm may hold spaces and parentheses, so read after its last ')'.
      const stat = readFileSync(`/proc/${entry}/stat`, 'utf8');
      const ppid = Number(stat.slice(stat.lastIndexOf(')') + 2).split(' ')[1]);
      if (ppid === parent) children.push(Number(entry));
    } catch {
      // exited meanwhile
    }
  }
  return children;
}
