import type { Kysely } from 'kysely';
import type { Database } from '../../db/schema.ts';
import type {
  AccountSummary,
  AdsPlatform,
  Campaign,
  CampaignPerformance,
  DateRange,
  Keyword,
  NegativeKeyword,
  PlatformAccountRef,
  PlatformChange,
  SearchTerm,
  SearchTermTotal,
} from '../ads-platform.ts';
import { AccountNotConnectedError } from '../platform-errors.ts';
import { applyChange } from './sandbox-changes.ts';
import * as queries from './sandbox-queries.ts';
import { ensureSandboxAccount, type SandboxAccount } from './sandbox-store.ts';

export interface SandboxPlatformOptions {
  /** Clock for the generation date (the last day of data is the day before). Default: the system clock. */
  readonly now?: () => Date;
}

/** Account headers kept per process; past this the one opened first goes, and is read again when needed. */
const MAX_HEADERS = 10_000;

/**
 * The sandbox ads platform: deterministic advertising accounts generated from each
 * account's seed on first access, kept in Postgres (sandbox_* tables) and changed by
 * applied changes. It is the embedded default platform, so a fresh install has
 * realistic data — including waste worth finding — without any external account.
 */
export class SandboxPlatform implements AdsPlatform {
  private readonly now: () => Date;
  /**
   * Headers of the accounts this process opened. A header is written once, when its account's
   * data is generated, and never changed, so every tool call after the first needs no read of it.
   */
  private readonly headers = new Map<string, SandboxAccount>();

  private readonly db: Kysely<Database>;

  constructor(db: Kysely<Database>, options: SandboxPlatformOptions = {}) {
    this.db = db;
    this.now = options.now ?? (() => new Date());
  }

  /** Account header and totals over its last 30 days of data. */
  async accountSummary(account: PlatformAccountRef): Promise<AccountSummary> {
    return queries.accountSummary(this.db, await this.open(account));
  }

  async listCampaigns(account: PlatformAccountRef): Promise<queries.SandboxCampaign[]> {
    const { accountId } = await this.open(account);
    return queries.listCampaigns(this.db, accountId);
  }

  async getCampaign(account: PlatformAccountRef, campaignId: string): Promise<queries.SandboxCampaign | null> {
    // An account has at most 7 campaigns: reusing the list keeps one mapping of strategies.
    return (await this.listCampaigns(account)).find((campaign) => campaign.id === campaignId) ?? null;
  }

  async campaignPerformance(account: PlatformAccountRef, range: DateRange, campaignId?: string): Promise<CampaignPerformance[]> {
    const { accountId } = await this.openForRead(account, range, campaignId);
    return queries.campaignPerformance(this.db, accountId, range, campaignId);
  }

  async listKeywords(account: PlatformAccountRef, range: DateRange, campaignId?: string): Promise<Keyword[]> {
    const { accountId } = await this.openForRead(account, range, campaignId);
    return queries.listKeywords(this.db, accountId, range, campaignId);
  }

  /** Most expensive first; `limit` defaults to 50 and is capped at 500. */
  async searchTerms(account: PlatformAccountRef, range: DateRange, options: { campaignId?: string; limit?: number } = {}): Promise<SearchTerm[]> {
    const { accountId } = await this.openForRead(account, range, options.campaignId);
    return queries.searchTerms(this.db, accountId, range, options);
  }

  async searchTermTotals(account: PlatformAccountRef, range: DateRange, campaignId: string): Promise<SearchTermTotal[]> {
    const { accountId } = await this.openForRead(account, range, campaignId);
    return queries.searchTermTotals(this.db, accountId, range, campaignId);
  }

  async listNegativeKeywords(account: PlatformAccountRef, campaignId?: string): Promise<NegativeKeyword[]> {
    const { accountId } = await this.open(account);
    if (campaignId !== undefined) await queries.assertCampaign(this.db, accountId, campaignId);
    return queries.listNegativeKeywords(this.db, accountId, campaignId);
  }

  /**
   * Applies one change idempotently. Throws CampaignNotFoundError / KeywordNotFoundError
   * for unknown targets and ChangeNotApplicableError when the target cannot take the
   * change (e.g. a target CPA on a manual-CPC campaign); nothing changes in either case.
   */
  async applyChange(account: PlatformAccountRef, change: PlatformChange): Promise<void> {
    const { accountId } = await this.open(account);
    await applyChange(this.db, accountId, change);
  }

  /** Refuses accounts without a sandbox connection, then generates the account if this is its first access. */
  private async open(account: PlatformAccountRef): Promise<SandboxAccount> {
    if (account.platform !== 'sandbox') throw new AccountNotConnectedError(account.accountId);
    const known = this.headers.get(account.accountId);
    if (known) return known;
    const header = await ensureSandboxAccount(this.db, account, this.now());
    this.headers.set(account.accountId, header);
    if (this.headers.size > MAX_HEADERS) this.headers.delete(this.headers.keys().next().value!);
    return header;
  }

  /** `open` plus the checks every ranged read shares: a valid range and, if named, an existing campaign. */
  private async openForRead(account: PlatformAccountRef, range: DateRange, campaignId: string | undefined): Promise<SandboxAccount> {
    const opened = await this.open(account);
    queries.checkRange(range);
    // An unknown campaign is an error the agent can act on, not an empty result it might misread.
    if (campaignId !== undefined) await queries.assertCampaign(this.db, opened.accountId, campaignId);
    return opened;
  }
}
