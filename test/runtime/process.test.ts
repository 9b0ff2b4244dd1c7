import { expect } from 'chai';
import { spawn } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { dropIsolated, isolatedConfig, testSigningKeyFile } from '../support/isolation.ts';
import { freePort, PrivateNats } from '../support/private-nats.ts';

interface Exited {
  code: number | null;
  stdout: string;
  stderr: string;
}

/** Runs `src/main.ts` as a user would (Node strips the types), with the given environment. */
function startMain(env: Record<string, string>, cwd?: string) {
  const child = spawn(process.execPath, [resolve('src/main.ts')], {
    env: { ...process.env, LOG_LEVEL: 'info', EVENT_SIGNING_KEY_FILE: testSigningKeyFile(), ...env },
    stdio: ['ignore', 'pipe', 'pipe'],
    ...(cwd ? { cwd } : {}),
  });
  let stdout = '';
  let stderr = '';
  child.stdout.on('data', (chunk) => (stdout += chunk));
  child.stderr.on('data', (chunk) => (stderr += chunk));
  const exited = new Promise<Exited>((resolve) => child.once('close', (code) => resolve({ code, stdout, stderr }))); // after stdout is drained
  return { child, exited, output: () => ({ stdout, stderr }) };
}

function envOf(config: ReturnType<typeof isolatedConfig>, port: number): Record<string, string> {
  return {
    PORT: String(port),
    NATS_URL: config.natsUrl,
    DATABASE_URL: config.databaseUrl,
    DATABASE_SCHEMA: config.databaseSchema,
    EVENT_STREAM: config.eventStream,
    EVENT_SUBJECT_PREFIX: config.subjectPrefix,
    EVENT_SIGNING_KEY_FILE: config.eventSigningKeyFile ?? '',
  };
}

describe('the service process', function () {
  this.timeout(60_000);

  it('starts, serves, and exits 0 on SIGTERM after draining', async () => {
    const config = isolatedConfig('process');
    const port = await freePort();
    const main = startMain(envOf(config, port));
    try {
      const deadline = Date.now() + 30_000;
      while (!main.output().stderr.includes('listening on')) {
        if (Date.now() > deadline) throw new Error(`did not start: ${main.output().stderr}`);
        await new Promise((resolve) => setTimeout(resolve, 100));
      }
      const health = await fetch(`http://127.0.0.1:${port}/healthz`);
      expect(health.status).to.equal(200);
      const ready = await fetch(`http://127.0.0.1:${port}/readyz`);
      expect(ready.status).to.equal(200);
      main.child.kill('SIGTERM');
      const exited = await main.exited;
      expect(exited.code).to.equal(0);
      expect(exited.stdout).to.include('"msg":"service stopped"');
      // Logs are JSON lines.
      for (const line of exited.stdout.trim().split('\n')) expect(() => JSON.parse(line)).not.to.throw();
    } finally {
      main.child.kill('SIGKILL');
      await dropIsolated(config);
    }
  });

  describe('a shutdown that cannot finish (its NATS server is gone)', () => {
    const startOnPrivateNats = async (label: string) => {
      const nats = await PrivateNats.start();
      const config = isolatedConfig(label);
      const port = await freePort();
      const main = startMain({ ...envOf(config, port), NATS_URL: nats.url, SHUTDOWN_GRACE_MS: '1000' });
      const deadline = Date.now() + 30_000;
      while (!main.output().stderr.includes('listening on')) {
        if (Date.now() > deadline) throw new Error(`did not start: ${main.output().stderr}`);
        await new Promise((resolve) => setTimeout(resolve, 100));
      }
      await nats.kill();
      return { nats, config, main };
    };

    it('given SHUTDOWN_GRACE_MS=1000, when SIGTERM comes, then the process is gone within the grace and 5 s more, saying so', async () => {
      const { nats, config, main } = await startOnPrivateNats('shutdownbound');
      try {
        const signalled = Date.now();
        main.child.kill('SIGTERM');
        const exited = await main.exited;
        expect(Date.now() - signalled, exited.stdout.slice(-2000)).to.be.below(9_000);
        expect(exited.code).to.be.oneOf([0, 1]);
        if (exited.code === 1) expect(exited.stdout).to.include('shutdown did not finish in time');
      } finally {
        main.child.kill('SIGKILL');
        await nats.dispose();
        await dropIsolated(config);
      }
    });

    it('given a shutdown under way, when a second signal comes, then the process exits at once', async () => {
      const { nats, config, main } = await startOnPrivateNats('shutdownsecond');
      try {
        main.child.kill('SIGTERM');
        await new Promise((resolve) => setTimeout(resolve, 300));
        const second = Date.now();
        main.child.kill('SIGINT');
        const exited = await main.exited;
        expect(Date.now() - second).to.be.below(2_000);
        expect(exited.code).to.equal(1);
        expect(exited.stdout).to.include('second signal while shutting down');
      } finally {
        main.child.kill('SIGKILL');
        await nats.dispose();
        await dropIsolated(config);
      }
    });
  });

  it('explains an unreachable NATS in one line and exits 1', async () => {
    const config = isolatedConfig('process-nonats');
    const exited = await startMain({ ...envOf(config, await freePort()), NATS_URL: 'nats://127.0.0.1:1' }).exited;
    expect(exited.code).to.equal(1);
    const lines = exited.stderr.trim().split('\n');
    expect(lines).to.have.length(1);
    expect(lines[0]).to.include('nats://127.0.0.1:1').and.include('ensure-services.sh');
    expect(exited.stderr).not.to.match(/\n\s+at /);
  });

  for (const [what, label, env, says] of [
    ['a HOST that is not an address of this machine', 'process-host', { HOST: 'garbage.invalid' }, ['cannot listen on HOST garbage.invalid', 'set HOST']],
    ['a signing key file that cannot be read', 'process-key', { EVENT_SIGNING_KEY_FILE: '/nonexistent/event-signing-key.pem' }, ['/nonexistent/event-signing-key.pem', 'check EVENT_SIGNING_KEY_FILE']],
  ] as const) {
    it(`explains ${what} in one line naming the variable to fix, exit 1`, async () => {
      const exited = await startMain({ ...envOf(isolatedConfig(label), await freePort()), ...env }).exited;
      expect(exited.code).to.equal(1);
      const lines = exited.stderr.trim().split('\n');
      expect(lines).to.have.length(1);
      for (const part of says) expect(lines[0]).to.include(part);
    });
  }

  it('explains a directory where its development signing key cannot be made in one line naming EVENT_SIGNING_KEY_FILE (not as a port problem), exit 1', async () => {
    const blocked = mkdtempSync(join(tmpdir(), 'adsagent-keydir-'));
    try {
      writeFileSync(join(blocked, '.adsagent'), 'a file where the key directory would go');
      const exited = await startMain({ ...envOf(isolatedConfig('process-keydir'), await freePort()), EVENT_SIGNING_KEY_FILE: '' }, blocked).exited;
      expect(exited.code).to.equal(1);
      const lines = exited.stderr.trim().split('\n');
      expect(lines).to.have.length(1);
      expect(lines[0]).to.include(`cannot create ${join(blocked, '.adsagent')} for a new event signing key`).and.include('EVENT_SIGNING_KEY_FILE').and.not.include('PORT');
    } finally {
      rmSync(blocked, { recursive: true, force: true });
    }
  });

  it('explains an unreachable Postgres in one line and exits 1', async () => {
    const config = isolatedConfig('process-nopg');
    const exited = await startMain({ ...envOf(config, await freePort()), DATABASE_URL: 'postgres://postgres:secret@127.0.0.1:1/x' }).exited;
    expect(exited.code).to.equal(1);
    const lines = exited.stderr.trim().split('\n');
    expect(lines).to.have.length(1);
    expect(lines[0]).to.include('127.0.0.1:1').and.include('ensure-services.sh');
    expect(lines[0], 'the password is not printed').not.to.include('secret');
  });

  it('explains a port that is already taken in one line and exits 1', async () => {
    const { createServer } = await import('node:net');
    const blocker = createServer();
    const port = await freePort();
    await new Promise<void>((resolve) => blocker.listen(port, '127.0.0.1', resolve));
    const config = isolatedConfig('process-port');
    try {
      const exited = await startMain(envOf(config, port)).exited;
      expect(exited.code).to.equal(1);
      expect(exited.stderr.trim().split('\n')).to.have.length(1);
      expect(exited.stderr).to.include(`port ${port}`).and.include('already in use');
    } finally {
      blocker.close();
      await dropIsolated(config);
    }
  });

  it('lists every invalid variable at once and exits 2', async () => {
    const exited = await startMain({ PORT: 'eighty', LOG_LEVEL: 'loud', NATS_URL: 'http://x' }).exited;
    expect(exited.code).to.equal(2);
    expect(exited.stderr).to.include('PORT must be an integer').and.include('LOG_LEVEL must be one of').and.include('NATS_URL must use');
  });
});
