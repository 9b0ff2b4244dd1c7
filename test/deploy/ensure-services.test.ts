import { expect } from 'chai';
import { spawn } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { createServer, type Server, type Socket } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';

const SCRIPT = fileURLToPath(new URL('../../deploy/ensure-services.sh', import.meta.url));

// Hosts that are not loopback: the script reports them as skipped and touches nothing, so each
// test exercises one service against its own listener and never the machine's NATS or PostgreSQL.
const ELSEWHERE_NATS = 'nats://nats.invalid:4222';
const ELSEWHERE_DATABASE = 'postgres://postgres@db.invalid:5432/adsagent';

interface Finished {
  readonly code: number | null;
  readonly stdout: string;
  readonly stderr: string;
  readonly ms: number;
}

/** Runs deploy/ensure-services.sh with these variables; killed after `killAfterMs` (an unbounded wait must not hang the suite). */
function ensureServices(env: Record<string, string>, killAfterMs = 50_000): Promise<Finished> {
  return new Promise((resolve, reject) => {
    const started = Date.now();
    const child = spawn('bash', [SCRIPT], { env: { ...process.env, ...env }, stdio: ['ignore', 'pipe', 'pipe'], detached: true });
    let stdout = '';
    let stderr = '';
    child.stdout.on('data', (chunk: Buffer) => (stdout += chunk.toString()));
    child.stderr.on('data', (chunk: Buffer) => (stderr += chunk.toString()));
    // The whole process group: the script's pg_isready or sleep would otherwise outlive it.
    const killer = setTimeout(() => process.kill(-child.pid!, 'SIGKILL'), killAfterMs);
    child.once('error', reject);
    child.once('close', (code) => {
      clearTimeout(killer);
      resolve({ code, stdout, stderr, ms: Date.now() - started });
    });
  });
}

/** A TCP listener on a free loopback port that is neither NATS nor PostgreSQL. */
async function listener(onConnection: (socket: Socket) => void): Promise<{ port: number; close: () => Promise<void> }> {
  const sockets = new Set<Socket>();
  const server: Server = createServer((socket) => {
    sockets.add(socket);
    socket.once('close', () => sockets.delete(socket));
    socket.on('error', () => undefined);
    onConnection(socket);
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const address = server.address();
  const port = typeof address === 'object' && address ? address.port : 0;
  return {
    port,
    close: () =>
      new Promise<void>((resolve) => {
        for (const socket of sockets) socket.destroy();
        server.close(() => resolve());
      }),
  };
}

const silent = () => undefined;
const hangsUp = (socket: Socket) => socket.destroy();

/**
 * deploy/ensure-services.sh against ports held by something that is not the service it expects:
 * it must fail, name the port, and do so within its deadline (npm start and npm test run it first).
 */
describe('deploy/ensure-services.sh', function () {
  this.timeout(60_000);

  describe('a NATS_URL port held by something that is not NATS', () => {
    for (const [what, behaviour] of [
      ['accepts and says nothing', silent],
      ['closes each connection at once', hangsUp],
    ] as const) {
      it(`fails (exit 1) naming the port and that it is not a NATS server, when the listener ${what}`, async () => {
        const held = await listener(behaviour);
        try {
          const result = await ensureServices({ NATS_URL: `nats://127.0.0.1:${held.port}`, DATABASE_URL: ELSEWHERE_DATABASE });
          expect(result.code, result.stdout + result.stderr).to.equal(1);
          expect(result.stderr).to.match(new RegExp(`port ${held.port} on 127\\.0\\.0\\.1 is held by .* that is not a NATS server`));
          expect(result.stderr).to.include('NATS_URL');
          expect(result.stdout).not.to.include(' ok');
          // One read of the server's first line, 3 s at most.
          expect(result.ms).to.be.below(10_000);
        } finally {
          await held.close();
        }
      });
    }
  });

  describe('a DATABASE_URL port held by something that is not PostgreSQL', () => {
    it('gives up at the ENSURE_SERVICES_WAIT_SECONDS deadline however long each probe waits, naming the port', async () => {
      const held = await listener(silent);
      try {
        const result = await ensureServices({ NATS_URL: ELSEWHERE_NATS, DATABASE_URL: `postgres://postgres@127.0.0.1:${held.port}/adsagent`, ENSURE_SERVICES_WAIT_SECONDS: '3' });
        expect(result.code, result.stdout + result.stderr).to.equal(1);
        expect(result.stderr).to.include(`PostgreSQL on 127.0.0.1:${held.port} did not accept connections within 3 s`);
        expect(result.stderr).to.include('DATABASE_URL');
        // 3 s plus at most one probe in flight (pg_isready -t 1; libpq waits 2 s at least).
        expect(result.ms).to.be.below(10_000);
      } finally {
        await held.close();
      }
    });

    it('refuses an ENSURE_SERVICES_WAIT_SECONDS that is not a whole number of seconds', async () => {
      const result = await ensureServices({ NATS_URL: ELSEWHERE_NATS, DATABASE_URL: ELSEWHERE_DATABASE, ENSURE_SERVICES_WAIT_SECONDS: '0.5' });
      expect(result.code).to.equal(1);
      expect(result.stderr).to.include("ENSURE_SERVICES_WAIT_SECONDS must be a whole number of seconds (1 or more), not '0.5'");
    });
  });

  describe('installing', () => {
    it('runs every apt-get with DPkg::Lock::Timeout, so it waits for another apt or dpkg (e.g. unattended-upgrades) instead of failing', () => {
      // Static: installing for real would change the machine.
      const calls = readFileSync(SCRIPT, 'utf8')
        .split('\n')
        .filter((line) => /^\s*"\$\{SUDO\[@\]\}".*\bapt-get\b/.test(line));
      expect(calls).to.have.length.at.least(2); // update and install
      for (const call of calls) expect(call).to.match(/apt-get -o DPkg::Lock::Timeout=\d+ /);
    });
  });

  describe('the binaries the test suite starts its own servers from', () => {
    it('warns, naming each missing one and its package, while the services themselves are fine', async () => {
      const empty = mkdtempSync(join(tmpdir(), 'ensure-services-'));
      try {
        const pgBinDir = join(empty, 'postgresql', '15', 'bin');
        const result = await ensureServices({
          NATS_URL: ELSEWHERE_NATS,
          DATABASE_URL: ELSEWHERE_DATABASE,
          NATS_SERVER_BIN: join(empty, 'nats-server'),
          PG_BIN_DIR: pgBinDir,
        });
        expect(result.code, result.stderr).to.equal(0);
        expect(result.stderr).to.include(`ensure-services: warning: ${join(empty, 'nats-server')} is missing`).and.include('NATS_SERVER_BIN').and.include("'apt-get install nats-server'");
        expect(result.stderr).to.include(`ensure-services: warning: ${pgBinDir}/postgres or ${pgBinDir}/initdb is missing`).and.include('PG_BIN_DIR');
        expect(result.stdout).to.include('ensure-services: nats nats.invalid:4222 skipped, postgres db.invalid:5432 skipped');
      } finally {
        rmSync(empty, { recursive: true, force: true });
      }
    });
  });
});
