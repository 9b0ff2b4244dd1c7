import { expect } from 'chai';
import { existsSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { CURRENT_VERSION } from '../../src/events/catalogue/index.ts';
import { runCli } from '../support/cli.ts';
import { loadWorkspace } from '../../commands/queries.ts';
import { isolatedConfig } from '../support/isolation.ts';
import { startTestService, type TestService } from '../support/test-service.ts';

/** Nothing listens on port 9 (discard): a service that cannot be reached. */
const NOWHERE = { NATS_URL: 'nats://127.0.0.1:9' };

describe('adsagent errors say what to do next', function () {
  this.timeout(120_000);

  describe('refused before connecting to anything (exit 2)', () => {
    // NATS is unreachable in this configuration: these answers cannot depend on it.
    const config = isolatedConfig('clierrors-offline', NOWHERE);

    it('events tail --type with an unknown type is an error listing every known type, exit 2', async () => {
      const result = await runCli(config, ['events', 'tail', '--type', 'NoSuchType']);
      expect(result.code).to.equal(2);
      expect(result.stdout).to.equal('');
      expect(result.stderr).to.include("unknown event type 'NoSuchType'");
      for (const type of Object.keys(CURRENT_VERSION)) expect(result.stderr).to.include(type);
    });

    it('run where the service keeps no signing key (and without EVENT_SIGNING_KEY_FILE), a reading or a writing command makes no key of its own: it names where the key is, exit 1', async () => {
      const elsewhere = mkdtempSync(join(tmpdir(), 'adsagent-nokey-'));
      try {
        for (const args of [['audit', 'verify'], ['events', 'tail'], ['keys', 'export-public'], ['workspace', 'create', '--name', 'Elsewhere']]) {
          const result = await runCli(config, args, 60_000, { EVENT_SIGNING_KEY_FILE: '' }, elsewhere);
          expect(result.code, args.join(' ')).to.equal(1);
          expect(result.stderr, args.join(' ')).to.include(`no event signing key at ${join(elsewhere, '.adsagent')}`).and.include('set EVENT_SIGNING_KEY_FILE');
          expect(result.stderr, args.join(' ')).to.not.include('generated a new event signing key');
        }
        expect(existsSync(join(elsewhere, '.adsagent'))).to.equal(false);
      } finally {
        rmSync(elsewhere, { recursive: true, force: true });
      }
    });

    it('an unknown command is refused without connecting: exit 2 and the list of commands, even with NATS unreachable', async () => {
      const result = await runCli(config, ['frobnicate']);
      expect(result.code).to.equal(2);
      expect(result.stderr).to.include("unknown command 'frobnicate'").and.include('usage: adsagent').and.not.include('cannot reach NATS');
    });

    it('events tail with a bad --since or --from-seq shows a value that works', async () => {
      const since = await runCli(config, ['events', 'tail', '--since', 'yesterday']);
      expect(since.code).to.equal(2);
      expect(since.stderr).to.match(/--since must be a time, e\.g\. --since 20\d\d-/);
      const fromSeq = await runCli(config, ['events', 'tail', '--from-seq', '0']);
      expect(fromSeq.code).to.equal(2);
      expect(fromSeq.stderr).to.include('e.g. --from-seq 1');
    });

    it('an unknown option names it and prints the usage, exit 2', async () => {
      const result = await runCli(config, ['workspace', 'create', '--nme', 'Acme']);
      expect(result.code).to.equal(2);
      expect(result.stderr).to.include("'--nme'").and.include('usage: adsagent');
    });

    it('no command at all says so and prints the usage, exit 2; --help prints it on stdout, exit 0', async () => {
      const none = await runCli(config, []);
      expect(none.code).to.equal(2);
      expect(none.stderr).to.include('no command given').and.include('usage: adsagent');
      const help = await runCli(config, ['--help']);
      expect(help.code).to.equal(0);
      expect(help.stdout).to.include('usage: adsagent').and.include('--json');
    });

    it('an unreachable NATS names the URL and how to start it, exit 1', async () => {
      const result = await runCli(config, ['workspace', 'create', '--name', 'Acme']);
      expect(result.code).to.equal(1);
      expect(result.stderr).to.include('cannot reach NATS at nats://127.0.0.1:9').and.match(/deploy\/ensure-services\.sh|NATS_URL/);
    });
  });

  describe('against a running service', () => {
    let svc: TestService;
    before(async () => {
      svc = await startTestService('clierrors', { ROLES: 'http,projectors' });
    });
    after(async () => svc?.stop());

    it('an unknown command points to the list of commands, exit 2', async () => {
      const result = await runCli(svc.config, ['workspace', 'delete', 'x']);
      expect(result.code).to.equal(2);
      expect(result.stderr).to.include("unknown command 'workspace delete x'").and.include('usage: adsagent');
    });

    it('a missing argument shows the flag to add, exit 2', async () => {
      const result = await runCli(svc.config, ['key', 'create', '--scope', 'read']);
      expect(result.code).to.equal(2);
      expect(result.stderr).to.include('missing --workspace: add --workspace WS');
      const revoke = await runCli(svc.config, ['key', 'revoke']);
      expect(revoke.code).to.equal(2);
      expect(revoke.stderr).to.include('adsagent key revoke KEY_ID');
    });

    it('a bad value lists the allowed ones and repeats what was given, exit 2', async () => {
      const result = await runCli(svc.config, ['key', 'create', '--workspace', 'x', '--scope', 'superuser']);
      expect(result.code).to.equal(2);
      expect(result.stderr).to.include("--scope must be one of read, write, admin (got 'superuser')");
    });

    it('a value no event may hold (a name over 200 characters, a control character) says which and to fix it, exit 2, not a bug', async () => {
      for (const name of ['x'.repeat(201), 'tab\u0001name']) {
        const result = await runCli(svc.config, ['workspace', 'create', '--name', name]);
        expect(result.code, result.stderr).to.equal(2);
        expect(result.stderr).to.include('a value you gave cannot be recorded').and.include('/data/name').and.not.include('a bug in adsagent');
      }
    });

    it('records a write with an empty USER as the operator, not refused by its event schema', async () => {
      const result = await runCli(svc.config, ['workspace', 'create', '--name', 'Made by cron', '--json'], 60_000, { USER: '' });
      expect(result.code, result.stderr).to.equal(0);
      const { id } = JSON.parse(result.stdout) as { id: string };
      const created = (await loadWorkspace(svc.service.infrastructure.aggregates, id)).state;
      expect(created.exists).to.equal(true);
    });

    it('an unknown id says where ids come from, exit 1', async () => {
      const result = await runCli(svc.config, ['killswitch', 'on', '--workspace', '00000000-0000-4000-8000-000000000000']);
      expect(result.code).to.equal(1);
      expect(result.stderr).to.include('Workspace not found').and.include('Next: check the id').and.include('adsagent workspace create');
    });
  });
});
