import { readFile } from 'node:fs/promises';
import { parseArgs } from 'node:util';
import cliProgress from 'cli-progress';
import { PROJECTIONS, projectionNamed } from '../../projections/index.ts';
import { rebuildProjection } from '../../projections/runtime/rebuild.ts';
import { ConfigError, loadConfig, type Config } from '../config/config.ts';
import { PostgresUnreachableError } from '../db/database.ts';
import { isProblemError } from '../errors/problem-error.ts';
import { KEY_SCOPES, PLATFORM_KINDS, type KeyScope, type PlatformKind } from '../events/catalogue/index.ts';
import { NatsUnreachableError } from '../event-store/nats-connection.ts';
import { SigningKeyError } from '../events/signing/signing-keys.ts';
import { createAccount, createWorkspace, issueKey, revokeKey, setDistinctApprover, setKillSwitch } from '../operator/operator-commands.ts';
import { connectGoogleAdsAccount, reconnectGoogleAdsAccount } from '../operator/connect-google-ads.ts';
import { CredentialsKeyMissingError } from '../platform/credentials/credential-store.ts';
import { PlatformUnavailableError } from '../platform/platform-errors.ts';
import { openInfrastructure, type Infrastructure } from '../runtime/infrastructure.ts';
import { createDemo, describeDemo } from './demo.ts';
import { runAuditVerify } from './audit-verify-command.ts';
import { runEventsTail } from './events-tail-command.ts';
import { runQuarantineCommand } from './quarantine-command.ts';
import { runKeysExportPublic } from './keys-command.ts';
import { printResult, UsageError, warn } from './output.ts';

const USAGE = `usage: adsagent <command> [options] [--json]

  workspace create --name NAME
  workspace set WS --require-distinct-approver on|off
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
  demo
  projections rebuild [NAME ...]      (default: every projection)
  projections quarantine list         events projections parked instead of applying
  projections quarantine retry SEQ [--force]

Configuration comes from the same environment variables as the service (README).`;

export type Options = Record<string, string | boolean | string[] | undefined>;

function required(options: Options, name: string): string {
  const value = options[name];
  if (typeof value !== 'string' || value === '') throw new UsageError(`--${name} is required`);
  return value;
}

function oneOf<T extends string>(value: string, allowed: readonly T[], name: string): T {
  if (!(allowed as readonly string[]).includes(value)) throw new UsageError(`--${name} must be one of ${allowed.join(', ')}`);
  return value as T;
}

/** The refresh token comes from a file, never the command line, where `ps` and shell history would keep it. */
async function readRefreshToken(options: Options): Promise<string> {
  const path = required(options, 'refresh-token-file');
  let text: string;
  try {
    text = await readFile(path, 'utf8');
  } catch (error) {
    throw new UsageError(`--refresh-token-file ${path} cannot be read (${(error as NodeJS.ErrnoException).code ?? 'error'})`);
  }
  const token = text.trim();
  if (token === '' || /\s/.test(token)) throw new UsageError(`--refresh-token-file ${path} must hold one refresh token and nothing else`);
  return token;
}

function notVisibleWarning(visible: boolean): void {
  if (!visible) warn('recorded, but no projector has shown it yet: is the service running? It takes effect once projectors run.');
}

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
      if (!workspaceId) throw new UsageError('workspace set needs WS (a workspace id)');
      const setting = options['require-distinct-approver'];
      if (setting === undefined) throw new UsageError('workspace set needs --require-distinct-approver on|off');
      const required = oneOf(String(setting), ['on', 'off'] as const, 'require-distinct-approver') === 'on';
      const result = await setDistinctApprover(infra, workspaceId, required);
      return printResult(json, result.value, `distinct approver ${result.value.require_distinct_approver ? 'required' : 'not required'} for ${workspaceId}`);
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
      if (!accountId) throw new UsageError('account reconnect needs ACCOUNT_ID');
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
      if (!keyId) throw new UsageError('key revoke needs KEY_ID');
      const result = await revokeKey(infra, keyId);
      notVisibleWarning(result.visible);
      return printResult(json, { ...result.value, revoked: true }, `revoked ${keyId}`);
    }
    case 'killswitch on':
    case 'killswitch off': {
      const result = await setKillSwitch(infra, required(options, 'workspace'), verb === 'on', String(options.reason ?? ''));
      return printResult(json, result.value, `kill switch ${result.value.engaged ? 'engaged' : 'released'} for ${result.value.workspace_id}`);
    }
    case 'audit verify':
      return runAuditVerify(infra, config, options, json);
    case 'keys export-public':
      return runKeysExportPublic(infra, json);
    case 'events tail':
      return runEventsTail(infra, options);
    case 'demo': {
      const demo = await createDemo(infra, config);
      return printResult(json, demo as unknown as Record<string, unknown>, describeDemo(demo));
    }
    case 'projections rebuild': {
      const names = rest.length > 0 ? rest : PROJECTIONS.map((p) => p.name);
      const results: Record<string, unknown> = {};
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
          onProgress: (seq, target) => {
            bar.setTotal(Math.max(1, target));
            bar.update(seq);
          },
        });
        bar.update(result.lastSeq);
        bar.stop();
        results[name] = result;
      }
      return printResult(json, results, Object.entries(results).map(([n, r]) => `${n}: ${JSON.stringify(r)}`).join('\n'));
    }
    case 'projections quarantine':
      return runQuarantineCommand(infra, rest, options, json);
    default:
      throw new UsageError(`unknown command '${command.join(' ')}'`);
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
        'customer-id': { type: 'string' },
        'login-customer-id': { type: 'string' },
        'refresh-token-file': { type: 'string' },
      },
    });
  } catch (error) {
    warn(error instanceof Error ? error.message : String(error));
    process.stderr.write(`${USAGE}\n`);
    return 2;
  }
  if (parsed.values.help || parsed.positionals.length === 0) {
    process.stdout.write(`${USAGE}\n`);
    return parsed.values.help ? 0 : 2;
  }
  let config: Config;
  try {
    config = loadConfig();
  } catch (error) {
    if (error instanceof ConfigError) {
      for (const problem of error.problems) warn(`config: ${problem}`);
      return 2;
    }
    throw error;
  }
  let infra: Infrastructure | undefined;
  try {
    // An offline audit with --public-key verifies with those keys only and never reads the private key.
    const publicKeyFiles = parsed.positionals.join(' ') === 'audit verify' ? parsed.values['public-key'] : undefined;
    infra = await openInfrastructure(config, 'adsagent-cli', { notice: warn, publicKeyFiles });
    return (await run(parsed.positionals, parsed.values, parsed.values.json ?? false, infra, config)) ?? 0;
  } catch (error) {
    if (error instanceof UsageError) {
      warn(error.message);
      process.stderr.write(`${USAGE}\n`);
      return 2;
    }
    if (
      error instanceof NatsUnreachableError ||
      error instanceof PostgresUnreachableError ||
      error instanceof SigningKeyError ||
      error instanceof CredentialsKeyMissingError ||
      error instanceof PlatformUnavailableError
    ) {
      warn(error.message);
      return 1;
    }
    if (isProblemError(error)) {
      warn(`${error.problem.title}: ${error.problem.detail ?? ''}`);
      return 1;
    }
    throw error;
  } finally {
    await infra?.close();
  }
}

process.exitCode = await main();
