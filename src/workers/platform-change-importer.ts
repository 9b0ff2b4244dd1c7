import type { Infrastructure } from '../runtime/infrastructure.ts';
import type { Logger } from '../log/logger.ts';
import type { AdsPlatform } from '../platform/ads-platform.ts';
import type { Actor } from '../events/envelope.ts';
import { accountDecider } from '../../commands/account/account-decider.ts';
import { loadAccount } from '../../commands/queries.ts';

export interface PlatformChangeImporterOptions {
  readonly infrastructure: Pick<Infrastructure, 'aggregates' | 'commands' | 'database'>;
  readonly platform: AdsPlatform;
  readonly logger: Logger;
  /** Pause between two imports of every account; 0: never on a timer (only `importAccount` on demand). */
  readonly intervalMs: number;
  readonly actor?: Actor;
}

/**
 * Imports the changes the advertising platform reports (Google Ads change_event) into each
 * Google Ads account's history as PlatformChangeObserved events, so auditors see changes
 * made outside the service too. Runs in the apply-worker role; several copies are safe (the
 * account aggregate records each change once). An account that fails (grant revoked) is
 * logged and skipped; the others are imported.
 */
export class PlatformChangeImporter {
  private timer: NodeJS.Timeout | undefined;
  private running: Promise<void> | undefined;
  private stopped = false;
  private readonly actor: Actor;

  private readonly options: PlatformChangeImporterOptions;

  constructor(options: PlatformChangeImporterOptions) {
    this.options = options;
    this.actor = options.actor ?? { kind: 'worker', id: 'platform-change-importer' };
  }

  start(): void {
    if (this.options.intervalMs <= 0) return;
    const tick = () => {
      if (this.stopped) return;
      this.running = this.importAll()
        .catch((error: unknown) => {
          // Listing the accounts needs Postgres; while it is down, the next tick tries again.
          this.options.logger.warn({ err: error instanceof Error ? error.message : String(error) }, 'platform change import could not list accounts; retrying on the next tick');
        })
        .finally(() => {
          if (!this.stopped) this.timer = setTimeout(tick, this.options.intervalMs);
        });
    };
    this.timer = setTimeout(tick, Math.min(1000, this.options.intervalMs));
  }

  async stop(): Promise<void> {
    this.stopped = true;
    clearTimeout(this.timer);
    await this.running;
  }

  async importAll(): Promise<void> {
    const accounts = await this.options.infrastructure.database.db.selectFrom('accounts').select(['id', 'workspace_id']).where('platform', '=', 'google-ads').execute();
    for (const account of accounts) {
      if (this.stopped) return;
      try {
        await this.importAccount(account.workspace_id, account.id);
      } catch (error) {
        this.options.logger.warn({ account_id: account.id, err: error instanceof Error ? error.message : String(error) }, 'platform change import failed');
      }
    }
  }

  /** Records the account's platform changes not recorded yet; how many were recorded. */
  async importAccount(workspaceId: string, accountId: string): Promise<number> {
    const { aggregates, commands } = this.options.infrastructure;
    const { state } = await loadAccount(aggregates, workspaceId, accountId);
    if (!state.exists || state.platform !== 'google-ads') return 0;
    const ref = { accountId, name: state.name, platform: state.platform, sandboxSeed: state.sandboxSeed, googleAds: state.googleAds };
    const changes = (await this.options.platform.platformChanges?.(ref, state.platformChanges.lastTime)) ?? [];
    if (changes.length === 0) return 0;
    const result = await commands.handle(accountDecider, { type: 'RecordPlatformChanges', workspaceId, accountId, changes, meta: { actor: this.actor, correlationId: accountId } });
    if (result.appended.length > 0) this.options.logger.info({ account_id: accountId, recorded: result.appended.length }, 'platform changes recorded');
    return result.appended.length;
  }
}
