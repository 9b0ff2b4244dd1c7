import { readFile } from 'node:fs/promises';
import { parseArgs } from 'node:util';
import cliProgress from 'cli-progress';
import { PROJECTIONS, projectionNamed } from '../../projections/index.ts';
import { rebuildProjection, RebuildLockLostError, RebuildSwapError } from '../../projections/runtime/rebuild.ts';
import { admissionSealsOf } from '../../projections/runtime/admission-seals.ts';
import { createLogger } from '../log/logger.ts';
import { ConfigError, loadConfig, type Config } from '../config/config.ts';
import { PostgresUnreachableError } from '../db/database.ts';
import { KEY_SCOPES, PLATFORM_KINDS, type KeyScope, type PlatformKind } from '../events/catalogue/index.ts';
import { NatsUnreachableError } from '../event-store/nats-connection.ts';
import { EventStreamSetupError } from '../event-store/stream-setup.ts';
import { SigningKeyError } from '../events/signing/signing-keys.ts';
import { createAccount, createWorkspace, issueKey, pauseRunStarts, revokeKey, setDistinctApprover, setKillSwitch } from '../operator/operator-commands.ts';
import { connectGoogleAdsAccount, CustomerConnectionUnknownError, GoogleAdsCustomerConnectedError, reconnectGoogleAdsAccount } from '../operator/connect-google-ads.ts';
import { CredentialsKeyMissingError } from '../platform/credentials/credential-store.ts';
import { PlatformUnavailableError } from '../platform/platform-errors.ts';
import { openInfrastructure, type Infrastructure } from '../runtime/infrastructure.ts';
import { openReaderInfrastructure, type ReaderInfrastructure } from '../runtime/reader-infrastructure.ts';
import { createDemo, describeDemo } from './demo.ts';
import { runAuditVerify } from './audit-verify-command.ts';
import { checkEventsTailOptions, runEventsTail } from './events-tail-command.ts';
import { refusalMessage } from './error-advice.ts';
import { runQuarantineCommand } from './quarantine-command.ts';
import { runKeysExportPublic } from './keys-command.ts';
import type { Options } from './cli-options.ts';
import { CliError, printResult, UsageError, warn } from './output.ts';
import { EventSchemaError } from '../events/event-validator.ts';
import { terminalText } from '../text/terminal-text.ts';

const USAGE = `usage: adsagent <command> [options] [--json]

  workspace create --name NAME
  workspace set WS --require-distinct-approver on|off
  workspace pause-runs WS --for SECONDS [--reason TEXT]   (queued runs wait; they can still be canceled)
  workspace resume-runs WS [--reason TEXT]
  account create --workspace WS --name NAME [--platform sandbox|none]
  account create --workspace WS --name NAME --platform google-ads --customer-id 123-456-7890
                 [--login-customer-id 111-222-3333] --refresh-token-file PATH
  account reconnect ACCOUNT_ID --refresh-token-file PATH   (a Google Ads account's new grant)
  key create --workspace WS --scope read|write|admin [--name NAME]
  key revoke KEY_ID
  killswitch on|off --workspace WS [--reason TEXT]
  audit verify [--account ID] [--from-seq N] [--public-key FILE ...]
  keys export-public                  (PEM; with --json the key directory)
  events tail [--account ID] [--type TYPE] [--from-seq N | --since TIME] [--follow]
  demo [--url URL] [--hold SECONDS]   (a real run, then a curl for every endpoint; URL defaults to PUBLIC_BASE_URL;
                                       a second run stays queued for --hold s (default 600, 0: none) to show cancel)
  projections rebuild [NAME ...]      (default: every projection)
  projections quarantine list         events projections parked instead of applying
  projections quarantine retry SEQ [--force]

Every command prints text; add --json for one JSON document.
Configuration comes from the same environment variables as the service (README, Configuration).`;

/** What a placeholder in an error message stands for, so the message can show a whole flag. */
const EXAMPLE_VALUE: Readonly<Record<string, string>> = {
  name: 'NAME',
  workspace: 'WS (a workspace id, from `adsagent workspace create`)',
  scope: 'read|write|admin',
  'customer-id': '123-456-7890',
  'refresh-token-file': 'PATH',
  for: 'SECONDS',
};


function required(options: Options, name: string): string {
  const value = options[name];
  if (typeof value !== 'string' || value === '') throw new UsageError(`missing --${name}: add --${name} ${EXAMPLE_VALUE[name] ?? 'VALUE'}`);
  return value;
}

/** Whole seconds, 1 to 7 days: a pause is a pause, not a way to switch a workspace off. */
function positiveSeconds(value: string): number {
  const seconds = /^[0-9]{1,7}$/.test(value) ? Number(value) : NaN;
  if (!(seconds >= 1 && seconds <= 7 * 86_400)) throw new UsageError(`--for must be whole seconds from 1 to 604800 (7 days) (got '${value}')`);
  return seconds;
}

function oneOf<T extends string>(value: string, allowed: readonly T[], name: string): T {
  if (!(allowed as readonly string[]).includes(value)) throw new UsageError(`--${name} must be one of ${allowed.join(', ')} (got '${value}')`);
  return value as T;
}

/** The refresh token comes from a file, never the command line, where `ps` and shell history would keep it. */
async function readRefreshToken(options: Options): Promise<string> {
  const path = required(options, 'refresh-token-file');
  let text: string;
  try {
    text = await readFile(path, 'utf8');
  } catch (error) {
    throw new UsageError(`--refresh-token-file ${path} cannot be read (${(error as NodeJS.ErrnoException).code ?? 'error'}): check the path and that this user may read it`);
  }
  const token = text.trim();
  if (token === '' || /\s/.test(token)) throw new UsageError(`--refresh-token-file ${path} must hold one refresh token and nothing else`);
  return token;
}

function notVisibleWarning(visible: boolean): void {
  if (!visible) warn('recorded, but no projector has shown it yet: is the service running? It takes effect once projectors run.');
}

/** Every command `run` (and the readers above it) knows: anything else is refused before connecting. */
const COMMANDS: ReadonlySet<string> = new Set([
  'workspace create',
  'workspace set',
  'workspace pause-runs',
  'workspace resume-runs',
  'account create',
  'account reconnect',
  'key create',
  'key revoke',
  'killswitch on',
  'killswitch off',
  'keys export-public',
  'demo',
  'projections rebuild',
  'projections quarantine',
  'audit verify',
  'events tail',
]);

async function run(command: string[], options: Options, json: boolean, infra: Infrastructure, config: Config): Promise<number | void> {
  const [noun, verb, ...rest] = command;
  switch (`${noun} ${verb ?? ''}`.trim()) {
    case 'workspace create': {
      const result = await createWorkspace(infra, required(options, 'name'));
      notVisibleWarning(result.visible);
      return printResult(json, result.value, result.value.id);
    }
    case 'workspace set': {
      const workspaceId = rest[0];
      if (!workspaceId) throw new UsageError('workspace set needs WS: adsagent workspace set WS --require-distinct-approver on|off (WS from `adsagent workspace create`)');
      const setting = options['require-distinct-approver'];
      if (setting === undefined) throw new UsageError('workspace set needs --require-distinct-approver on|off');
      const required = oneOf(String(setting), ['on', 'off'] as const, 'require-distinct-approver') === 'on';
      const result = await setDistinctApprover(infra, workspaceId, required);
      return printResult(json, result.value, `distinct approver ${result.value.require_distinct_approver ? 'required' : 'not required'} for ${workspaceId}`);
    }
    case 'workspace pause-runs':
    case 'workspace resume-runs': {
      const pausing = verb === 'pause-runs';
      const workspaceId = rest[0];
      if (!workspaceId) throw new UsageError(`workspace ${verb} needs WS: adsagent workspace ${verb} WS${pausing ? ' --for SECONDS' : ''} (WS from \`adsagent workspace create\`)`);
      const seconds = pausing ? positiveSeconds(required(options, 'for')) : null;
      const reason = String(options.reason ?? (pausing ? 'paused by an operator' : 'resumed by an operator'));
      const result = await pauseRunStarts(infra, workspaceId, seconds, reason);
      const until = result.value.run_starts_paused_until;
      return printResult(json, result.value, until ? `run starts of ${workspaceId} paused until ${until}` : `run starts of ${workspaceId} resumed`);
    }
    case 'account create': {
      const platform = oneOf<PlatformKind>(String(options.platform ?? 'sandbox'), PLATFORM_KINDS, 'platform');
      const result =
        platform === 'google-ads'
          ? await connectGoogleAdsAccount(infra, {
              workspaceId: required(options, 'workspace'),
              name: required(options, 'name'),
              customerId: required(options, 'customer-id'),
              loginCustomerId: typeof options['login-customer-id'] === 'string' ? options['login-customer-id'] : undefined,
              refreshToken: await readRefreshToken(options),
            })
          : await createAccount(infra, required(options, 'workspace'), required(options, 'name'), platform);
      notVisibleWarning(result.visible);
      return printResult(json, result.value, result.value.id);
    }
    case 'account reconnect': {
      const accountId = rest[0];
      if (!accountId) throw new UsageError('account reconnect needs ACCOUNT_ID: adsagent account reconnect ACCOUNT_ID --refresh-token-file PATH');
      const result = await reconnectGoogleAdsAccount(infra, accountId, await readRefreshToken(options));
      return printResult(json, { ...result.value, reconnected: true }, `reconnected ${accountId}`);
    }
    case 'key create': {
      const scope = oneOf<KeyScope>(required(options, 'scope'), KEY_SCOPES, 'scope');
      const result = await issueKey(infra, required(options, 'workspace'), scope, String(options.name ?? ''));
      notVisibleWarning(result.visible);
      return printResult(json, result.value, `${result.value.id}\n${result.value.key}\n(the key is shown once; only its hash is stored)`);
    }
    case 'key revoke': {
      const keyId = rest[0];
      if (!keyId) throw new UsageError('key revoke needs KEY_ID: adsagent key revoke KEY_ID (the id `adsagent key create` printed first, not the key)');
      const result = await revokeKey(infra, keyId);
      notVisibleWarning(result.visible);
      return printResult(json, { ...result.value, revoked: true }, `revoked ${keyId}`);
    }
    case 'killswitch on':
    case 'killswitch off': {
      const result = await setKillSwitch(infra, required(options, 'workspace'), verb === 'on', String(options.reason ?? ''));
      return printResult(json, result.value, `kill switch ${result.value.engaged ? 'engaged' : 'released'} for ${result.value.workspace_id}`);
    }
    case 'keys export-public':
      return runKeysExportPublic(infra, json);
    case 'demo': {
      const holdSeconds = typeof options.hold === 'string' ? (options.hold === '0' ? 0 : positiveSeconds(options.hold)) : undefined;
      const demo = await createDemo(infra, typeof options.url === 'string' ? options.url : config.publicBaseUrl, { holdSeconds });
      return printResult(json, demo as unknown as Record<string, unknown>, describeDemo(demo));
    }
    case 'projections rebuild': {
      const names = rest.length > 0 ? rest : PROJECTIONS.map((p) => p.name);
      const results: Record<string, unknown> = {};
      // Blocks the projectors admitted before are believed from their seals, as the projectors do (docs/operations.md).
      const seals = admissionSealsOf(infra, createLogger('silent'));
      for (const name of names) {
        const projection = projectionNamed(name);
        if (!projection) throw new UsageError(`unknown projection '${name}' (known: ${PROJECTIONS.map((p) => p.name).join(', ')})`);
        const bar = new cliProgress.SingleBar(
          { format: `${name.padEnd(10)} [{bar}] {percentage}% | {value}/{total} events | {duration}s`, stream: process.stderr },
          cliProgress.Presets.shades_classic,
        );
        bar.start(Math.max(1, await infra.store.lastSequence()), 0);
        const result = await rebuildProjection({
          db: infra.database.db,
          store: infra.store,
          schema: config.databaseSchema,
          filterSubject: infra.subjects.all,
          projection,
          seals,
          onWait: () => process.stderr.write(`${name}: another rebuild of schema ${config.databaseSchema} is running; waiting for it to end\n`),
          onProgress: (seq, target) => {
            bar.setTotal(Math.max(1, target));
            bar.update(seq);
          },
        }).catch((error: unknown) => {
          bar.stop();
          // Postgres ended every swap attempt (a deadlock with the live projector, say): nothing changed, and another run can succeed.
          if (error instanceof RebuildSwapError || error instanceof RebuildLockLostError) throw new CliError(error.message);
          throw error;
        });
        bar.update(result.lastSeq);
        bar.stop();
        results[name] = result;
      }
      await seals.flush();
      return printResult(json, results, Object.entries(results).map(([n, r]) => `${n}: ${JSON.stringify(r)}`).join('\n'));
    }
    case 'projections quarantine':
      return runQuarantineCommand(infra, rest, options, json);
    default:
      throw new UsageError(`unknown command '${command.join(' ')}'; the commands are listed below (adsagent --help)`);
  }
}

async function main(): Promise<number> {
  let parsed;
  try {
    parsed = parseArgs({
      allowPositionals: true,
      options: {
        json: { type: 'boolean', default: false },
        help: { type: 'boolean', short: 'h', default: false },
        name: { type: 'string' },
        workspace: { type: 'string' },
        platform: { type: 'string' },
        scope: { type: 'string' },
        reason: { type: 'string' },
        account: { type: 'string' },
        type: { type: 'string' },
        'from-seq': { type: 'string' },
        since: { type: 'string' },
        follow: { type: 'boolean', default: false },
        force: { type: 'boolean', default: false },
        'public-key': { type: 'string', multiple: true },
        'require-distinct-approver': { type: 'string' },
        for: { type: 'string' },
        hold: { type: 'string' },
        'customer-id': { type: 'string' },
        'login-customer-id': { type: 'string' },
        'refresh-token-file': { type: 'string' },
        url: { type: 'string' },
      },
    });
  } catch (error) {
    // Node's message names the option ("Unknown option '--nme'"); the usage below shows the right one.
    warn(`${error instanceof Error ? error.message : String(error)}; the commands and their options are below`);
    process.stderr.write(`${USAGE}\n`);
    return 2;
  }
  if (parsed.values.help) {
    process.stdout.write(`${USAGE}\n`);
    return 0;
  }
  if (parsed.positionals.length === 0) {
    warn('no command given; pick one of the commands below');
    process.stderr.write(`${USAGE}\n`);
    return 2;
  }
  // Options that are wrong whatever the service holds are refused before connecting to it.
  const [noun, verb] = parsed.positionals;
  if (!COMMANDS.has(`${noun} ${verb ?? ''}`.trim())) {
    warn(`unknown command '${parsed.positionals.join(' ')}'; the commands are listed below (adsagent --help)`);
    process.stderr.write(`${USAGE}\n`);
    return 2;
  }
  try {
    if (parsed.positionals.join(' ') === 'events tail') checkEventsTailOptions(parsed.values);
  } catch (error) {
    if (!(error instanceof UsageError)) throw error;
    warn(error.message);
    return 2;
  }
  let config: Config;
  try {
    config = loadConfig();
  } catch (error) {
    if (error instanceof ConfigError) {
      for (const problem of error.problems) warn(`config: ${problem}`);
      warn('fix the environment variables above (README.md, "Configuration", lists each) and run the command again');
      return 2;
    }
    throw error;
  }
  let infra: Infrastructure | ReaderInfrastructure | undefined;
  try {
    const command = parsed.positionals.join(' ');
    if (command === 'audit verify' || command === 'events tail') {
      // Readers of the log change nothing and need read access only. An offline audit with
      // --public-key verifies with those keys, never reads the private key, and opens no database.
      const publicKeyFiles = command === 'audit verify' ? parsed.values['public-key'] : undefined;
      const reader = await openReaderInfrastructure(config, 'adsagent-cli', { notice: warn, publicKeyFiles, database: command === 'audit verify' && publicKeyFiles === undefined });
      infra = reader;
      return command === 'audit verify' ? await runAuditVerify(reader, config, parsed.values, parsed.values.json ?? false) : await runEventsTail(reader, parsed.values);
    }
    const full = await openInfrastructure(config, 'adsagent-cli', { notice: warn, createSigningKey: false });
    infra = full;
    return (await run(parsed.positionals, parsed.values, parsed.values.json ?? false, full, config)) ?? 0;
  } catch (error) {
    if (error instanceof UsageError) {
      warn(error.message);
      process.stderr.write(`${USAGE}\n`);
      return 2;
    }
    // These messages already end with what to do (start the service, set the variable).
    if (
      error instanceof NatsUnreachableError ||
      error instanceof PostgresUnreachableError ||
      error instanceof CredentialsKeyMissingError ||
      error instanceof EventStreamSetupError ||
      error instanceof GoogleAdsCustomerConnectedError ||
      error instanceof CustomerConnectionUnknownError
    ) {
      warn(error.message);
      return 1;
    }
    if (error instanceof SigningKeyError) {
      warn(`${error.message}; check EVENT_SIGNING_KEY_FILE, EVENT_SIGNING_RETIRED_PUBLIC_KEYS and --public-key (docs/operations.md, "Event signing keys")`);
      return 1;
    }
    if (error instanceof PlatformUnavailableError) {
      warn(`${error.message}; try again in a minute, and check the account's Google Ads grant (adsagent account reconnect; docs/operations.md, "Google Ads accounts")`);
      return 1;
    }
    if (error instanceof CliError) {
      warn(error.message);
      return 1;
    }
    // A value the operator typed that no event may hold (too long, a control character): theirs to fix, not a bug.
    if (error instanceof EventSchemaError) {
      warn(
        `a value you gave cannot be recorded: ${terminalText(error.errors.join('; '))}; shorten or correct it (/data/name is --name, ` +
          '/data/reason is --reason) and run the command again',
      );
      return 2;
    }
    const refusal = refusalMessage(error);
    if (refusal !== null) {
      warn(refusal);
      return 1;
    }
    warn(`unexpected error (a bug in adsagent): ${error instanceof Error ? error.message : String(error)}; please report it with the command you ran and the trace below`);
    process.stderr.write(`${error instanceof Error ? error.stack : ''}\n`);
    return 1;
  } finally {
    await infra?.close();
  }
}

// The reader of our output went away (`adsagent events tail | head -1`): what it wanted, it
// has; end quietly as other command-line tools do, instead of crashing on the next write.
process.stdout.on('error', (error: NodeJS.ErrnoException) => {
  if (error.code === 'EPIPE') process.exit(0);
  throw error;
});

process.exitCode = await main();
