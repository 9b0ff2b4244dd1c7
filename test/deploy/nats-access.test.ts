import { expect } from 'chai';
import { execFile, spawn } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, relative } from 'node:path';
import { promisify } from 'node:util';
import { fileURLToPath } from 'node:url';
import { AckPolicy, jetstream, jetstreamManager } from '@nats-io/jetstream';
import type { NatsConnection } from '@nats-io/nats-core';
import { ApprovalsPerDayConsumer, fetchSigningKeys } from '../../examples/analytics-consumer/approvals-per-day.ts';
import { PROJECTIONS } from '../../projections/index.ts';
import { projectorConsumerName } from '../../projections/runtime/projector.ts';
import { connectNats, watchNatsServerErrors } from '../../src/event-store/nats-connection.ts';
import { AGENT_WORKER_CONSUMER } from '../../src/workers/agent-worker.ts';
import { APPLY_WORKER_CONSUMER } from '../../src/workers/apply-worker.ts';
import { eventually } from '../support/eventually.ts';
import { testSigningKeyFile } from '../support/isolation.ts';
import { freePort, PrivateNats } from '../support/private-nats.ts';
import { runCli } from '../support/cli.ts';
import { startRun, waitForTerminalRun } from '../support/runs.ts';
import { startTestService, type TestService, type TestTenant } from '../support/test-service.ts';

const run = promisify(execFile);
const repo = fileURLToPath(new URL('../../', import.meta.url));
const deploy = (file: string) => join(repo, 'deploy', file);
const NATS_BIN = process.env.NATS_SERVER_BIN ?? '/usr/sbin/nats-server';

// The shipped users: names from deploy/nats/auth.conf, passwords from the server's environment.
const SERVICE_PASSWORD = 'service-pw-5f1e0c7a9b';
const ANALYTICS_PASSWORD = 'analytics-pw-c2d84e61';
const SERVER_ENV = { ADS_NATS_SERVICE_PASSWORD: SERVICE_PASSWORD, ADS_NATS_ANALYTICS_PASSWORD: ANALYTICS_PASSWORD };
// auth.conf names the default stream and prefix.
const STREAM = 'ADS_EVENTS';
const PREFIX = 'ads';

/**
 * The NATS access control that deploy/ ships, proved on a private nats-server that includes the
 * shipped deploy/nats/auth.conf and deploy/nats/tls.conf (certificates from
 * deploy/make-nats-tls.sh): the service runs end to end with its user over TLS; the analytics user
 * reads and consumes the stream but cannot append, delete, purge or touch the service's consumers.
 */
/** An error's message with those of its causes: nats.js wraps a refused request's permission violation. */
function messagesOf(error: Error | null): string {
  const messages: string[] = [];
  for (let current: unknown = error; current instanceof Error && messages.length < 5; current = current.cause) messages.push(current.message);
  return messages.join(' / ');
}

describe('deploy/: NATS users, permissions and TLS', function () {
  this.timeout(90_000);
  let workDir: string;
  let caFile: string;
  let nats: PrivateNats;
  let svc: TestService;
  let tenant: TestTenant;
  let analytics: NatsConnection;

  const tlsUrl = () => `nats://127.0.0.1:${nats.port}`;
  const serviceEnv = () => ({ NATS_URL: tlsUrl(), NATS_USER: 'ads-service', NATS_PASSWORD: SERVICE_PASSWORD, NATS_TLS_CA: caFile, EVENT_STREAM: STREAM, EVENT_SUBJECT_PREFIX: PREFIX });
  const analyticsSettings = () => ({
    natsUrl: tlsUrl(),
    natsCredentials: { kind: 'user-password', user: 'analytics', password: ANALYTICS_PASSWORD } as const,
    natsTlsCa: caFile,
  });

  before(async () => {
    workDir = mkdtempSync(join(tmpdir(), 'nats-access-'));
    await run('bash', [deploy('make-nats-tls.sh'), join(workDir, 'tls')]);
    caFile = join(workDir, 'tls', 'ca.pem');
    nats = await PrivateNats.start({ include: [deploy('nats/tls.conf'), deploy('nats/auth.conf')], cwd: workDir, env: SERVER_ENV });
    svc = await startTestService('natsaccess', serviceEnv());
    tenant = await svc.tenant('natsaccess');
    analytics = await connectNats(analyticsSettings(), 'analytics-test');
  });

  after(async () => {
    await analytics?.close().catch(() => undefined);
    await svc?.stop().catch(() => undefined);
    await nats?.dispose();
    if (workDir) rmSync(workDir, { recursive: true, force: true });
  });

  async function lastSequence(): Promise<number> {
    const info = await (await jetstreamManager(analytics)).streams.info(STREAM);
    return info.state.last_seq;
  }

  describe('the service user', () => {
    it('runs the service end to end over TLS: a run is created, worked on and finishes', async () => {
      const runId = await startRun(svc, tenant.keys.write, tenant.accounts.sandbox, 'Which campaigns waste budget?');
      const finished = await waitForTerminalRun(svc, tenant.keys.write, runId, 30_000);
      expect(finished.status).to.equal('succeeded');
    });

    it('cannot delete or purge the stream, delete a message, shrink a stream\'s limits, purge the account or make a stream that republishes to the API', async () => {
      const service = await connectNats(svc.config, 'service-user-test');
      try {
        const jsm = await jetstreamManager(service);
        const before = (await jsm.streams.info(STREAM)).state;
        for (const [what, attempt] of Object.entries({
          'stream delete': () => jsm.streams.delete(STREAM),
          'stream purge': () => jsm.streams.purge(STREAM),
          'message delete': () => jsm.streams.deleteMessage(STREAM, 1),
          'snapshot bucket delete': () => jsm.streams.delete(`KV_${STREAM}_snapshots`),
          // deny_delete and deny_purge do not stop these: the server drops every event above the new limit.
          'stream update to max_msgs 1': () => jsm.streams.update(STREAM, { max_msgs: 1 }),
          'stream update to max_bytes 1': () => jsm.streams.update(STREAM, { max_bytes: 1 }),
          'signing bucket update to max_msgs 1': () => jsm.streams.update(`KV_${STREAM}_signing`, { max_msgs: 1 }),
          'snapshot bucket update to max_msgs 1': () => jsm.streams.update(`KV_${STREAM}_snapshots`, { max_msgs: 1 }),
          // Every stream of the account in one request.
          'account purge': () => service.request('$JS.API.ACCOUNT.PURGE.$G', '', { timeout: 3000 }),
          // A stream of its own whose republish target is a denied API subject: the server's republish carries no user permissions.
          'a stream republishing to the API': () =>
            jsm.streams.add({ name: 'TAKEOVER', subjects: ['ads_workers.takeover.>'], republish: { src: 'ads_workers.takeover.x', dest: `$JS.API.STREAM.DELETE.${STREAM}` } }),
        })) {
          const error = await attempt().then(() => null, (e: Error) => e);
          expect(messagesOf(error), what).to.match(/Permissions Violation/);
        }
        const after = (await jsm.streams.info(STREAM)).state;
        expect(after.first_seq).to.equal(before.first_seq);
        expect(after.messages).to.be.at.least(before.messages);
        expect((await jsm.streams.info(`KV_${STREAM}_signing`)).config.max_msgs).to.equal(-1);
      } finally {
        await service.close();
      }
    });

    it('starts without updating a stream already configured as it wants, and names the difference in one line when it is not', async () => {
      // Every start (the service's, each CLI command's) ensures the stream: with the update denied, a start that sent one would fail.
      const matching = await runCli(svc.config, ['projections', 'quarantine', 'list', '--json']);
      expect(matching.code, matching.stderr).to.equal(0);

      const replicas = await runCli(svc.config, ['projections', 'quarantine', 'list'], 60_000, { EVENT_STREAM_REPLICAS: '2' });
      expect(replicas.code).to.equal(1);
      const lines = replicas.stderr.trim().split('\n');
      expect(lines, replicas.stderr).to.have.length(1);
      expect(lines[0]).to.include(`the event stream ${STREAM} differs from the service's configuration (num_replicas: 1 → 2)`);
      expect(lines[0]).to.include(`$JS.API.STREAM.UPDATE.${STREAM}`);
      expect(lines[0]).not.to.include(SERVICE_PASSWORD);
    });

    it('is what the operator CLI connects with too (same NATS_* variables)', async () => {
      const verified = await runCli(svc.config, ['audit', 'verify', '--json']);
      expect(verified.code, verified.stderr).to.equal(0);
      expect(verified.stdout + verified.stderr).not.to.include(SERVICE_PASSWORD);
    });
  });

  describe('the analytics user', () => {
    it('reads the stream with an ordered consumer, from the first event to the last', async () => {
      const last = await lastSequence();
      expect(last).to.be.greaterThan(0);
      const consumer = await jetstream(analytics).consumers.get(STREAM);
      const messages = await consumer.fetch({ max_messages: last, expires: 5000 });
      let seen = 0;
      for await (const message of messages) {
        seen++;
        expect(message.seq).to.equal(seen);
        if (message.seq === last) break;
      }
      expect(seen).to.equal(last);
    });

    it('audits the log with read access only: audit verify --public-key and events tail run as this user, with no database', async () => {
      const keys = join(workDir, 'signing-keys.pem');
      writeFileSync(keys, (await runCli(svc.config, ['keys', 'export-public'], 60_000, serviceEnv())).stdout);
      // The analytics user, and a database nobody can reach: an offline audit needs neither the service's password nor Postgres.
      const asAuditor = { NATS_USER: 'analytics', NATS_PASSWORD: ANALYTICS_PASSWORD, DATABASE_URL: 'postgres://nobody@127.0.0.1:1/nothing' };
      const audit = await runCli(svc.config, ['audit', 'verify', '--public-key', keys, '--json'], 60_000, { ...serviceEnv(), ...asAuditor });
      expect(audit.code, audit.stderr).to.equal(0);
      const report = JSON.parse(audit.stdout) as { ok: boolean; events: number; signedEvents: number; readModelsChecked: string[] };
      expect(report.ok).to.equal(true);
      expect(report.events).to.equal(await lastSequence());
      expect(report.signedEvents).to.equal(report.events);
      expect(report.readModelsChecked).to.deep.equal([]);
      const tail = await runCli(svc.config, ['events', 'tail'], 60_000, { ...serviceEnv(), ...asAuditor });
      expect(tail.code, tail.stderr).to.equal(0);
      const lines = tail.stdout.trim().split('\n').map((line) => JSON.parse(line) as { seq: number; corrupt?: boolean });
      expect(lines.map((line) => line.seq)).to.deep.equal(Array.from({ length: report.events }, (_, i) => i + 1));
      expect(lines.filter((line) => line.corrupt)).to.deep.equal([]);
    });

    it('runs the example analytics consumer (a durable consumer of its own) and counts an auto-applied action', async () => {
      const listed = await svc.request('GET', `/api/v1/accounts/${tenant.accounts.sandbox2}/campaigns`, { key: tenant.keys.read });
      const campaign = ((await listed.json()) as { data: any[] }).data.find(
        (c) => c.status === 'enabled' && c.bidding_strategy.type === 'maximize_conversions' && c.bidding_strategy.target_cpa !== null && c.bidding_strategy.portfolio === null,
      );
      const proposed = await svc.request('POST', `/api/v1/accounts/${tenant.accounts.sandbox2}/campaigns/${campaign.id}/target`, {
        key: tenant.keys.write,
        body: { target_cpa: Math.round(campaign.bidding_strategy.target_cpa * 105) / 100, reason: 'nats access test', auto_apply: true },
      });
      expect(((await proposed.json()) as { disposition: string }).disposition).to.equal('auto_applied');

      const consumer = new ApprovalsPerDayConsumer({
        ...analyticsSettings(),
        databaseUrl: svc.config.databaseUrl,
        stream: STREAM,
        subjectPrefix: PREFIX,
        schema: `${svc.config.databaseSchema}_analytics`,
        // The keys as a deployment gets them: from the service's public endpoint.
        trust: { kind: 'signatures', keys: await fetchSigningKeys(`${svc.baseUrl}/api/v1/event-signing-keys`) },
        retryDelayMs: 100,
      });
      await consumer.start();
      try {
        await eventually(async () => {
          const counts = await consumer.counts();
          expect(counts.find((c) => c.account_id === tenant.accounts.sandbox2)?.auto_applied).to.equal(1);
        }, 15_000);
        expect(consumer.getStats().failures).to.equal(0);
      } finally {
        await consumer.stop();
      }
    });

    it('cannot append: a publish to an event subject is refused and nothing is stored', async () => {
      const before = await lastSequence();
      const subject = `${PREFIX}.v1.${tenant.workspaceId}._.key.forged`;
      const forged = JSON.stringify({ type: 'ApiKeyIssued', data: { scope: 'admin' } });
      const refused = await jetstream(analytics).publish(subject, forged, { timeout: 3000 }).then(
        () => null,
        (error: Error) => error,
      );
      expect(refused?.message).to.match(/Permissions Violation for Publish to "ads\.v1\./);
      // A core publish (no reply expected) is dropped by the server just the same, and the
      // refusal reaches the process's log through watchNatsServerErrors (the service logs it).
      const reported: string[] = [];
      watchNatsServerErrors(analytics, (message) => reported.push(message));
      analytics.publish(subject, forged);
      await analytics.flush();
      await eventually(() => expect(reported.join('\n')).to.include(`Permissions Violation for Publish to "${subject}"`), 3000);
      expect(await lastSequence()).to.equal(before);
      const jsm = await jetstreamManager(analytics);
      const last = await jsm.direct.getMessage(STREAM, { last_by_subj: `${PREFIX}.v1.*._.key.*` });
      expect(last?.subject).not.to.equal(subject);
    });

    it('cannot delete, purge or reconfigure the stream, delete messages or write the snapshot bucket', async () => {
      const jsm = await jetstreamManager(analytics);
      const attempts: Record<string, () => Promise<unknown>> = {
        'stream delete': () => jsm.streams.delete(STREAM),
        'stream purge': () => jsm.streams.purge(STREAM),
        'stream update': () => jsm.streams.update(STREAM, { description: 'taken over' }),
        'message delete': () => jsm.streams.deleteMessage(STREAM, 1),
        'snapshot put': () => analytics.request(`$KV.${STREAM}_snapshots.x`, 'forged', { timeout: 3000 }),
      };
      for (const [what, attempt] of Object.entries(attempts)) {
        const error = await attempt().then(() => null, (e: Error) => e);
        expect(error?.message, what).to.match(/Permissions Violation/);
      }
      const info = await (await jetstreamManager(analytics)).streams.info(STREAM);
      expect(info.config.description ?? '').not.to.equal('taken over');
      expect(info.state.messages).to.equal(info.state.last_seq);
    });

    it('cannot pull from, ack for, redefine or delete the service\'s durable consumers', async () => {
      const jsm = await jetstreamManager(analytics);
      for (const name of [AGENT_WORKER_CONSUMER, projectorConsumerName(PROJECTIONS), 'projector_runs']) {
        const pull = await analytics
          .request(`$JS.API.CONSUMER.MSG.NEXT.${STREAM}.${name}`, JSON.stringify({ batch: 1, no_wait: true }), { timeout: 3000 })
          .then(() => null, (e: Error) => e);
        expect(pull?.message, `pull ${name}`).to.match(/Permissions Violation/);
        const redefine = await jsm.consumers
          .add(STREAM, { durable_name: name, ack_policy: AckPolicy.None, filter_subject: `${PREFIX}.>` })
          .then(() => null, (e: Error) => e);
        expect(redefine?.message, `redefine ${name}`).to.match(/Permissions Violation/);
        const removed = await jsm.consumers.delete(STREAM, name).then(() => null, (e: Error) => e);
        expect(removed?.message, `delete ${name}`).to.match(/Permissions Violation/);
      }
      // Still there, still the service's.
      const info = await jsm.consumers.info(STREAM, AGENT_WORKER_CONSUMER);
      expect(info.config.ack_policy).to.equal(AckPolicy.Explicit);
    });

    it('cannot read the service\'s replies: its inbox subjects are the service\'s alone', async () => {
      for (const subject of ['_INBOX.ads-service.>', '_INBOX.>', `${PREFIX}.>`]) {
        const subscription = analytics.subscribe(subject);
        const closed = await Promise.race([subscription.closed, new Promise((resolve) => setTimeout(() => resolve('still open'), 3000))]);
        expect(String(closed), subject).to.match(/Permissions Violation for Subscription/);
      }
      // Its own inbox works (every test above used it).
      expect(analytics.isClosed()).to.equal(false);
    });

    it('is denied every durable consumer the service uses (auth.conf lists each by name)', () => {
      const auth = readFileSync(deploy('nats/auth.conf'), 'utf8');
      const serviceConsumers = [
        projectorConsumerName(PROJECTIONS),
        ...PROJECTIONS.map((p) => projectorConsumerName([p])),
        AGENT_WORKER_CONSUMER,
        APPLY_WORKER_CONSUMER,
      ];
      for (const name of serviceConsumers) {
        for (const subject of [
          `$JS.API.CONSUMER.CREATE.${STREAM}.${name}`,
          `$JS.API.CONSUMER.CREATE.${STREAM}.${name}.>`,
          `$JS.API.CONSUMER.MSG.NEXT.${STREAM}.${name}`,
          `$JS.ACK.${STREAM}.${name}.>`,
        ]) {
          expect(auth, `deny of ${subject}`).to.include(`"${subject}"`);
        }
      }
    });
  });

  describe('connecting', () => {
    it('refuses a client without TLS, and the service explains it in one line naming NATS_TLS_CA', async () => {
      const exited = await startMain({ ...mainEnv(), NATS_TLS_CA: '' });
      expect(exited.code).to.equal(1);
      const lines = exited.stderr.trim().split('\n');
      expect(lines, exited.stderr).to.have.length(1);
      expect(lines[0]).to.include('TLS to NATS failed').and.include('NATS_TLS_CA');
      expect(exited.stderr + exited.stdout).not.to.include(SERVICE_PASSWORD);
    });

    it('with NATS_TLS_CA set and a server without TLS, says to point NATS_URL at the TLS listener, not to set NATS_TLS_CA', async () => {
      // The loopback server of the machine listens without TLS.
      const exited = await startMain({ ...mainEnv(), NATS_URL: 'nats://127.0.0.1:4222', NATS_USER: '', NATS_PASSWORD: '' });
      expect(exited.code).to.equal(1);
      const lines = exited.stderr.trim().split('\n');
      expect(lines, exited.stderr).to.have.length(1);
      expect(lines[0]).to.include('TLS to NATS failed').and.include('has no TLS while NATS_TLS_CA is set').and.include('point NATS_URL at its TLS listener');
    });

    it('explains wrong credentials in one line, without the password', async () => {
      const exited = await startMain({ ...mainEnv(), NATS_PASSWORD: 'wrong-secret-31f9' });
      expect(exited.code).to.equal(1);
      const lines = exited.stderr.trim().split('\n');
      expect(lines, exited.stderr).to.have.length(1);
      expect(lines[0]).to.include('NATS refused the credentials').and.include('NATS_USER/NATS_PASSWORD');
      expect(exited.stderr + exited.stdout).not.to.include('wrong-secret-31f9');
    });

    it('never prints a password given inside NATS_URL or DATABASE_URL', async () => {
      const port = await freePort();
      const unreachable = await startMain({ ...mainEnv(), NATS_USER: '', NATS_PASSWORD: '', NATS_URL: `nats://ads-service:url-secret-8d2c@127.0.0.1:${port}` });
      expect(unreachable.code).to.equal(1);
      expect(unreachable.stderr).to.include(`nats://ads-service:***@127.0.0.1:${port}`);
      expect(unreachable.stderr + unreachable.stdout).not.to.include('url-secret-8d2c');

      const token = await startMain({ ...mainEnv(), NATS_USER: '', NATS_PASSWORD: '', NATS_URL: `nats://token-secret-77aa@127.0.0.1:${port}` });
      expect(token.code).to.equal(1);
      expect(token.stderr + token.stdout).not.to.include('token-secret-77aa');

      const invalid = await startMain({ NATS_URL: 'http://u:cfg-secret-1b2c@x', DATABASE_URL: 'mysql://u:db-secret-4e5f@x/db' });
      expect(invalid.code).to.equal(2);
      expect(invalid.stderr).to.include('NATS_URL must use').and.include('DATABASE_URL must use');
      expect(invalid.stderr).not.to.include('cfg-secret-1b2c').and.not.to.include('db-secret-4e5f');
    });

    it('refuses contradictory or incomplete NATS credentials at start, listing each problem', async () => {
      const exited = await startMain({ NATS_USER: 'ads-service', NATS_TOKEN: 'tok-secret-9a', NATS_TLS_CA: join(workDir, 'missing.pem'), NATS_CREDS: caFile });
      expect(exited.code).to.equal(2);
      expect(exited.stderr)
        .to.include('NATS_USER is set but NATS_PASSWORD is not')
        .and.include('set only one way to authenticate to NATS')
        .and.include("NATS_TLS_CA '")
        .and.include('no such file')
        .and.include('is not a NATS credentials file');
      expect(exited.stderr).not.to.include('tok-secret-9a');
    });

    function mainEnv(): Record<string, string> {
      return { ...serviceEnv(), PORT: '0', DATABASE_URL: svc.config.databaseUrl, DATABASE_SCHEMA: svc.config.databaseSchema, ROLES: 'http' };
    }
  });

  describe('the shipped server configurations', () => {
    const configs = ['nats/nats.conf', 'nats-cluster/nats-1.conf', 'nats-cluster/nats-2.conf', 'nats-cluster/nats-3.conf'];

    it('are valid, include the same auth.conf and tls.conf, and keep monitoring on loopback', async () => {
      for (const config of configs) {
        const text = readFileSync(deploy(config), 'utf8');
        expect(text, config).to.match(/^include \.{1,2}\/(nats\/)?auth\.conf$/m).and.match(/^include \.{1,2}\/(nats\/)?tls\.conf/m);
        expect(text, config).to.match(/^http: 127\.0\.0\.1:\d+$/m);
        const { stderr } = await run(NATS_BIN, ['-t', '-c', deploy(config)], { cwd: workDir, env: { ...process.env, ...SERVER_ENV } });
        expect(stderr, config).to.include('is valid');
      }
    });

    it('route over mutual TLS with the certificate make-nats-tls.sh made: three nodes form a JetStream cluster', async () => {
      // The cluster's tls block exactly as shipped; ports and routes are the test's own.
      const routeTls = /cluster \{[\s\S]*?(tls \{[\s\S]*?\})/.exec(readFileSync(deploy('nats-cluster/nats-1.conf'), 'utf8'))![1];
      expect(routeTls).to.include('verify: true');
      const ports = await Promise.all([1, 2, 3].map(async () => ({ client: await freePort(), route: await freePort() })));
      const nodes = ports.map((port, i) => {
        const file = join(workDir, `node-${i + 1}.conf`);
        const routes = ports.map((p) => `nats-route://localhost:${p.route}`).join(', ');
        writeFileSync(
          file,
          [
            `server_name: node-${i + 1}`,
            `listen: 127.0.0.1:${port.client}`,
            `jetstream { store_dir: "${join(workDir, `store-${i + 1}`)}" }`,
            `cluster { name: ads, listen: 127.0.0.1:${port.route}, routes: [${routes}]`,
            routeTls,
            '}',
            `include "${relative(workDir, deploy('nats/tls.conf'))}"`,
            `include "${relative(workDir, deploy('nats/auth.conf'))}"`,
          ].join('\n'),
        );
        return spawn(NATS_BIN, ['-c', file], { cwd: workDir, env: { ...process.env, ...SERVER_ENV }, stdio: 'ignore' });
      });
      try {
        await eventually(async () => {
          expect(await nodesHoldingAnR3Stream(ports[0]!.client)).to.equal(3);
        }, 20_000, 250);
      } finally {
        for (const node of nodes) node.kill('SIGKILL');
      }

      /** An R3 stream can be created only once the routes are up: its leader plus its replicas. */
      async function nodesHoldingAnR3Stream(port: number): Promise<number> {
        const nc = await connectNats({ natsUrl: `nats://127.0.0.1:${port}`, natsCredentials: { kind: 'user-password', user: 'ads-service', password: SERVICE_PASSWORD }, natsTlsCa: caFile }, 'cluster-test');
        try {
          const jsm = await jetstreamManager(nc);
          // The event stream, as the service makes it on a cluster: the only stream name this user may create.
          const info = await jsm.streams.add({ name: STREAM, subjects: [`${PREFIX}.>`], num_replicas: 3 }).catch(() => jsm.streams.info(STREAM));
          return 1 + (info.cluster?.replicas?.length ?? 0);
        } finally {
          await nc.close();
        }
      }
    });

    it('hold no password: a server without the password variables refuses to start', async () => {
      const failed = await run(NATS_BIN, ['-t', '-c', deploy('nats/nats.conf')], { cwd: workDir, env: { PATH: process.env.PATH ?? '' } }).then(
        () => null,
        (error: { stderr: string }) => error,
      );
      expect(failed?.stderr).to.include("variable reference for 'ADS_NATS_SERVICE_PASSWORD'");
    });
  });
});

interface Exited {
  readonly code: number | null;
  readonly stdout: string;
  readonly stderr: string;
}

/** Runs `src/main.ts` as a user would, with only the given environment on top of PATH. */
function startMain(env: Record<string, string>): Promise<Exited> {
  const child = spawn(process.execPath, ['src/main.ts'], {
    cwd: repo,
    // The test's signing key, so a start that fails later never leaves a generated key in the checkout.
    env: { PATH: process.env.PATH ?? '', LOG_LEVEL: 'info', EVENT_SIGNING_KEY_FILE: testSigningKeyFile(), ...env },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let stdout = '';
  let stderr = '';
  child.stdout.on('data', (chunk) => (stdout += chunk));
  child.stderr.on('data', (chunk) => (stderr += chunk));
  const timer = setTimeout(() => child.kill('SIGKILL'), 30_000);
  return new Promise((resolve) =>
    child.once('close', (code) => {
      clearTimeout(timer);
      resolve({ code, stdout, stderr });
    }),
  );
}
