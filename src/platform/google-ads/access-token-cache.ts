import type { AccessToken } from './oauth-token-client.ts';

/**
 * Access tokens per account, kept until shortly before they expire. One exchange at a time
 * per account: callers that need a token while one is being fetched wait for that one, and
 * a refresh after a 401 happens once however many calls saw the 401 with the same token.
 * A grant replaced by `adsagent account reconnect` (another process) is taken up when the
 * cached token expires or is refused: each exchange reads the stored refresh token again.
 */
export class AccessTokenCache {
  private readonly tokens = new Map<string, AccessToken & { readonly obtainedAt: number }>();
  private readonly pending = new Map<string, Promise<AccessToken>>();

  private readonly exchange: (accountId: string) => Promise<AccessToken>;
  private readonly options: { readonly now?: () => number; readonly refreshMarginMs?: number };

  constructor(
    exchange: (accountId: string) => Promise<AccessToken>,
    options: { readonly now?: () => number; readonly refreshMarginMs?: number } = {},
  ) {
    this.exchange = exchange;
    this.options = options;
  }

  /**
   * A token valid for at least the refresh margin (60 s by default, or half the token's
   * lifetime if that is shorter, so a short-lived token is still reused).
   */
  async get(accountId: string): Promise<string> {
    const cached = this.tokens.get(accountId);
    if (cached) {
      const margin = Math.min(this.options.refreshMarginMs ?? 60_000, (cached.expiresAt - cached.obtainedAt) / 2);
      if (cached.expiresAt - margin > this.now()) return cached.token;
    }
    return (await this.fetch(accountId)).token;
  }

  private now(): number {
    return this.options.now?.() ?? Date.now();
  }

  /**
   * Google refused `rejected`: a new token, unless another caller already replaced it (then
   * that one), so concurrent 401s cost one exchange.
   */
  async refresh(accountId: string, rejected: string): Promise<string> {
    const cached = this.tokens.get(accountId);
    if (cached && cached.token !== rejected) return cached.token;
    const inFlight = this.pending.get(accountId);
    if (inFlight) return (await inFlight).token;
    this.tokens.delete(accountId);
    return (await this.fetch(accountId)).token;
  }

  private fetch(accountId: string): Promise<AccessToken> {
    const inFlight = this.pending.get(accountId);
    if (inFlight) return inFlight;
    const request = this.exchange(accountId)
      .then((token) => {
        this.tokens.set(accountId, { ...token, obtainedAt: this.now() });
        return token;
      })
      .finally(() => this.pending.delete(accountId));
    this.pending.set(accountId, request);
    return request;
  }
}
