import type { AccessToken } from './oauth-token-client.ts';

/**
 * Access tokens per account, kept until shortly before they expire. One exchange at a time
 * per account: callers that need a token while one is being fetched wait for that one, and
 * a refresh after a 401 happens once however many calls saw the 401 with the same token.
 */
export class AccessTokenCache {
  private readonly tokens = new Map<string, AccessToken>();
  private readonly pending = new Map<string, Promise<AccessToken>>();

  constructor(
    private readonly exchange: (accountId: string) => Promise<AccessToken>,
    private readonly options: { readonly now?: () => number; readonly refreshMarginMs?: number } = {},
  ) {}

  /** A token valid for at least the refresh margin (60 s by default). */
  async get(accountId: string): Promise<string> {
    const cached = this.tokens.get(accountId);
    const now = this.options.now?.() ?? Date.now();
    if (cached && cached.expiresAt - (this.options.refreshMarginMs ?? 60_000) > now) return cached.token;
    return (await this.fetch(accountId)).token;
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

  /** Forgets the account's token (its grant was replaced). */
  forget(accountId: string): void {
    this.tokens.delete(accountId);
  }

  private fetch(accountId: string): Promise<AccessToken> {
    const inFlight = this.pending.get(accountId);
    if (inFlight) return inFlight;
    const request = this.exchange(accountId)
      .then((token) => {
        this.tokens.set(accountId, token);
        return token;
      })
      .finally(() => this.pending.delete(accountId));
    this.pending.set(accountId, request);
    return request;
  }
}
